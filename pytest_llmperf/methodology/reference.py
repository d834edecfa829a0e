"""A/B against a reference endpoint (``--llm-reference-endpoint``): interleaved blocks, paired.

With a reference, every gated run of a test (``await llm_loadgen.run()``)
becomes an A/B comparison:

- the run's spec is split into ``B`` blocks a side (``--llm-ab-blocks``, an even
  number, :data:`AB_BLOCKS` = 4 by default): the request count divided exactly
  (a duration, or a staged load's stages, by ``B``; a run of fewer requests than
  ``B`` gets the largest even number of blocks it can fill, or one), the
  declared warm-up requests in the first block of each side, and
  block ``k`` gets the load seed ``seed + k`` on *both* sides, so block pair
  ``k`` replays the same arrivals and sample order against both servers;
- the blocks run in ABBA order (candidate, reference, reference, candidate,
  candidate, ...), which cancels a linear drift of the machine between the
  two sides;
- the candidate's blocks are merged into one result (exact HDR merges), which
  is the test's ordinary run: its SLO verdicts still apply; the reference's
  blocks are merged into the comparison's reference result;
- :func:`pytest_llmperf.slo.paired.paired_checks` judges each statistic against
  the A/B allowance (``--llm-ab-threshold``, 5% by default: not the baseline
  gate's ``--llm-baseline-threshold``).

Both sides run through the configured generator
(:meth:`~pytest_llmperf.loadgen.generator.LoadGenerator.execute_spec` and
:meth:`~pytest_llmperf.loadgen.generator.LoadGenerator.for_endpoint`), so they
have the session's workers, timeouts, request fields, tokenizer and
``--llm-scale`` (applied before the split); with ``--llm-events`` each block
keeps its own event log, the reference's named ``...-reference-block<k>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pytest_llmperf.loadgen.server_watch import merged_server_process
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult, StopReason
from pytest_llmperf.slo.ab_comparison import AbComparison
from pytest_llmperf.slo.paired import (
    DEFAULT_AB_STATS,
    DEFAULT_AB_THRESHOLD,
    paired_checks,
)
from pytest_llmperf.slo.regression import Thresholds
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.specs.slo import Slo

if TYPE_CHECKING:
    from pytest_llmperf.loadgen.generator import LoadGenerator

__all__ = [
    "AB_BLOCKS",
    "AbComparison",
    "ab_order",
    "ab_stats",
    "block_count",
    "block_spec",
    "run_ab",
]

AB_BLOCKS = 4  # blocks per side: --llm-ab-blocks' default


def block_count(blocks: int, requests: int | None) -> int:
    """Blocks a side for a run of ``requests`` (None: a duration, split any way): ``blocks``,
    or for fewer requests than that the largest even number they fill (ABBA balances a
    drift only over pairs of blocks), or 1 for a single request."""
    if blocks < 1:
        raise ValueError(f"an A/B comparison needs at least 1 block a side, got {blocks}")
    if not requests or requests >= blocks:
        return blocks
    return max(1, requests - requests % 2)


def ab_order(blocks: int) -> list[tuple[int, str]]:
    """``(block, side)`` in ABBA order: A0 B0 B1 A1 A2 B2 B3 A3 ..."""
    out: list[tuple[int, str]] = []
    for k in range(blocks):
        sides = ("candidate", "reference") if k % 2 == 0 else ("reference", "candidate")
        out += [(k, side) for side in sides]
    return out


def block_spec(spec: RunSpec, index: int, blocks: int) -> RunSpec:
    """Block ``index`` of ``blocks``: a ``1/blocks`` share of ``spec``, load seed ``+ index``."""
    part = spec.scaled(1.0 / blocks) if blocks > 1 else spec
    if spec.requests:
        share = spec.requests // blocks + (1 if index < spec.requests % blocks else 0)
        part = replace(part, requests=share)
    part = replace(part, warmup=spec.warmup if index == 0 else 0)
    if spec.load.trace is None:  # a trace's arrivals are its own: no seed to vary
        part = part.with_overrides({"seed": spec.load.seed + index})
    return part


def ab_stats(slos: Sequence[Slo]) -> list[tuple[str, str]]:
    """The statistics compared: each latency SLO's, else ttft/tpot p50/p99."""
    latency = set(MetricsAccumulator().histograms)
    out: list[tuple[str, str]] = []
    for slo in slos:
        pair = (slo.metric, slo.stat or "")
        if slo.metric in latency and pair[1] not in ("", "max") and pair not in out:
            out.append(pair)
    return out or list(DEFAULT_AB_STATS)


