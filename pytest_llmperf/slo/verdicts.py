"""Verdicts: does a run meet an SLO, fail it, or not say enough to tell?

``inconclusive`` is a verdict of its own, never a pass:

- a percentile SLO (``ttft.p99 < 500ms``, ``<``, ``<=``, ``>``, ``>=``; client or
  ``server.*`` latency) is decided by the percentile's distribution-free
  confidence bounds (:mod:`.quantile_bounds`, ``--llm-confidence``, default
  0.99, per SLO ``llm_slo(..., confidence=)``): it passes when the bound on the
  far side of the target clears it, fails when the near one does, and is
  inconclusive while the target lies within the interval, with about how many
  samples would decide it. The bounds are order statistics read from the HDR
  histogram (the server's buckets), each taken at the conservative edge of
  its bucket. ``pN == target`` keeps the point rule: the nearest-rank value
  compared with the target, given at least ``10 × 100/(100 − p)`` samples;
- ``mean`` and rates (``error_rate``, throughputs, goodput) are compared as
  observed (at least one sample: an issued request; for ``blank_rate``, a
  completed one); ``max`` is exact and compared as observed;
- a run where the load generator, not the server, was the bottleneck
  (``self_check.generator_bound``) cannot judge latency or throughput.

A staged run (``llm_load(..., stages=[...])`` or ``ramp={...}``) is judged
stage by stage, never as one: every SLO of the test on each stage, a
stage's own SLOs on that stage only. Each stage is a run of its own for
these rules, so a short stage may be inconclusive where the whole run would
have had samples enough.

An SLO on the server's own metrics (``server.*``) is judged on what the
server said over the run (or stage): :func:`evaluate_server`.

An SLO on the server process the gate started (``startup.ready_s``,
``server.rss_growth_mb``, …: :mod:`pytest_llmperf.specs.process_names`) is
judged on the run's ``server_process`` block, one value as observed (no sample
minimum): :func:`evaluate_process`. It is a whole run's (never per stage or per
served model), and, being about the server's process and not about the load,
it is not made inconclusive by a generator-bound run. A run without the block
(an endpoint the gate did not start) or without the value (no GPU, no output
tokens) is inconclusive with why; a run whose server exited is judged on what
it measured (the plugin fails that test for the exit anyway).

The output SLOs are shares judged as observed, on what the run measured of
its outputs, never on its issued requests: ``valid_rate`` over the checked
outputs (none checked: inconclusive), ``output_match`` and
``output_consistency`` over the samples compared (no other side, or no
sample in common: inconclusive, with why); a failing one names the
mismatching samples and the token where each parts. None of them depends
on the load generator keeping up.

``llm_slo(..., per_model=True)``: each of that marker's SLOs is also judged on
the requests of each served model of the run (``adapters=``), a run of its own
for these rules; the verdicts name the model (``model``, ``where`` =
``model sim-lora-1``). ``output_match``/``output_consistency`` are compared per
sample over the whole run and are not split by model.

An SLO on the GPUs' figures (``gpu.power_w.mean < 300W``,
``energy_per_output_token_j < 0.5J``: :mod:`pytest_llmperf.specs.gpu_names`) is judged
on the run's ``gpu`` block like a process SLO: one value as observed, whole runs only,
not made inconclusive by a generator-bound run; no block or no value: inconclusive with
why (:mod:`.gpu_verdicts`).

A fleet's SLOs (``replica.*`` on each replica's requests, ``fleet.*``, ``<pool>.*``):
:mod:`.fleet_verdicts`, on whole runs only. ``kv_transfer.<stat>`` is
``server.kv_transfer``'s, judged as any ``server.*``.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_llmperf.metrics.sample_size import min_samples
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.results.steady import STEADY_RATE_METRICS
from pytest_llmperf.server_metrics.summary import ServerMetrics
from pytest_llmperf.slo.fleet_verdicts import evaluate_fleet_scope, evaluate_replicas
from pytest_llmperf.slo.gpu_verdicts import evaluate_gpu
from pytest_llmperf.slo.output_match import NO_OTHER_SIDE, mismatch_text
from pytest_llmperf.slo.quantile_bounds import (
    RankBounds,
    decided,
    rank_bounds,
    samples_to_decide,
)
from pytest_llmperf.slo.sequential import sequential_rank_bounds
from pytest_llmperf.slo.verdict_record import SloVerdict, Verdict
from pytest_llmperf.specs.conversation_names import CONVERSATION_RATE_METRICS
from pytest_llmperf.specs.load import UNTIL_DECIDED
from pytest_llmperf.specs.process_names import process_value
from pytest_llmperf.specs.rulesets import Ruleset, ruleset_bar, ruleset_bars
from pytest_llmperf.specs.server_names import MetricKind, metric_kind
from pytest_llmperf.specs.slo import DEFAULT_CONFIDENCE, OUTPUT_SLO_METRICS, Slo
from pytest_llmperf.specs.stages import Stage

__all__ = [
    "SloVerdict",
    "Verdict",
    "evaluate",
    "evaluate_models",
    "evaluate_outputs",
    "evaluate_process",
    "evaluate_runs",
    "evaluate_server",
    "evaluate_stages",
    "min_samples",
    "stage_load",
]


# compared sample by sample over a whole run: never judged per stage or per model
_WHOLE_RUN_METRICS = ("output_match", "output_consistency")
# rates a load generator that fell behind does not change (errors, blanks, replica affinity)
_NOT_LOAD_BOUND = ("error_rate", "blank_rate", *CONVERSATION_RATE_METRICS)
NOT_STARTED = "the gate did not start this server (--llm-server-cmd)"


def _whole_run(slo: Slo) -> bool:
    """Is ``slo`` judged on a whole run only (outputs compared per sample; the process; a
    fleet's parts and spread, which a stage does not keep; the GPUs, sampled over the run)?"""
    return slo.metric in _WHOLE_RUN_METRICS or slo.is_process or slo.is_gpu or slo.in_fleet_scope


def _windowed(slo: Slo, result: RunResult) -> bool:
    """Is ``slo`` judged on ``result``'s steady-state window (``llm_load(steady=...)``):
    a throughput or goodput, or a latency with ``latency=True``? A staged run's is
    judged once, on the window, not per stage (its ramp stages are what it leaves out)."""
    window = getattr(getattr(result, "accumulator", None), "steady", None)
    if window is None:
        return False
    return slo.metric in STEADY_RATE_METRICS or (slo.is_latency and window.latency)


def _bounded(slo: Slo) -> bool:
    """Is ``slo`` judged by a percentile's confidence bounds (not a point comparison)?"""
    return slo.percentile is not None and slo.op != "=="


def _interval_verdict(
    slo: Slo,
    n: int,
    rank_range: Callable[[int], tuple[float, float]],
    split: Callable[[float], tuple[int, int]],
    confidence: float,
    bounds: RankBounds = rank_bounds,
) -> tuple[Verdict, tuple[float, float | None], str]:
    """The verdict of a percentile SLO from its confidence interval over ``n`` samples.

    ``rank_range(r)`` is the range the r-th smallest sample lies in (its bucket's edges):
    the lower bound is the bottom of X(r_lo)'s, the upper bound the top of X(r_hi)'s.
    ``split(t)`` is ``(below, above)``: samples surely under / surely at or over ``t``.
    """
    percentile = slo.percentile
    assert percentile is not None
    r_lo, r_hi = bounds(n, percentile, confidence)
    lower = rank_range(r_lo)[0] if r_lo is not None else 0.0
    upper = rank_range(r_hi)[1] if r_hi is not None else math.inf
    interval = (round(lower, 4), None if math.isinf(upper) else round(upper, 4))
    outcome = decided(slo.op, lower, upper, slo.target)
    if outcome is not None:
        return Verdict.PASS if outcome else Verdict.FAIL, interval, ""
    below, above = split(slo.target)
    needed = samples_to_decide(n, below, above, percentile, confidence, bounds=bounds)
    where = f"{format_bound(lower)}, {format_bound(upper)}"
    head = f"{confidence:.4g} interval of {slo.stat} [{where}] holds the target"
    if needed is None:
        return (
            Verdict.INCONCLUSIVE,
            interval,
            f"{head}; more samples would not decide it (the target is at the observed {slo.stat})",
        )
    return (
        Verdict.INCONCLUSIVE,
        interval,
        f"{head}; about {needed} samples would decide it (if the distribution stays as "
        f"observed), run has {n}",
    )


def format_bound(value: float) -> str:
    """A bound in ms for a reason: ``21.9 ms``, ``∞``."""
    if math.isinf(value):
        return "∞"
    return f"{value:.1f} ms" if value >= 10 else f"{value:.3f} ms"


def evaluate(
    slo: Slo,
    result: RunResult,
    *,
    min_count: int = 0,
    min_duration_s: float = 0.0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> SloVerdict:
    """Judge ``slo`` on ``result``.

    ``min_count`` is a least sample count (a ruleset's ``min_samples``);
    ``min_duration_s`` is the least measured window a verdict needs (a ruleset's
    ``min_duration``). ``confidence`` is that of a percentile's bounds unless the
    SLO names its own.
    """
    confidence = slo.confidence or confidence
    if slo.in_fleet_scope:  # replica.*, fleet.*, <pool>.*
        return evaluate_fleet_scope(
            slo,
            result,
            judge=evaluate,
            judge_server=evaluate_server,
            min_count=min_count,
            min_duration_s=min_duration_s,
            confidence=confidence,
        )
    if slo.is_process:
        return evaluate_process(slo, result)
    if slo.is_gpu:
        return evaluate_gpu(slo, result)
    if slo.is_server:
        return evaluate_server(slo, result, min_count=min_count, confidence=confidence)
    if slo.metric in OUTPUT_SLO_METRICS:
        return evaluate_outputs(slo, result, min_count=min_count)
    if slo.turn_band is not None:  # turns[11-20].ttft.p90: that band's requests as a run
        return evaluate(
            replace(slo, turn_band=None),
            result.turn_band_result(slo.turn_band),
            min_count=min_count,
            min_duration_s=min_duration_s,
            confidence=confidence,
        )
    acc = result.accumulator
    run = result.label
    window = acc.steady  # llm_load(steady=...): an empty window has no number, never a zero
    windowed = window is not None and (
        slo.metric in STEADY_RATE_METRICS
        or (slo.is_latency and not slo.is_conversation and window.latency)
    )  # a conversation's makespan is over its whole run, never windowed
    if windowed and window is not None and (why := window.why_empty()):
        return SloVerdict(slo.expr, None, slo.target, slo.unit, Verdict.INCONCLUSIVE, run, 0, why)
    if slo.is_latency:
        hist = result.histogram(slo.metric)  # a request's, or a conversation's
        samples = hist.count
        observed = hist.stat(slo.stat or "") if samples else None
    else:  # blank_rate's are the completed replies, a share of calls its call pairs
        samples = result.rate_samples(slo.metric)
        observed = result.rate(slo.metric) if samples else None

    def judged(verdict: Verdict, observed: float | None, reason: str = "") -> SloVerdict:
        return SloVerdict(slo.expr, observed, slo.target, slo.unit, verdict, run, samples, reason)

    if observed is None or (isinstance(observed, float) and math.isnan(observed)):
        return judged(Verdict.INCONCLUSIVE, None, _nothing_measured(slo))
    observed = round(float(observed), 4)
    bounded = slo.is_latency and _bounded(slo)
    needed = max(1 if bounded else min_samples(slo.percentile), min_count)
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
    if result.self_check.get("generator_bound") and slo.metric not in _NOT_LOAD_BOUND:
        why = "; ".join(result.self_check.get("reasons", [])) or "load generator was the bottleneck"
        return judged(Verdict.INCONCLUSIVE, observed, f"load generator bound: {why}")
    if bounded:
        hist = result.histogram(slo.metric)
        # until="decided": the run was looked at as it went, so its bounds are the
        # always-valid ones (slo/sequential.py), at its end as at every look
        always_valid = result.load.get("until") == UNTIL_DECIDED
        verdict, interval, reason = _interval_verdict(
            slo,
            samples,
            hist.rank_range_ms,
            hist.split_at_ms,
            confidence,
            sequential_rank_bounds if always_valid else rank_bounds,
        )
        return replace(judged(verdict, observed, reason), interval=interval, confidence=confidence)
    return judged(Verdict.PASS if slo.holds(observed) else Verdict.FAIL, observed)


def _nothing_measured(slo: Slo) -> str:
    """Why ``slo`` has no value on a run."""
    if slo.metric == "conversation.same_replica_rate":
        return "no consecutive calls of a thread with their replica said (not attributed)"
    if slo.metric == "conversation.tree_same_replica_rate":
        return "no consecutive calls of a conversation with their replica said (not attributed)"
    if slo.is_conversation:
        return "no conversation whose every call completed"
    return f"no {'successful ' if slo.is_latency else ''}requests to measure"


def evaluate_outputs(slo: Slo, result: RunResult, *, min_count: int = 0) -> SloVerdict:
    """Judge ``valid_rate``, ``output_match`` or ``output_consistency`` on ``result``
    (see the module's docstring): as observed, over the outputs the run measured."""
    reason = ""
    if slo.metric == "valid_rate":
        acc = result.accumulator
        samples = acc.checked
        observed = acc.rate("valid_rate") if samples else None
        missing = "no completed output was checked (the workload asks for no structured= or tools=)"
        if acc.invalid_samples:
            top = acc.invalid_samples.to_list()[0]
            reason = f"{acc.invalid} of {samples} invalid, e.g. {top['kind']}: {top['message']}"
    else:
        match = result.output_match if slo.metric == "output_match" else result.output_consistency
        samples = match.compared if match is not None else 0
        observed = match.share if match is not None else None
        missing = result.output_notes.get(slo.metric) or (
            NO_OTHER_SIDE
            if slo.metric == "output_match"
            else "no outputs alone to compare with (the run kept no greedy outputs)"
        )
        if match is not None:
            reason = mismatch_text(match)

    def judged(verdict: Verdict, value: float | None, why: str = "") -> SloVerdict:
        return SloVerdict(
            slo.expr, value, slo.target, slo.unit, verdict, result.label, samples, why
        )

    if observed is None:
        return judged(Verdict.INCONCLUSIVE, None, missing)
    observed = round(float(observed), 6)
    if samples < min_count:
        return judged(
            Verdict.INCONCLUSIVE, observed, f"needs >= {min_count} samples, run has {samples}"
        )
    holds = slo.holds(observed)
    return judged(Verdict.PASS if holds else Verdict.FAIL, observed, "" if holds else reason)


def evaluate_process(slo: Slo, result: RunResult) -> SloVerdict:
    """Judge a process SLO (``startup.ready_s < 90s``, ``server.rss_growth_mb < 50``) on
    the run's ``server_process`` block: its one value against the target, as observed.

    No block: the gate did not start the server (an endpoint URL), inconclusive. No value:
    inconclusive with the block's own note where it has one (``gpu_note``: no NVML or no
    GPU) or why (no output tokens for the CPU per token, no first-token request).
    """
    block = result.server_process

    def judged(verdict: Verdict, observed: float | None, reason: str = "") -> SloVerdict:
        samples = 1 if observed is not None else 0
        return SloVerdict(
            slo.expr, observed, slo.target, slo.unit, verdict, result.label, samples, reason
        )

    if block is None:
        return judged(Verdict.INCONCLUSIVE, None, NOT_STARTED)
    observed = process_value(block, slo.metric)
    if observed is None or math.isnan(observed):
        return judged(Verdict.INCONCLUSIVE, None, _process_missing(slo.metric, block))
    observed = round(observed, 4)
    return judged(Verdict.PASS if slo.holds(observed) else Verdict.FAIL, observed)


def _process_missing(metric: str, block: Mapping[str, Any]) -> str:
    """Why the ``server_process`` block has no value for ``metric``."""
    resources = block.get("resources") or {}
    if metric == "server.gpu_mem_max_mb":
        return str(resources.get("gpu_note") or "no GPU memory measured")
    if metric == "server.cpu_ms_per_output_token" and resources.get("cpu_s") is not None:
        return "the run had no output tokens"
    if metric == "startup.first_token_s":
        return "no first token measured (the first request failed, or no streaming API)"
    if metric.startswith("server.") and not resources:
        return "the server's resources were not sampled over this run"
    return f"{metric} was not measured for this run"


def evaluate_server(
    slo: Slo, result: RunResult, *, min_count: int = 0, confidence: float = DEFAULT_CONFIDENCE
) -> SloVerdict:
    """Judge an SLO on the server's own metrics (``server.queue_time.p99 < 50ms``).

    A metric the server did not give (scraping off or failed, a family without
    it, other processes' pages) is inconclusive with the reason. A latency
    percentile is observed at the upper bound of the bucket its nearest rank falls
    in, and judged like a client percentile by its confidence bounds over the run's
    bucket deltas (a bound at its bucket's far edge: the lower bound at the bucket
    below's top, the upper at the bucket's own top, infinite in the open top
    bucket); gauges and counters need the run's start and end scrapes (or, for a
    gauge, one sample).
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
    rows = server.buckets.get(slo.metric) or []
    if kind is MetricKind.LATENCY and _bounded(slo) and rows:
        return _server_interval(slo, result, rows, observed, min_count, confidence)
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


def _server_interval(
    slo: Slo,
    result: RunResult,
    rows: Sequence[Sequence[float]],
    observed: float | None,
    min_count: int,
    confidence: float,
) -> SloVerdict:
    """A server latency percentile judged by its confidence bounds over the bucket deltas
    ``[[upper_ms, count], …]`` (a sample of a bucket lies above the previous bound, at or
    below its own)."""
    uppers = [float(u) for u, _ in rows]
    counts = [int(c) for _, c in rows]
    n = sum(counts)
    cum = list(itertools.accumulate(counts))
    if observed is not None and math.isnan(observed):
        observed = None
    shown = None if observed is None or math.isinf(observed) else round(float(observed), 4)

    def judged(verdict: Verdict, reason: str = "") -> SloVerdict:
        return SloVerdict(slo.expr, shown, slo.target, slo.unit, verdict, result.label, n, reason)

    if n < max(1, min_count):
        if n == 0:
            return judged(Verdict.INCONCLUSIVE, f"no {slo.metric} observed in the run")
        return judged(
            Verdict.INCONCLUSIVE,
            f"{slo.stat} needs >= {min_count} samples, the server counted {n}",
        )
    if result.self_check.get("generator_bound"):
        why = "; ".join(result.self_check.get("reasons", [])) or "load generator was the bottleneck"
        return judged(Verdict.INCONCLUSIVE, f"load generator bound: {why}")

    def rank_range(rank: int) -> tuple[float, float]:
        i = bisect.bisect_left(cum, rank)
        return (uppers[i - 1] if i else 0.0), uppers[i]

    def split(target: float) -> tuple[int, int]:
        below = sum(c for u, c in zip(uppers, counts, strict=True) if u < target)
        lows = [0.0, *uppers[:-1]]
        above = sum(c for lo, c in zip(lows, counts, strict=True) if lo >= target)
        return below, above

    verdict, interval, reason = _interval_verdict(slo, n, rank_range, split, confidence)
    if shown is None and observed is not None:
        last = max((u for u in uppers if not math.isinf(u)), default=0.0)
        reason = "; ".join(
            r
            for r in (
                f"{slo.stat} is beyond the server's last finite bucket (> {last:g} ms)",
                reason,
            )
            if r
        )
    return replace(judged(verdict, reason), interval=interval, confidence=confidence)


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
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[SloVerdict]:
    """Each stage of a staged run judged as a run of its own, stage by stage.

    Every one of ``slos`` is judged on every stage, and a stage's own SLOs on
    that stage only (a process SLO among a stage's own: on the run's process block);
    the verdicts name the run (``run``) and the stage
    (``stage``, ``stage_load``). ``bars`` are per-SLO ``(min_count,
    min_duration_s)`` (see :func:`evaluate`), which hold for each stage.
    """
    bars = bars or {}
    out: list[SloVerdict] = []
    for k, stage in enumerate(result.stage_plan):
        part = result.stage_result(k)
        own = [slo for slo in stage.slos if slo not in slos]
        for slo in (*slos, *own):
            count, duration = ruleset_bar(bars, slo)
            verdict = evaluate(
                slo,
                result if slo.is_process or slo.is_gpu else part,
                min_count=count,
                min_duration_s=duration,
                confidence=confidence,
            )
            out.append(replace(verdict, run=result.label, stage=k, stage_load=stage_load(stage)))
    return out


def evaluate_models(
    slos: Sequence[Slo],
    result: RunResult,
    *,
    bars: Mapping[Slo, tuple[int, float]] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[SloVerdict]:
    """The ``per_model`` ones of ``slos`` judged on each served model's requests of
    ``result``, model by model (sorted by name); the verdicts name the run and the model.
    ``output_match``/``output_consistency`` are not split by model (module docstring)."""
    bars = bars or {}
    chosen = [s for s in slos if s.per_model and not _whole_run(s)]
    out: list[SloVerdict] = []
    for name in result.models if chosen else ():
        part = result.model_result(name)
        for slo in chosen:
            count, duration = ruleset_bar(bars, slo)
            verdict = evaluate(
                slo, part, min_count=count, min_duration_s=duration, confidence=confidence
            )
            out.append(replace(verdict, run=result.label, model=name))
    return out


def evaluate_runs(
    slos: Sequence[Slo],
    results: Iterable[RunResult],
    *,
    rulesets: Sequence[Ruleset] = (),
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[SloVerdict]:
    """Every SLO on every gated run of a test; a staged run's on each of its stages
    (with ``steady=``, its windowed SLOs once, on the window).

    An SLO that came from one of ``rulesets`` also needs that ruleset's
    minimum sample count and measured duration (per stage, for a staged run).
    A ``replica.*`` SLO has one verdict per replica that served requests
    (:func:`~.fleet_verdicts.evaluate_replicas`).
    """
    bars = ruleset_bars(rulesets)
    out: list[SloVerdict] = []
    for r in results:
        if not getattr(r, "gated", True):
            continue
        whole: Sequence[Slo] = slos
        if getattr(r, "stage_plan", ()):
            # outputs are compared per sample over the whole run, and the process is the
            # whole run's: those are not staged
            staged = [s for s in slos if not _whole_run(s) and not _windowed(s, r)]
            whole = [s for s in slos if _whole_run(s) or _windowed(s, r)]
            out.extend(evaluate_stages(staged, r, bars=bars, confidence=confidence))
        for slo in whole:
            if slo.is_replica:
                out.extend(
                    evaluate_replicas([slo], r, judge=evaluate, bars=bars, confidence=confidence)
                )
                continue
            count, duration = ruleset_bar(bars, slo)
            out.append(
                evaluate(slo, r, min_count=count, min_duration_s=duration, confidence=confidence)
            )
        if getattr(getattr(r, "accumulator", None), "models", None):
            out.extend(evaluate_models(slos, r, bars=bars, confidence=confidence))
    return out
