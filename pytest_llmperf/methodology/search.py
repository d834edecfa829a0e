"""The draft's capacity searches: the highest load level whose run meets every SLO.

- :func:`max_rate`: the highest Poisson (or constant) rate in ``[low, high]``,
  by binary search to a relative ``tolerance``;
- :func:`max_concurrency`: the highest closed-loop concurrency, doubling from
  ``initial`` until a level fails (the draft's capacity test), then bisecting
  to the exact integer.

Every probe is ``gate=False``: it appears in the reports but is not judged
against the test's SLOs (a search *expects* failing probes). A search can
``confirm=True`` its answer with one gated run at the level it found. An
inconclusive verdict counts as not meeting an SLO; a probe that the load
generator itself limited is repeated once before it counts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.methodology.table_values import table_number
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.verdicts import SloVerdict, Verdict, evaluate
from pytest_llmperf.specs.load import LoadPattern
from pytest_llmperf.specs.run import LevelOverrides, RunOverrides
from pytest_llmperf.specs.slo import Slo, parse_slo

__all__ = ["Probe", "SearchResult", "max_concurrency", "max_rate"]

Probe = tuple[float, bool, RunResult, list[SloVerdict]]  # (level, met every SLO, run, verdicts)


@dataclass
class SearchResult:
    """The outcome of a search: the best passing level (``None`` if even the lowest failed)."""

    axis: str
    best: float | None
    probes: list[Probe] = field(default_factory=list)
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
            rows.append(
                [
                    int(level) if self.axis == "concurrency" else round(level, 4),
                    round(result.counts["completed"] / max(1, result.counts["issued"]), 4),
                    table_number(result.histogram("ttft").p(99)),
                    table_number(result.histogram("tpot").p(99)),
                    table_number(result.rate("output_throughput"), 1),
                    result.counts["failed"],
                    (Verdict.PASS if ok else Verdict.FAIL).value,
                    "; ".join(
                        f"{v.expr}: {v.verdict}" for v in verdicts if v.verdict is not Verdict.PASS
                    ),
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
    return all(v.verdict is Verdict.PASS for v in verdicts), verdicts


async def _probe_with_retry(
    gen: LoadGenerator, slos: Sequence[Slo], label: str, **overrides: Unpack[RunOverrides]
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
    record: list[Probe],
) -> float | None:
    """The highest level in ``[low, high]`` whose probe passes, assuming one threshold.

    ``None`` when ``low`` itself fails. With ``expand_from`` the level first
    doubles from there until one fails; then bisection narrows the passing
    and failing levels to one integer apart (``integer``) or to a relative
    ``tolerance``, within ``max_probes`` probes in all (``record`` holds them).
    """

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
    pattern: LoadPattern | str = LoadPattern.POISSON,
    confirm: bool = False,
    attach: bool = True,
    **overrides: Unpack[LevelOverrides],
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
    **overrides: Unpack[LevelOverrides],
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
            gen, chosen, f"search concurrency={c}", pattern=LoadPattern.CONCURRENCY, concurrency=c,
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
            pattern=LoadPattern.CONCURRENCY,
            concurrency=out.best,
            **overrides,
        )
    if attach:
        gen.attach(out.to_analysis())
    return out