def merge_blocks(parts: Sequence[RunResult], label: str) -> RunResult:
    """One result of a side's blocks: histograms merged exactly, rates over the blocks' time."""
    first = parts[0]
    acc = MetricsAccumulator(
        request_limits_ms={k: v / 1e6 for k, v in first.accumulator.request_limits_ns.items()}
    )
    windows = 0
    for part in parts:
        acc.merge(part.accumulator)
        windows += max(
            0, (part.accumulator.window_end_ns or 0) - (part.accumulator.window_start_ns or 0)
        )
    if acc.window_start_ns is not None:  # the other side's blocks ran in between: not our time
        acc.window_end_ns = acc.window_start_ns + windows
    reasons = [
        f"block {i + 1}: {r}" for i, p in enumerate(parts) for r in p.self_check.get("reasons", [])
    ]
    self_check = dict(first.self_check)
    self_check["generator_bound"] = any(p.self_check.get("generator_bound") for p in parts)
    self_check["reasons"] = reasons
    self_check["blocks"] = len(parts)
    workload = dict(first.workload)
    for key in ("requests", "duration_s", "warmup"):
        values = [p.workload.get(key) for p in parts]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            total = sum(v for v in values if isinstance(v, int | float))
            workload[key] = round(total, 6) if isinstance(total, float) else total
    stop = next((p.stop_reason for p in parts if p.stop_reason is not StopReason.COMPLETED), None)
    result = RunResult(
        workload=workload,
        load=first.load,
        endpoint=first.endpoint,
        accumulator=acc,
        self_check=self_check,
        started_at=first.started_at,
        duration_s=sum(p.duration_s for p in parts),
        interrupted=any(p.interrupted for p in parts),
        label=label,
        stop_reason=stop or first.stop_reason,
        events_path=None,
        stage_plan=first.stage_plan,
        stage_sends=[sum(x) for x in zip(*(p.stage_sends for p in parts), strict=False)],
    )
    # a managed server's blocks as one (an exit, the one that stopped the comparison)
    result.server_process = merged_server_process(
        [p.server_process for p in parts], acc.output_tokens
    )
    result.stop_detail = next((p.stop_detail for p in parts if p.stop_detail), "")
    return result


async def run_ab(
    gen: LoadGenerator,
    reference: LoadGenerator,
    spec: RunSpec,
    *,
    label: str,
    slos: Sequence[Slo] = (),
    thresholds: Thresholds | None = None,
    blocks: int = AB_BLOCKS,
) -> AbComparison:
    """Run ``spec`` on ``gen`` (candidate) and ``reference`` in interleaved blocks; compare.

    Keeps nothing: the caller keeps ``comparison.candidate`` as the test's run.
    A Ctrl-C during a block ends the comparison after that block (the caller
    checks ``candidate.stop_reason``).
    """
    blocks = block_count(blocks, spec.requests)
    thresholds = thresholds or Thresholds(DEFAULT_AB_THRESHOLD)
    sides: dict[str, list[RunResult | None]] = {
        "candidate": [None] * blocks,
        "reference": [None] * blocks,
    }
    order: list[str] = []
    events: dict[str, list[str]] = {"candidate": [], "reference": []}
    for k, side in ab_order(blocks):
        runner = gen if side == "candidate" else reference
        block_label = f"{label}-{side}-block{k + 1}"
        result = await runner.execute_spec(block_spec(spec, k, blocks), label=block_label)
        sides[side][k] = result
        order.append(f"{'A' if side == 'candidate' else 'B'}{k + 1}")
        if result.events_path:
            events[side].append(result.events_path)
        if result.stop_reason in (StopReason.SIGINT, StopReason.SERVER_EXITED):
            break  # Ctrl-C, or a side's server died: no block after it would measure
    done = [
        k
        for k in range(blocks)
        if sides["candidate"][k] is not None and sides["reference"][k] is not None
    ]
    cand_parts = [r for r in sides["candidate"] if r is not None]
    ref_parts = [r for r in sides["reference"] if r is not None]
    candidate = merge_blocks(cand_parts, label)
    reference_result = merge_blocks(ref_parts, f"{label} [reference]") if ref_parts else None
    if reference_result is None:  # interrupted in the first block
        reference_result = replace(candidate, label=f"{label} [reference]")
        reference_result.accumulator = MetricsAccumulator()
        reference_result.server_process = None  # the candidate's server, not its own
    reference_result.gated = False
    checks = paired_checks(
        [_acc(sides["candidate"][k]) for k in done],
        [_acc(sides["reference"][k]) for k in done],
        ab_stats(slos),
        thresholds=thresholds,
        run=label,
    )
    return AbComparison(
        run=label,
        blocks=blocks,
        order=order,
        candidate=candidate,
        reference=reference_result,
        checks=checks,
        reference_endpoint=dict(reference.endpoint.describe()),
        events=events,
        thresholds=thresholds.describe(),
    )


def _acc(result: RunResult | None) -> MetricsAccumulator:
    assert result is not None
    return result.accumulator
