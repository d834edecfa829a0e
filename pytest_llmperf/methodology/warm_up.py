"""The draft's warm-up with verification: warm the server, then probe until latency settles.

One probe before; then per round, warm-up requests of the test's workload
(ungated runs) followed by probes, each the median e2e latency of a few
identical small requests sent one at a time. The server is warm when every
probe is within ``tolerance`` (10%) of the one before.

Probe runs are not the test's workload, so they go through
:meth:`~pytest_llmperf.loadgen.generator.LoadGenerator.run_spec`: they get
the session's event log (``--llm-events``), tokenizer and timeouts and are
kept in the test's reports like every other run, but stay in this process
(``workers=1``): a probe is one request at a time, and its latencies are read
per request by an observer (with ``--llm-workers`` > 1 they would be replayed from
the event log: one request at a time needs no second process).

With a reference endpoint (``--llm-reference-endpoint``) every warm-up round
also runs against the reference, so both sides of the A/B comparison start
warm; the probes verify the endpoint under test.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from pytest_llmperf.analysis.collector import RequestCollector
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.methodology.table_values import table_number
from pytest_llmperf.specs.load import LoadPattern, LoadSpec
from pytest_llmperf.specs.run import RunSpec, WarmUpOverrides

__all__ = [
    "PROBE_INPUT_TOKENS",
    "PROBE_OUTPUT_TOKENS",
    "WARMUP_TOLERANCE",
    "WarmupReport",
    "consecutive_variation",
    "probe_spec",
    "warm_up",
]

WARMUP_TOLERANCE = 0.10
PROBE_INPUT_TOKENS = 128
PROBE_OUTPUT_TOKENS = 16


@dataclass
class WarmupReport:
    """Warm-up with verification: probe latencies before and after, and whether they settled."""

    stable: bool
    before_ms: float | None
    probes_ms: list[float]
    variation: float | None
    rounds: int
    warmup_requests: int

    def to_analysis(self) -> dict[str, Any]:
        rows: list[list[Any]] = [["before warm-up", table_number(self.before_ms or math.nan)]]
        rows += [[f"probe {i + 1}", table_number(v)] for i, v in enumerate(self.probes_ms)]
        return {
            "title": (
                f"Warm-up verification: {'stable' if self.stable else 'NOT stable'} "
                f"(largest change between consecutive probes "
                f"{'n/a' if self.variation is None else f'{self.variation:.1%}'}, "
                f"limit {WARMUP_TOLERANCE:.0%}; {self.warmup_requests} warm-up requests, "
                f"{self.rounds} round(s))"
            ),
            "kind": "table",
            "columns": ["probe", "e2e ms"],
            "rows": rows,
            "stable": self.stable,
        }


def consecutive_variation(values: Sequence[float]) -> float | None:
    """The largest relative change between consecutive values (``None`` with fewer than 2)."""
    pairs = [(a, b) for a, b in itertools.pairwise(values) if a > 0]
    if not pairs:
        return None
    return max(abs(b - a) / a for a, b in pairs)


def probe_spec(requests: int) -> RunSpec:
    """``requests`` identical-size probe requests, one at a time, after one uncounted one.

    The uncounted request opens the connection (and resolves the model),
    which would make the first probe look slow.
    """
    return RunSpec(
        "synthetic",
        {"input_tokens": PROBE_INPUT_TOKENS, "output_tokens": PROBE_OUTPUT_TOKENS},
        0,
        LoadSpec.parse(LoadPattern.CONCURRENCY, {"concurrency": 1}),
        requests=requests,
        warmup=1,
    )


async def _probe_latencies(
    gen: LoadGenerator, n: int, label: str, per_probe: int = 1
) -> list[float]:
    """``n`` probes, each the median e2e (ms) of ``per_probe`` identical-size requests.

    Empty when a probe request failed: nothing stable to report.
    """
    collector = RequestCollector()
    await gen.run_spec(
        probe_spec(n * per_probe), label=label, gate=False, observers=[collector], workers=1
    )
    rows = sorted(collector.rows, key=lambda r: r.index)
    e2e = [r.e2e_ms for r in rows if r.e2e_ms is not None]
    if len(e2e) < len(rows):
        return []
    return [statistics.median(e2e[i : i + per_probe]) for i in range(0, len(e2e), per_probe)]


async def warm_up(
    gen: LoadGenerator,
    *,
    requests: int = 100,
    probes: int = 5,
    requests_per_probe: int = 3,
    tolerance: float = WARMUP_TOLERANCE,
    max_rounds: int = 3,
    attach: bool = True,
    **overrides: Unpack[WarmUpOverrides],
) -> WarmupReport:
    """Warm the server with the test's workload, then verify with probes until latency settles.

    Each round runs ``requests`` warm-up requests (the test's workload and
    load, ungated) followed by ``probes`` probes; a probe is the median e2e
    latency of ``requests_per_probe`` identical-size requests (128 in, 16 out,
    one at a time), so one scheduling hiccup of the client machine does not
    count as server variation. The server is warm when every probe is within
    ``tolerance`` of the one before; the report says whether it got there
    within ``max_rounds``. With a reference endpoint each round warms it too.
    """
    if probes < 2:
        raise LlmPerfUsageError(f"warm_up needs probes >= 2 to compare, got {probes!r}")
    if requests_per_probe < 1:
        raise LlmPerfUsageError(
            f"warm_up needs requests_per_probe >= 1, got {requests_per_probe!r}"
        )
    before = await _probe_latencies(gen, 1, "warm-up probe before")
    latencies: list[float] = []
    variation = None
    rounds = 0
    for rounds in range(1, max_rounds + 1):
        await gen.run(gate=False, label=f"warm-up round {rounds}", requests=requests, **overrides)
        reference: LoadGenerator | None = getattr(gen, "reference", None)
        if reference is not None:  # an A/B test: both servers start their blocks warm
            await reference.run(
                gate=False,
                label=f"warm-up round {rounds} [reference]",
                requests=requests,
                **overrides,
            )
        latencies = await _probe_latencies(
            gen, probes, f"warm-up probes round {rounds}", requests_per_probe
        )
        variation = consecutive_variation(latencies)
        if variation is not None and variation < tolerance and len(latencies) == probes:
            break
    stable = variation is not None and variation < tolerance and len(latencies) == probes
    report = WarmupReport(
        stable=stable,
        before_ms=before[0] if before else None,
        probes_ms=latencies,
        variation=variation,
        rounds=rounds,
        warmup_requests=requests * rounds,
    )
    if attach:
        gen.attach(report.to_analysis())
    return report
