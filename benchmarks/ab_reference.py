"""A/B against a reference endpoint: false-failure and detection rates of the paired test.

What ``--llm-reference-endpoint`` promises (issue 14): at most 1% false
failures over identical A/B runs, at least 95% detection of a candidate 10%
slower in step time. This script measures both on the simulator, through the
same code the plugin runs (:class:`~pytest_llmperf.methodology.LlmLoadgen`
with a reference: interleaved ABBA blocks, :func:`pytest_llmperf.slo.paired.paired_checks`).

Three simulator processes, each its own process as the plugin starts them:
the reference, an identical candidate, and a slow candidate whose step time
is 10% longer (profile ``tiny``, an engine model whose every step costs
``beta0 + beta1*prefill + beta2*decode + beta3*context``: every beta × 1.1;
``--profile fixed`` scales ``ttft_ms``/``itl_ms`` instead). Each A/B is one
gated run of a small test (``--requests`` requests, closed loop at
``--concurrency``), split into ``--blocks`` blocks per side (default 4, the
default of ``--llm-ab-blocks``) and judged at ``--threshold`` (default 5%, the
default of ``--llm-ab-threshold``): that is the plugin's verdict, counted as
"shipped". A run "fails" when any compared statistic is ``regressed``; the
default statistics are ttft/tpot p50/p99 (p99 needs 1,000 samples per side,
so with small runs it is inconclusive and only the p50s decide).

The decision depends on the threshold only through ``change > threshold``
(p-value and block pairs do not), so each comparison is also re-judged at
every ``--thresholds`` value, and with other rules for condition 3, from the
same runs::

    python benchmarks/ab_reference.py                   # 50 identical + 40 slower, tiny
    python benchmarks/ab_reference.py --profile fixed --blocks 6 --threshold 7%
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.methodology import LlmLoadgen
from pytest_llmperf.methodology.reference import AB_BLOCKS, AbComparison
from pytest_llmperf.sim import start_sim_process
from pytest_llmperf.sim.profiles import load_profile
from pytest_llmperf.slo.paired import BLOCKS_ALPHA, DEFAULT_AB_THRESHOLD, PairedCheck
from pytest_llmperf.slo.regression import DEFAULT_ALPHA, RegressionVerdict, Thresholds
from pytest_llmperf.specs.perf import PerfSpec

STEP_KEYS = {
    "tiny": ("beta0_us", "beta1_us", "beta2_us", "beta3_us"),
    "fixed": ("ttft_ms", "itl_ms"),
}


def slower(profile: str, factor: float) -> dict[str, float]:
    base = load_profile(profile)
    return {key: getattr(base, key) * factor for key in STEP_KEYS[profile]}


RULES = {
    # condition 3 of the paired rule, each with 1 (change > threshold) and 2 (bootstrap p)
    "t-blocks": lambda c: c.p_blocks is not None and c.p_blocks < BLOCKS_ALPHA,  # shipped
    "majority": lambda c: c.slower_blocks >= len(c.block_log_ratios) // 2 + 1,
    "all-blocks": lambda c: c.slower_blocks == len(c.block_log_ratios),
    "bootstrap-only": lambda c: True,
}


def worse_at(check: PairedCheck, threshold: float, rule: str) -> bool:
    """The paired rule at ``threshold`` with condition 3 as ``rule``."""
    if check.change is None or check.p_value is None:
        return False
    return check.change > threshold and check.p_value < DEFAULT_ALPHA and RULES[rule](check)


async def one_ab(candidate: str, reference: str, args: argparse.Namespace) -> AbComparison:
    spec = PerfSpec.from_markers(
        (
            ("synthetic",),
            {
                "input_tokens": args.input_tokens,
                "output_tokens": args.output_tokens,
                "requests": args.requests,
            },
        ),
        ((), {"pattern": "concurrency", "concurrency": args.concurrency}),
        [],
    )
    timeouts = Timeouts.from_seconds(60)
    gen = LlmLoadgen(
        Endpoint.from_env(candidate, api_key_env=None, timeouts=timeouts),
        spec,
        reference=Endpoint.from_env(reference, api_key_env=None, timeouts=timeouts),
        thresholds=Thresholds.parse(args.threshold, default=DEFAULT_AB_THRESHOLD),
        ab_blocks=args.blocks,
        workers=args.workers,
    )
    await gen.run()
    return gen.comparisons[-1]


def summarize(name: str, comparisons: list[AbComparison], thresholds: list[float]) -> None:
    n = len(comparisons)
    print(f"\n{name}: {n} A/B comparisons")
    if not n:
        return
    shipped = sum(1 for c in comparisons if c.verdict is RegressionVerdict.REGRESSED)
    allowed = sorted({ch.threshold for c in comparisons for ch in c.checks})
    print(
        f"  failed as the plugin decides (threshold {', '.join(f'{t:.0%}' for t in allowed)}, "
        f"{comparisons[0].blocks} blocks a side): {shipped}/{n} ({shipped / n:.1%})"
    )
    for stat in [c.name for c in comparisons[0].checks]:
        changes = sorted(
            ch.change
            for c in comparisons
            for ch in c.checks
            if ch.name == stat and ch.change is not None
        )
        if changes:
            print(
                f"  {stat}: change median {changes[len(changes) // 2] * 100:+.1f}%, "
                f"range {changes[0] * 100:+.1f}% .. {changes[-1] * 100:+.1f}%"
            )
        else:
            print(f"  {stat}: inconclusive (too few samples)")
    print("  failed (any statistic worse), by threshold and condition 3:")
    for threshold in thresholds:
        cells = []
        for rule in RULES:
            failed = sum(
                1 for c in comparisons if any(worse_at(ch, threshold, rule) for ch in c.checks)
            )
            cells.append(f"{rule} {failed}/{n} ({failed / n:.1%})")
        print(f"    threshold {threshold:.0%}: " + ", ".join(cells))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--identical", type=int, default=50)
    parser.add_argument("--slower", type=int, default=40)
    parser.add_argument("--profile", choices=sorted(STEP_KEYS), default="tiny")
    parser.add_argument("--factor", type=float, default=1.10, help="slow candidate's step time")
    parser.add_argument("--requests", type=int, default=80)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--input-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--threshold",
        default=f"{DEFAULT_AB_THRESHOLD:.0%}",
        help="the plugin's --llm-ab-threshold (default %(default)s)",
    )
    parser.add_argument("--blocks", type=int, default=AB_BLOCKS, help="--llm-ab-blocks")
    parser.add_argument(
        "--thresholds", type=lambda s: [float(x) for x in s.split(",")], default=[0.05, 0.10]
    )
    parser.add_argument("--json", help="write every comparison's checks to this file")
    args = parser.parse_args()
    print(
        f"A/B benchmark: profile {args.profile}, slow candidate {args.factor:g}x step time "
        f"({', '.join(STEP_KEYS[args.profile])}); {args.requests} requests at concurrency "
        f"{args.concurrency}, {args.input_tokens} in / {args.output_tokens} out, "
        f"{args.blocks} blocks a side (ABBA), threshold {args.threshold}, "
        f"alpha {DEFAULT_ALPHA:g}, workers {args.workers}"
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.2f}"
    )
    t0 = time.monotonic()
    with (
        start_sim_process(args.profile) as reference,
        start_sim_process(args.profile) as same,
        start_sim_process(args.profile, overrides=slower(args.profile, args.factor)) as slow,
    ):
        identical = [await one_ab(same.url, reference.url, args) for _ in range(args.identical)]
        slowed = [await one_ab(slow.url, reference.url, args) for _ in range(args.slower)]
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "identical": [[ch.to_dict() for ch in c.checks] for c in identical],
                    "slower": [[ch.to_dict() for ch in c.checks] for c in slowed],
                }
            )
        )
    summarize("identical servers (false failures)", identical, args.thresholds)
    summarize(f"candidate {args.factor - 1:.0%} slower in step time (detection)", slowed,
              args.thresholds)  # fmt: skip
    print(f"\nwall time {time.monotonic() - t0:.0f} s, load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
