"""Verdicts on a fleet's parts and spread: ``replica.*``, ``fleet.*`` and ``<pool>.*``.

- ``replica.<metric>`` (``replica.ttft.p99 < 500ms``): the plain metric judged on each
  replica's own requests (the replica a response header named: ``RequestRecord.replica``),
  one verdict per replica that served requests, each a run of its own for the rules of
  :func:`~.verdicts.evaluate` (the same confidence bounds and sample minimums), naming
  its replica (``SloVerdict.replica``). Every replica must meet it: one slow replica
  fails it while the fleet's own ``ttft.p99`` may pass. No response named a replica:
  one inconclusive verdict saying so and how to fix it.
- ``fleet.imbalance``: the most completed requests of one replica over the mean per
  replica. The client's attribution where it has one (replicas that served nothing
  counted as 0 where the replica pages name the same replicas), else the replica
  pages' own request counters (``runs[].fleet.requests``; decode pages for a
  disaggregated fleet). ``fleet.busy_imbalance``: the same of each replica page's mean
  ``server.running`` (how busy each was, sampled over the run).
  ``fleet.prefix_hit_rate``: prefix-cache hits over lookups summed over the pages
  (``runs[].fleet.prefix_hit_rate``), else the server's ``server.prefix_cache_hit_rate``.
  Each is one value judged as observed.
- ``<pool>.<name>`` (``prefill.queue_time.p99``): judged exactly as ``server.<name>``
  (:func:`~.verdicts.evaluate_server`) on the pool's pages together
  (``runs[].fleet.roles[pool]``); no such pool: inconclusive naming the pool and the
  pages given.

All are judged on a whole run, never per stage (a stage keeps no per-replica requests
nor a fleet of its own).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pytest_llmperf.client.affinity import DEFAULT_REPLICA_HEADERS
from pytest_llmperf.results.fleet_figures import (
    busy_by_page,
    imbalance,
    replica_requests,
    serving_pages,
)
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.server_metrics.fleet import FleetMetrics
from pytest_llmperf.slo.verdict_record import SloVerdict, Verdict
from pytest_llmperf.specs.rulesets import ruleset_bar
from pytest_llmperf.specs.slo import DEFAULT_CONFIDENCE, Slo

__all__ = [
    "NOT_ATTRIBUTED",
    "evaluate_fleet_scope",
    "evaluate_replicas",
    "fleet_value",
]

NOT_ATTRIBUTED = (
    "no response named the replica that served it (none carried a header of "
    "--llm-replica-header, default " + ", ".join(DEFAULT_REPLICA_HEADERS) + "): set "
    "--llm-replica-header to the header your router or replicas send (docs/fleets.md)"
)
# the judges of a whole run (slo/verdicts.py's evaluate and evaluate_server), handed in by
# their module, which calls this one: ``judge(slo, result, *, min_count, min_duration_s,
# confidence)``, ``judge_server(slo, result, *, min_count, confidence)``
Judge = Callable[..., SloVerdict]
_ORDER = {Verdict.FAIL: 0, Verdict.INCONCLUSIVE: 1, Verdict.PASS: 2}


def evaluate_replicas(
    slos: Sequence[Slo],
    result: RunResult,
    *,
    judge: Judge,
    bars: Mapping[Slo, tuple[int, float]] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[SloVerdict]:
    """The ``replica.*`` ones of ``slos`` judged on each replica's requests of ``result``,
    SLO by SLO, replica by replica (sorted by name): the verdicts name the run and the
    replica (``judge``: :func:`~.verdicts.evaluate`). A run with no attributed request has
    one inconclusive verdict per SLO."""
    out: list[SloVerdict] = []
    names = result.replicas
    for slo in (s for s in slos if s.is_replica):
        count, duration = ruleset_bar(bars, slo)
        if not names:
            out.append(_judged(slo, result, Verdict.INCONCLUSIVE, None, 0, NOT_ATTRIBUTED))
            continue
        plain = replace(slo, metric=slo.plain_metric)
        for name in names:
            part = result.replica_result(name)
            verdict = judge(
                plain, part, min_count=count, min_duration_s=duration, confidence=confidence
            )
            out.append(
                replace(
                    verdict,
                    run=result.label,
                    replica=name,
                    reason=_replica_reason(verdict, name, part, result),
                )
            )
    return out


def _replica_reason(verdict: SloVerdict, name: str, part: RunResult, whole: RunResult) -> str:
    """A replica's failing or undecided verdict names the replica and its share of the run
    (so the test's failure message says which one, whatever table shows it)."""
    if verdict.verdict is Verdict.PASS:
        return verdict.reason
    share = f"replica {name} ({part.accumulator.issued} of {whole.accumulator.issued} requests)"
    return f"{share}: {verdict.reason}" if verdict.reason else share


def evaluate_fleet_scope(
    slo: Slo,
    result: RunResult,
    *,
    judge: Judge,
    judge_server: Judge,
    min_count: int = 0,
    min_duration_s: float = 0.0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> SloVerdict:
    """One verdict of a ``replica.*``, ``fleet.*`` or ``<pool>.*`` SLO on ``result``; for
    ``replica.*`` the worst replica's (a failing one first), which is what a caller that
    wants one verdict per SLO (a session's ruleset, a search's probe) needs."""
    if slo.is_replica:
        bars = {slo: (min_count, min_duration_s)} if min_count or min_duration_s else None
        found = evaluate_replicas([slo], result, judge=judge, bars=bars, confidence=confidence)
        return min(found, key=lambda v: _ORDER[v.verdict])
    if slo.pool is not None:
        return _evaluate_pool(
            slo, slo.pool, result, judge_server, min_count=min_count, confidence=confidence
        )
    return _evaluate_fleet(slo, result)


def _evaluate_pool(
    slo: Slo,
    pool: str,
    result: RunResult,
    judge_server: Judge,
    *,
    min_count: int,
    confidence: float,
) -> SloVerdict:
    """``<pool>.<name>`` judged as ``server.<name>`` on the pool's pages together."""
    fleet = result.fleet
    metrics = fleet.role(pool) if fleet is not None else None
    if metrics is None:
        return _judged(slo, result, Verdict.INCONCLUSIVE, None, 0, _no_pool(pool, fleet))
    shadow = replace(result, server_metrics=metrics)
    verdict = judge_server(
        replace(slo, metric=slo.plain_metric), shadow, min_count=min_count, confidence=confidence
    )
    if verdict.reason and verdict.verdict is not Verdict.PASS:
        verdict = replace(verdict, reason=f"{pool} pool: {verdict.reason}")
    return verdict


def _no_pool(pool: str, fleet: FleetMetrics | None) -> str:
    if fleet is None or not fleet.pages:
        return (
            f"no {pool} pages: the run read no list of pages (--llm-server-metrics="
            f"{pool}=URL,...; docs/fleets.md)"
        )
    pages = ", ".join(f"{p.role.value} {p.name}" for p in fleet.pages)
    return f"no {pool} pages among the pages given ({pages})"


def _evaluate_fleet(slo: Slo, result: RunResult) -> SloVerdict:
    """``fleet.imbalance``, ``fleet.busy_imbalance`` or ``fleet.prefix_hit_rate``: one value
    judged as observed."""
    value, samples, why = fleet_value(slo.metric, result)
    if value is None:
        return _judged(slo, result, Verdict.INCONCLUSIVE, None, samples, why)
    observed = round(value, 4)
    if result.self_check.get("generator_bound") and slo.metric != "fleet.prefix_hit_rate":
        reasons = (
            "; ".join(result.self_check.get("reasons", [])) or "load generator was the bottleneck"
        )
        return _judged(
            slo, result, Verdict.INCONCLUSIVE, observed, samples, f"load generator bound: {reasons}"
        )
    holds = slo.holds(observed)
    return _judged(
        slo,
        result,
        Verdict.PASS if holds else Verdict.FAIL,
        observed,
        samples,
        "" if holds else why,
    )


def fleet_value(metric: str, result: RunResult) -> tuple[float | None, int, str]:
    """``(value, samples, where from)`` of a ``fleet.*`` figure on ``result``; value None
    with why where the run cannot say it (:mod:`pytest_llmperf.results.fleet_figures`)."""
    if metric == "fleet.prefix_hit_rate":
        return _prefix_hit_rate(result)
    fleet = result.fleet
    pages = fleet.pages if fleet is not None else []
    serving = serving_pages((p.role.value, p.name) for p in pages)
    if metric == "fleet.busy_imbalance":
        running = {p.name: p.metrics.stat("server.running", "mean") for p in pages}
        busy = busy_by_page(running, serving)
        if not busy:
            return (
                None,
                0,
                (
                    "no replica page sampled its running requests (server.running; "
                    "--llm-server-metrics=replica=URL,...)"
                ),
            )
        return _imbalance(busy, "mean running requests per replica page")
    attributed = {k: float(v.completed) for k, v in result.accumulator.replicas.items()}
    counts, source = replica_requests(
        attributed, serving, fleet.requests if fleet is not None else {}
    )
    if not counts:
        return (
            None,
            0,
            (
                f"{NOT_ATTRIBUTED}; and no replica page counted its requests "
                "(--llm-server-metrics=replica=URL,...)"
            ),
        )
    return _imbalance(counts, f"completed requests per replica ({source})")


def _imbalance(values: Mapping[str, float], what: str) -> tuple[float | None, int, str]:
    """Max over mean of ``values``, with the values said."""
    shown = ", ".join(f"{k}={v:g}" for k, v in sorted(values.items()))
    value = imbalance(values)
    if value is None:
        return None, len(values), f"no load to compare: {what}: {shown}"
    return value, len(values), f"{what}: {shown}"


def _prefix_hit_rate(result: RunResult) -> tuple[float | None, int, str]:
    fleet = result.fleet
    if fleet is not None and fleet.prefix_hit_rate is not None:
        pages = len(fleet.pages)
        return fleet.prefix_hit_rate, pages, f"hits over lookups summed over {pages} pages"
    server = result.server_metrics
    name = "server.prefix_cache_hit_rate"
    if server is not None and name in server.metrics:
        value = server.stat(name, None)
        if value is not None and not math.isnan(value):
            return float(value), server.scrapes, f"{name} of the server as one"
    if server is None:
        return None, 0, "no server metrics (--llm-server-metrics off)"
    return None, 0, server.missing or "no page counted prefix-cache hits and lookups"


def _judged(
    slo: Slo,
    result: RunResult,
    verdict: Verdict,
    observed: float | None,
    samples: int,
    reason: str,
) -> SloVerdict:
    return SloVerdict(
        slo.expr, observed, slo.target, slo.unit, verdict, result.label, samples, reason
    )
