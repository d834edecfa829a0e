"""The draft's latency-vs-load sweep: one run per offered rate, with knee and saturation.

:func:`latency_sweep` runs the test's workload once per offered rate (open
loop, ascending). The curve's *knee* is the first rate whose P99 exceeds
twice the smallest P99 observed; its *saturation point* the last rate before
achieved output throughput stops rising (a rise of less than
``rise_tolerance``). Every run is ``gate=False``: it appears in the reports
but is not judged against the test's SLOs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.methodology.table_values import table_number
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.specs.load import OPEN_LOOP, LoadPattern
from pytest_llmperf.specs.run import LevelOverrides

__all__ = [
    "KNEE_FACTOR",
    "SATURATION_RISE",
    "SweepCurve",
    "SweepPoint",
    "find_knee",
    "find_saturation",
    "latency_sweep",
]

KNEE_FACTOR = 2.0
SATURATION_RISE = 0.05


@dataclass
class SweepPoint:
    """One load level of a sweep: what was offered, what was achieved, at what latency."""

    offered: float
    result: RunResult

    def stat(self, metric: str, percentile: float) -> float:
        return self.result.histogram(metric).p(percentile)

    @property
    def achieved_output(self) -> float:
        return self.result.rate("output_throughput")

    @property
    def achieved_requests(self) -> float:
        return self.result.rate("request_throughput")

    @property
    def success_rate(self) -> float:
        counts = self.result.counts
        return counts["completed"] / counts["issued"] if counts.get("issued") else math.nan


def find_knee(
    levels: Sequence[float], p99s: Sequence[float], factor: float = KNEE_FACTOR
) -> float | None:
    """The first level whose P99 exceeds ``factor`` × the smallest P99 (``None`` if none)."""
    finite = [p for p in p99s if p == p]
    if not finite:
        return None
    floor = min(finite)
    for level, p99 in zip(levels, p99s, strict=True):
        if p99 == p99 and p99 > factor * floor:
            return level
    return None


def find_saturation(
    levels: Sequence[float], throughputs: Sequence[float], rise: float = SATURATION_RISE
) -> float | None:
    """The last level before throughput stops rising by more than ``rise`` (``None``: rising)."""
    for i in range(1, len(levels)):
        if not throughputs[i] > throughputs[i - 1] * (1 + rise):
            return levels[i - 1]
    return None


@dataclass
class SweepCurve:
    """A latency-vs-load curve with its knee and saturation points."""

    metric: str
    points: list[SweepPoint]
    knee: float | None
    saturation: float | None
    knee_percentile: float = 99.0

    COLUMNS = (
        "offered req/s",
        "achieved req/s",
        "achieved tok/s",
        "ttft p50",
        "ttft p95",
        "ttft p99",
        "tpot p50",
        "tpot p99",
        "e2e p50",
        "e2e p99",
        "success",
        "completion/offered",
    )

    def rows(self) -> list[list[Any]]:
        rows = []
        for pt in self.points:
            ratio = pt.achieved_requests / pt.offered
            rows.append(
                [
                    pt.offered,
                    table_number(pt.achieved_requests),
                    table_number(pt.achieved_output, 1),
                    *(
                        table_number(pt.stat(m, p))
                        for m, p in (
                            ("ttft", 50),
                            ("ttft", 95),
                            ("ttft", 99),
                            ("tpot", 50),
                            ("tpot", 99),
                            ("e2e", 50),
                            ("e2e", 99),
                        )
                    ),
                    table_number(pt.success_rate, 4),
                    table_number(ratio),
                ]
            )
        return rows

    def to_analysis(self, title: str | None = None) -> dict[str, Any]:
        """The curve as an ``llm_loadgen.attach()`` payload (latencies in ms)."""
        note = (
            f"knee ({self.metric} p{self.knee_percentile:g} > {KNEE_FACTOR:g}x minimum): "
            f"{self.knee}; "
            f"saturation (throughput stops rising): {self.saturation}"
        )
        return {
            "title": title or f"Latency vs load ({self.metric}): {note}",
            "kind": "curve",
            "columns": list(self.COLUMNS),
            "rows": self.rows(),
            "x": self.COLUMNS[0],
            "y": [f"{self.metric} p50", f"{self.metric} p99"],
            "knee": self.knee,
            "saturation": self.saturation,
            "note": note,
        }


async def latency_sweep(
    gen: LoadGenerator,
    rates: Iterable[float],
    *,
    metric: str = "ttft",
    pattern: LoadPattern | str = LoadPattern.POISSON,
    knee_percentile: float = 99.0,
    rise_tolerance: float = SATURATION_RISE,
    attach: bool = True,
    **overrides: Unpack[LevelOverrides],
) -> SweepCurve:
    """Run the test's workload at each offered ``rates`` (ascending) and find knee/saturation.

    ``overrides`` (``requests=``, ``duration=``, ``warmup=``) apply to every level.
    The draft's knee uses P99; with fewer than ~1000 requests per level P99 is
    little more than the maximum, so ``knee_percentile=90`` gives a steadier knee.
    """
    levels = sorted(float(r) for r in rates)
    if not levels or any(not r > 0 for r in levels):
        raise LlmPerfUsageError(f"sweep(rates=...) needs positive rates, got {levels!r}")
    if pattern not in OPEN_LOOP:
        raise LlmPerfUsageError(
            f"a latency sweep is open-loop: pattern poisson|constant, got {str(pattern)!r}"
        )
    if metric not in ("ttft", "tpot", "itl", "e2e"):
        raise LlmPerfUsageError(f"sweep metric must be ttft, tpot, itl or e2e, got {metric!r}")
    points = []
    for rate in levels:
        result = await gen.run(
            gate=False, label=f"sweep rate={rate:g}", pattern=pattern, rate=rate, **overrides
        )
        points.append(SweepPoint(rate, result))
    curve = SweepCurve(
        metric=metric,
        points=points,
        knee=find_knee(levels, [pt.stat(metric, knee_percentile) for pt in points]),
        knee_percentile=knee_percentile,
        saturation=find_saturation(levels, [pt.achieved_output for pt in points], rise_tolerance),
    )
    if attach:
        gen.attach(curve.to_analysis())
    return curve
