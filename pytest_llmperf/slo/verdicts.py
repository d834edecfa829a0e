"""Verdicts: does a run meet an SLO, fail it, or not say enough to tell?

``inconclusive`` is a verdict of its own, never a pass:

- a percentile needs at least ``10 × 100/(100 − p)`` samples (p50: 20,
  p90: 100, p99: 1,000, p99.9: 10,000): below that the nearest-rank
  estimate leans on the few slowest samples;
- a run where the load generator, not the server, was the bottleneck
  (``self_check.generator_bound``) cannot judge latency or throughput.

A staged run (``llm_load(..., stages=[...])`` or ``ramp={...}``) is judged
stage by stage, never as one: every SLO of the test on each stage, a
stage's own SLOs on that stage only. Each stage is a run of its own for
these rules, so a short stage may be inconclusive where the whole run would
have had samples enough.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.metrics.sample_size import min_samples
from pytest_llmperf.specs.rulesets import Ruleset
from pytest_llmperf.specs.slo import Slo
from pytest_llmperf.specs.stages import Stage

__all__ = [
    "SloVerdict",
    "Verdict",
    "evaluate",
    "evaluate_runs",
    "evaluate_stages",
    "min_samples",
    "stage_load",
]


class Verdict(StrEnum):
    """What an SLO says of a run (a ``StrEnum``: equal to, and written as, ``"pass"`` etc.)."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"  # never a pass


@dataclass(frozen=True)
class SloVerdict:
    """One SLO judged on one run (``verdict`` may be given as a plain name).

    A verdict on one stage of a staged run names the run in ``run``, the
    stage's index in ``stage`` (None for a whole run) and its planned load
    in ``stage_load`` (``"40 req/s"``, ``"10→20 req/s"``, ``"concurrency 4"``).
    """

    expr: str
    observed: float | None
    target: float
    unit: str
    verdict: Verdict
    run: str = ""
    samples: int = 0
    reason: str = ""
    stage: int | None = None
    stage_load: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    @property
    def where(self) -> str:
        """``stage 1: 40 req/s`` for a stage's verdict, ``""`` for a whole run's."""
        if self.stage is None:
            return ""
        return f"stage {self.stage}" + (f": {self.stage_load}" if self.stage_load else "")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (the verdict as a plain string: reports cross xdist's wire)."""
        return {**asdict(self), "verdict": self.verdict.value}


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

    def judged(verdict: Verdict, observed: float | None, reason: str = "") -> SloVerdict:
        return SloVerdict(slo.expr, observed, slo.target, slo.unit, verdict, run, samples, reason)

    if observed is None or (isinstance(observed, float) and math.isnan(observed)):
        return judged(
            Verdict.INCONCLUSIVE,
            None,
            f"no {'successful ' if slo.is_latency else ''}requests to measure",
        )
    observed = round(float(observed), 4)
    needed = max(min_samples(slo.percentile), min_count)
    if samples < needed:
        return judged(
            Verdict.INCONCLUSIVE,
            observed,
            f"{slo.stat} needs >= {needed} samples, run has {samples}",
        )
    if min_duration_s and acc.window_s < min_duration_s:
        return judged(
            Verdict.INCONCLUSIVE,
            observed,
            f"needs >= {min_duration_s:g} s measured, run has {acc.window_s:.1f} s",
        )
    if result.self_check.get("generator_bound") and slo.metric != "error_rate":
        why = "; ".join(result.self_check.get("reasons", [])) or "load generator was the bottleneck"
        return judged(Verdict.INCONCLUSIVE, observed, f"load generator bound: {why}")
    return judged(Verdict.PASS if slo.holds(observed) else Verdict.FAIL, observed)


def stage_load(stage: Stage) -> str:
    """A stage's planned load in a few characters: ``40 req/s``, ``10→20 req/s``,
    ``concurrency 4``."""
    if stage.concurrency is not None:
        return f"concurrency {stage.concurrency}"
    start, end = stage.rate or 0.0, stage.end_rate or 0.0
    if start == end:
        return f"{start:.4g} req/s"
    return f"{start:.4g}→{end:.4g} req/s"


def evaluate_stages(
    slos: Sequence[Slo],
    result: RunResult,
    *,
    bars: Mapping[Slo, tuple[int, float]] | None = None,
) -> list[SloVerdict]:
    """Each stage of a staged run judged as a run of its own, stage by stage.

    Every one of ``slos`` is judged on every stage, and a stage's own SLOs on
    that stage only; the verdicts name the run (``run``) and the stage
    (``stage``, ``stage_load``). ``bars`` are per-SLO ``(min_count,
    min_duration_s)`` (see :func:`evaluate`), which hold for each stage.
    """
    bars = bars or {}
    out: list[SloVerdict] = []
    for k, stage in enumerate(result.stage_plan):
        part = result.stage_result(k)
        own = [slo for slo in stage.slos if slo not in slos]
        for slo in (*slos, *own):
            count, duration = bars.get(slo, (0, 0.0))
            verdict = evaluate(slo, part, min_count=count, min_duration_s=duration)
            out.append(replace(verdict, run=result.label, stage=k, stage_load=stage_load(stage)))
    return out


def evaluate_runs(
    slos: Sequence[Slo], results: Iterable[RunResult], *, rulesets: Sequence[Ruleset] = ()
) -> list[SloVerdict]:
    """Every SLO on every gated run of a test; a staged run's on each of its stages.

    An SLO that came from one of ``rulesets`` also needs that ruleset's
    minimum sample count and measured duration (per stage, for a staged run).
    """
    bars: dict[Slo, tuple[int, float]] = {}
    for ruleset in rulesets:
        for slo in ruleset.slos:
            count, duration = bars.get(slo, (0, 0.0))
            bars[slo] = (max(count, ruleset.min_samples), max(duration, ruleset.min_duration_s))
    out: list[SloVerdict] = []
    for r in results:
        if not getattr(r, "gated", True):
            continue
        if getattr(r, "stage_plan", ()):
            out.extend(evaluate_stages(slos, r, bars=bars))
            continue
        for slo in slos:
            count, duration = bars.get(slo, (0, 0.0))
            out.append(evaluate(slo, r, min_count=count, min_duration_s=duration))
    return out
