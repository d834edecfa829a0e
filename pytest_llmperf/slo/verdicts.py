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

An SLO on the server's own metrics (``server.*``) is judged on what the
server said over the run (or stage): :func:`evaluate_server`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.metrics.sample_size import min_samples
from pytest_llmperf.server_metrics.summary import ServerMetrics
from pytest_llmperf.specs.rulesets import Ruleset
from pytest_llmperf.specs.server_names import MetricKind, metric_kind
from pytest_llmperf.specs.slo import Slo
from pytest_llmperf.specs.stages import Stage

__all__ = [
    "SloVerdict",
    "Verdict",
    "evaluate",
    "evaluate_runs",
    "evaluate_server",
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
    if slo.is_server:
        return evaluate_server(slo, result, min_count=min_count)
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


def evaluate_server(slo: Slo, result: RunResult, *, min_count: int = 0) -> SloVerdict:
    """Judge an SLO on the server's own metrics (``server.queue_time.p99 < 50ms``).

    A metric the server did not give (scraping off or failed, a family without
    it, other processes' pages) is inconclusive with the reason. A latency
    percentile comes from the run's bucket deltas at the bucket's upper bound
    and needs the same sample count as a client percentile; gauges and counters
    need the run's start and end scrapes (or, for a gauge, one sample).
    """
    run = result.label
    server = result.server_metrics

    def judged(
        verdict: Verdict, observed: float | None, samples: int, reason: str = ""
    ) -> SloVerdict:
        return SloVerdict(slo.expr, observed, slo.target, slo.unit, verdict, run, samples, reason)

    if server is None:
        return judged(Verdict.INCONCLUSIVE, None, 0, "no server metrics (--llm-server-metrics off)")
    if slo.metric not in server.metrics:
        why = server.missing or f"the server ({server.family.value}) does not export {slo.metric}"
        return judged(Verdict.INCONCLUSIVE, None, 0, why)
    kind = metric_kind(slo.metric)
    percentile = slo.percentile if kind is MetricKind.LATENCY else None
    if percentile is not None and slo.stat not in server.metrics[slo.metric]:
        observed = server.percentile(slo.metric, percentile)
    else:
        observed = server.stat(slo.metric, slo.stat)
    samples = server.samples(slo.metric) if kind is MetricKind.LATENCY else server.scrapes
    if observed is not None and math.isinf(observed):
        return _beyond_last_bucket(slo, server, samples, judged)
    if observed is None or math.isnan(observed):
        return judged(Verdict.INCONCLUSIVE, None, samples, f"no {slo.metric} observed in the run")
    observed = round(float(observed), 4)
    if kind is MetricKind.LATENCY:
        needed = max(min_samples(percentile), min_count)
        if samples < needed:
            return judged(
                Verdict.INCONCLUSIVE,
                observed,
                samples,
                f"{slo.stat} needs >= {needed} samples, the server counted {samples}",
            )
    if result.self_check.get("generator_bound"):
        why = "; ".join(result.self_check.get("reasons", [])) or "load generator was the bottleneck"
        return judged(Verdict.INCONCLUSIVE, observed, samples, f"load generator bound: {why}")
    return judged(Verdict.PASS if slo.holds(observed) else Verdict.FAIL, observed, samples)


def _beyond_last_bucket(
    slo: Slo,
    server: ServerMetrics,
    samples: int,
    judged: Callable[[Verdict, float | None, int, str], SloVerdict],
) -> SloVerdict:
    """A percentile in the server's open top bucket is known only to exceed the last
    finite bound: that decides a target at or below the bound, nothing above it."""
    bounds = [u for u, _ in server.buckets.get(slo.metric, []) if not math.isinf(u)]
    last = max(bounds, default=0.0)
    why = f"{slo.stat} is beyond the server's last finite bucket (> {last:g} ms)"
    if slo.target > last:
        return judged(Verdict.INCONCLUSIVE, None, samples, why)
    holds = slo.op in (">", ">=")
    return judged(Verdict.PASS if holds else Verdict.FAIL, None, samples, why)


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
