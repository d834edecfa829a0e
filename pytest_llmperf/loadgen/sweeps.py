"""The draft's load sweeps and searches, built on repeated ``LoadGenerator.run`` calls.

- :func:`latency_sweep`: one run per offered rate (open loop, ascending); the
  curve's *knee* is the first rate whose P99 exceeds twice the smallest P99
  observed, its *saturation point* the last rate before achieved output
  throughput stops rising (a rise of less than ``rise_tolerance``).
- :func:`max_rate` / :func:`max_concurrency`: the highest Poisson rate or
  closed-loop concurrency whose run meets every SLO, by binary search
  (concurrency first doubles from ``initial``, as the draft's capacity test).
- :func:`warm_up`: the warm-up procedure with verification: probe latency
  before, a warm-up run, then fixed-size probe requests until consecutive
  probes agree within 10%.

Every run made here is ``gate=False``: it appears in the reports but is not
judged against the test's SLOs (a search *expects* failing probes). A search
can ``confirm=True`` its answer with one gated run at the level it found.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_llmperf.config import RunSpec
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.patterns import LoadSpec
from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.loadgen.session import run_load
from pytest_llmperf.slo.expressions import Slo, parse_slo
from pytest_llmperf.slo.verdicts import SloVerdict, evaluate

if TYPE_CHECKING:
    from pytest_llmperf.loadgen.generator import LoadGenerator

__all__ = [
    "KNEE_FACTOR",
    "SATURATION_RISE",
    "WARMUP_TOLERANCE",
    "SearchResult",
    "SweepCurve",
    "SweepPoint",
    "WarmupReport",
    "find_knee",
    "find_saturation",
    "latency_sweep",
    "max_concurrency",
    "max_rate",
    "warm_up",
]

KNEE_FACTOR = 2.0
SATURATION_RISE = 0.05
WARMUP_TOLERANCE = 0.10


def _ms(value: float, digits: int = 3) -> float | None:
    """A rounded number for a JSON table; NaN/inf (nothing measured) become ``None``."""
    return None if value != value or value in (math.inf, -math.inf) else round(value, digits)


# -- latency-vs-load sweep ------------------------------------------------------


@dataclass
class SweepPoint:
    """One load level of a sweep: what was offered, what was achieved, at what latency."""

    offered: float
    result: RunResult

    def stat(self, metric: str, percentile: float) -> float:
        return self.result.metrics[metric].p(percentile)  # type: ignore[union-attr]

    @property
    def achieved_output(self) -> float:
        return float(self.result.metrics["output_throughput"])  # type: ignore[arg-type]

    @property
    def achieved_requests(self) -> float:
        return float(self.result.metrics["request_throughput"])  # type: ignore[arg-type]

    @property
    def success_rate(self) -> float:
        counts = self.result.counts
        return counts["completed"] / counts["issued"] if counts.get("issued") else math.nan


def find_knee(levels: Sequence[float], p99s: Sequence[float], factor: float = KNEE_FACTOR):
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
):
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
                    _ms(pt.achieved_requests),
                    _ms(pt.achieved_output, 1),
                    *(
                        _ms(pt.stat(m, p))
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
                    _ms(pt.success_rate, 4),
                    _ms(ratio),
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
    pattern: str = "poisson",
    knee_percentile: float = 99.0,
    rise_tolerance: float = SATURATION_RISE,
    attach: bool = True,
    **overrides: Any,
) -> SweepCurve:
    """Run the test's workload at each offered ``rates`` (ascending) and find knee/saturation.

    ``overrides`` (``requests=``, ``duration=``, ``warmup=``) apply to every level.
    The draft's knee uses P99; with fewer than ~1000 requests per level P99 is
    little more than the maximum, so ``knee_percentile=90`` gives a steadier knee.
    """
    levels = sorted(float(r) for r in rates)
    if not levels or any(not r > 0 for r in levels):
        raise LlmPerfUsageError(f"sweep(rates=...) needs positive rates, got {levels!r}")
    if pattern not in ("poisson", "constant"):
        raise LlmPerfUsageError(
            f"a latency sweep is open-loop: pattern poisson|constant, got {pattern!r}"
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


# -- searches --------------------------------------------------------------------


@dataclass
class SearchResult:
    """The outcome of a search: the best passing level (``None`` if even the lowest failed)."""

    axis: str
    best: float | None
    probes: list[tuple[float, bool, RunResult, list[SloVerdict]]] = field(default_factory=list)
    confirmed: RunResult | None = None

    @property
    def best_result(self) -> RunResult | None:
        for level, ok, result, _ in self.probes:
            if ok and level == self.best:
                return result
        return None

    def to_analysis(self, title: str | None = None) -> dict[str, Any]:
        rows = []
        for level, ok, result, verdicts in sorted(self.probes, key=lambda p: p[0]):
            m = result.metrics
            rows.append(
                [
                    int(level) if self.axis == "concurrency" else round(level, 4),
                    round(result.counts["completed"] / max(1, result.counts["issued"]), 4),
                    _ms(m["ttft"].p(99)),  # type: ignore[union-attr]
                    _ms(m["tpot"].p(99)),  # type: ignore[union-attr]
                    _ms(float(m["output_throughput"]), 1),  # type: ignore[arg-type]
                    result.counts["failed"],
                    "pass" if ok else "fail",
                    "; ".join(f"{v.expr}: {v.verdict}" for v in verdicts if v.verdict != "pass"),
                ]
            )
        return {
            "title": title or f"Maximum {self.axis} meeting the SLOs: {self.best}",
            "kind": "table",
            "columns": [
                self.axis,
                "completion",
                "ttft p99",
                "tpot p99",
                "output tok/s",
                "errors",
                "status",
                "why not",
            ],
            "rows": rows,
            "best": self.best,
        }


def _slos(gen: LoadGenerator, slos: Iterable[str | Slo] | None) -> list[Slo]:
    chosen = (
        list(gen.spec.slos)
        if slos is None
        else [s if isinstance(s, Slo) else parse_slo(s) for s in slos]
    )
    if not chosen:
        raise LlmPerfUsageError(
            "a search needs SLOs: pass slos=[...] or declare @pytest.mark.llm_slo on the test"
        )
    return chosen


def _meets(slos: Sequence[Slo], result: RunResult) -> tuple[bool, list[SloVerdict]]:
    """Every SLO passes (an inconclusive verdict does not count as meeting it)."""
    verdicts = [evaluate(slo, result) for slo in slos]
    return all(v.verdict == "pass" for v in verdicts), verdicts


async def _probe_with_retry(
    gen: LoadGenerator, slos: Sequence[Slo], label: str, **overrides: Any
) -> tuple[bool, RunResult, list[SloVerdict]]:
    """One probe run; a run the load generator limited is repeated once before it counts.

    A generator-bound run (e.g. one client-side stall on a busy machine) says
    nothing about the server, and a search must not stop on it; a second
    generator-bound run counts as not meeting the SLOs, like any inconclusive one.
    """
    result = await gen.run(gate=False, label=label, **overrides)
    ok, verdicts = _meets(slos, result)
    if not ok and result.self_check.get("generator_bound"):
        result = await gen.run(gate=False, label=f"{label} (retry)", **overrides)
        ok, verdicts = _meets(slos, result)
    return ok, result, verdicts


async def _search(
    probe: Callable[[float], Awaitable[tuple[bool, RunResult, list[SloVerdict]]]],
    low: float,
    high: float,
    *,
    integer: bool,
    tolerance: float,
    max_probes: int,
    expand_from: float | None = None,
    record: list[tuple[float, bool, RunResult, list[SloVerdict]]],
) -> float | None:
    async def check(level: float) -> bool:
        ok, result, verdicts = await probe(level)
        record.append((level, ok, result, verdicts))
        return ok

    if not await check(low):
        return None
    best, worst = low, None
    if expand_from is not None:  # doubling phase, as the draft's capacity search
        level = max(low, expand_from)
        while level < high and len(record) < max_probes:
            level = min(high, level * 2)
            if await check(level):
                best = level
            else:
                worst = level
                break
        if worst is None and best >= high:
            return best
        if worst is None:
            worst = high
    if worst is None:
        if await check(high):
            return high
        worst = high
    while len(record) < max_probes:
        if integer:
            if worst - best <= 1:
                break
            mid: float = (best + worst) // 2
        else:
            if (worst - best) <= tolerance * best:
                break
            mid = (best + worst) / 2
        if await check(mid):
            best = mid
        else:
            worst = mid
    return best


async def max_rate(
    gen: LoadGenerator,
    *,
    low: float,
    high: float,
    slos: Iterable[str | Slo] | None = None,
    tolerance: float = 0.1,
    max_probes: int = 8,
    pattern: str = "poisson",
    confirm: bool = False,
    attach: bool = True,
    **overrides: Any,
) -> SearchResult:
    """The highest rate in ``[low, high]`` meeting every SLO, within relative ``tolerance``."""
    if not 0 < low < high:
        raise LlmPerfUsageError(f"max_rate needs 0 < low < high, got low={low!r}, high={high!r}")
    chosen = _slos(gen, slos)

    async def probe(rate: float) -> tuple[bool, RunResult, list[SloVerdict]]:
        return await _probe_with_retry(
            gen, chosen, f"search rate={rate:.4g}", pattern=pattern, rate=rate, **overrides
        )

    out = SearchResult("rate", None)
    out.best = await _search(
        probe, float(low), float(high), integer=False, tolerance=tolerance,
        max_probes=max_probes, record=out.probes,
    )  # fmt: skip
    if confirm and out.best is not None:
        out.confirmed = await gen.run(
            label=f"confirm rate={out.best:.4g}", pattern=pattern, rate=out.best, **overrides
        )
    if attach:
        gen.attach(out.to_analysis())
    return out


async def max_concurrency(
    gen: LoadGenerator,
    *,
    initial: int = 8,
    maximum: int = 512,
    minimum: int = 1,
    slos: Iterable[str | Slo] | None = None,
    max_probes: int = 12,
    confirm: bool = False,
    attach: bool = True,
    **overrides: Any,
) -> SearchResult:
    """The highest closed-loop concurrency meeting every SLO: double from ``initial``, bisect."""
    if not 1 <= minimum <= initial <= maximum:
        raise LlmPerfUsageError(
            f"max_concurrency needs 1 <= minimum <= initial <= maximum, got "
            f"{minimum!r}, {initial!r}, {maximum!r}"
        )
    chosen = _slos(gen, slos)

    async def probe(level: float) -> tuple[bool, RunResult, list[SloVerdict]]:
        c = int(level)
        return await _probe_with_retry(
            gen, chosen, f"search concurrency={c}", pattern="concurrency", concurrency=c,
            **overrides,
        )  # fmt: skip

    out = SearchResult("concurrency", None)
    best = await _search(
        probe, float(initial), float(maximum), integer=True, tolerance=0.0,
        max_probes=max_probes, expand_from=float(initial), record=out.probes,
    )  # fmt: skip
    if best is None and minimum < initial:
        best = await _search(
            probe, float(minimum), float(initial), integer=True, tolerance=0.0,
            max_probes=len(out.probes) + max_probes, record=out.probes,
        )  # fmt: skip
    out.best = None if best is None else int(best)
    if confirm and out.best is not None:
        out.confirmed = await gen.run(
            label=f"confirm concurrency={out.best}",
            pattern="concurrency",
            concurrency=out.best,
            **overrides,
        )
    if attach:
        gen.attach(out.to_analysis())
    return out


# -- warm-up ---------------------------------------------------------------------


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
        rows: list[list[Any]] = [["before warm-up", _ms(self.before_ms or math.nan)]]
        rows += [[f"probe {i + 1}", _ms(v)] for i, v in enumerate(self.probes_ms)]
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


async def _probe_latencies(
    gen: LoadGenerator, n: int, label: str, per_probe: int = 1
) -> list[float]:
    """``n`` probes, each the median e2e (ms) of ``per_probe`` identical-size requests.

    Requests go one at a time. One extra request goes first and is not
    counted: it opens the connection (and resolves the model), which would
    make the first probe look slow.
    """
    from pytest_llmperf.analysis.collector import RequestCollector

    spec = RunSpec(
        "synthetic",
        {"input_tokens": 128, "output_tokens": 16},
        0,
        LoadSpec.parse("concurrency", {"concurrency": 1}),
        requests=n * per_probe,
        warmup=1,
    )
    collector = RequestCollector()
    result = await run_load(gen.endpoint, spec, observers=[collector], label=label)
    result.gated = False
    gen.results.append(result)
    if gen.on_result:
        gen.on_result(result)
    rows = sorted(collector.rows, key=lambda r: r.index)
    e2e = [r.e2e_ms for r in rows if r.e2e_ms is not None]
    if len(e2e) < len(rows):
        return []  # a failed probe request: nothing stable to report
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
    **overrides: Any,
) -> WarmupReport:
    """Warm the server with the test's workload, then verify with probes until latency settles.

    Each round runs ``requests`` warm-up requests (the test's workload and
    load, ungated) followed by ``probes`` probes; a probe is the median e2e
    latency of ``requests_per_probe`` identical-size requests (128 in, 16 out,
    one at a time), so one scheduling hiccup of the client machine does not
    count as server variation. The server is warm when every probe is within
    ``tolerance`` of the one before; the report says whether it got there
    within ``max_rounds``.
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
