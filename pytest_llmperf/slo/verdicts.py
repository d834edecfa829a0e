"""Verdicts: does a run meet an SLO, fail it, or not say enough to tell?

``inconclusive`` is a verdict of its own, never a pass:

- a percentile needs at least ``10 × 100/(100 − p)`` samples (p50: 20,
  p90: 100, p99: 1,000, p99.9: 10,000): below that the nearest-rank
  estimate leans on the few slowest samples;
- a run where the load generator, not the server, was the bottleneck
  (``self_check.generator_bound``) cannot judge latency or throughput.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.metrics.sample_size import min_samples
from pytest_llmperf.specs.rulesets import Ruleset
from pytest_llmperf.specs.slo import Slo

__all__ = [
    "SloVerdict",
    "evaluate",
    "evaluate_runs",
    "min_samples",
]


@dataclass(frozen=True)
class SloVerdict:
    """One SLO judged on one run."""

    expr: str
    observed: float | None
    target: float
    unit: str
    verdict: str  # "pass" | "fail" | "inconclusive"
    run: str = ""
    samples: int = 0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(
    slo: Slo, result: RunResult, *, min_count: int = 0, min_duration_s: float = 0.0
) -> SloVerdict:
    """Judge ``slo`` on ``result``.

    ``min_count`` raises the percentile's sample minimum (a ruleset's
    ``min_samples``); ``min_duration_s`` is the least measured window a
    verdict needs (a ruleset's ``min_duration``). Neither can lower a bar.
    """
    acc = result.accumulator
    run = result.label
    if slo.is_latency:
        hist = acc.histograms[slo.metric]
        samples = hist.count
        observed = hist.stat(slo.stat or "") if samples else None
    else:
        samples = acc.issued
        observed = acc.rate(slo.metric) if samples else None
    common = {"expr": slo.expr, "target": slo.target, "unit": slo.unit, "run": run}
    if observed is None or (isinstance(observed, float) and math.isnan(observed)):
        return SloVerdict(
            observed=None,
            verdict="inconclusive",
            samples=samples,
            reason=f"no {'successful ' if slo.is_latency else ''}requests to measure",
            **common,
        )
    observed = round(float(observed), 4)
    needed = max(min_samples(slo.percentile), min_count)
    if samples < needed:
        return SloVerdict(
            observed=observed,
            verdict="inconclusive",
            samples=samples,
            reason=f"{slo.stat} needs >= {needed} samples, run has {samples}",
            **common,
        )
    if min_duration_s and acc.window_s < min_duration_s:
        return SloVerdict(
            observed=observed,
            verdict="inconclusive",
            samples=samples,
            reason=f"needs >= {min_duration_s:g} s measured, run has {acc.window_s:.1f} s",
            **common,
        )
    if result.self_check.get("generator_bound") and slo.metric != "error_rate":
        why = "; ".join(result.self_check.get("reasons", [])) or "load generator was the bottleneck"
        return SloVerdict(
            observed=observed,
            verdict="inconclusive",
            samples=samples,
            reason=f"load generator bound: {why}",
            **common,
        )
    verdict = "pass" if slo.holds(observed) else "fail"
    return SloVerdict(observed=observed, verdict=verdict, samples=samples, **common)


def evaluate_runs(
    slos: Sequence[Slo], results: Iterable[RunResult], *, rulesets: Sequence[Ruleset] = ()
) -> list[SloVerdict]:
    """Every SLO on every gated run of a test.

    An SLO that came from one of ``rulesets`` also needs that ruleset's
    minimum sample count and measured duration.
    """
    bars: dict[Slo, tuple[int, float]] = {}
    for ruleset in rulesets:
        for slo in ruleset.slos:
            count, duration = bars.get(slo, (0, 0.0))
            bars[slo] = (max(count, ruleset.min_samples), max(duration, ruleset.min_duration_s))
    return [
        evaluate(
            slo, r, min_count=bars.get(slo, (0, 0.0))[0], min_duration_s=bars.get(slo, (0, 0.0))[1]
        )
        for r in results
        if getattr(r, "gated", True)
        for slo in slos
    ]
