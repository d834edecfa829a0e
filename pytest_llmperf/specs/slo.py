"""SLO expressions such as ``"ttft.p99 < 500ms"`` or ``"error_rate < 1%"``.

Grammar: ``<metric>.<stat> <op> <number>[unit]`` for latency metrics,
``<rate-metric> <op> <number>[unit]`` for rates, ``server.<name>[.<stat>]``
for the server's own metrics (:mod:`.server_names`), and ``startup.<name>`` /
``server.<name>`` without a statistic for the server process the gate started
(:mod:`.process_names`: ``startup.ready_s < 90s``, ``server.rss_growth_mb < 50``).
The GPUs' figures over a run (:mod:`.gpu_names`, docs/gpu.md) are one value each, no
statistic: ``gpu.power_w.mean < 300W``, ``gpu.power_w.max < 1.2kW``, ``gpu.energy_j < 5kJ``,
``gpu.memory_used_mb.max < 70GB``, ``gpu.util > 50%``, ``gpu.temperature_c.max < 85C``,
``energy_per_output_token_j < 0.5J`` (the units of each name's table entry).
A run's conversations (:mod:`.conversation_names`) add ``conversation.makespan.<stat>``
and ``conversation.makespan_excl_tools.<stat>`` (latencies of whole conversations),
``conversation.same_replica_rate`` and ``conversation.tree_same_replica_rate`` (shares),
and a per-request latency judged on one turn band's requests only:
``turns[<band>].<metric>.<stat>`` (``turns[11-20].ttft.p90 < 2s``; bands 1, 2-5, 6-10,
11-20, 21-50, 51+; metrics ttft, ttfo, tpot, e2e).
A fleet (:mod:`.fleet_names`, docs/fleets.md) adds ``replica.<metric>[.<stat>]`` (a client
metric judged on each replica's own requests: ``replica.ttft.p99 < 500ms``,
``replica.error_rate < 1%``), ``fleet.imbalance`` and ``fleet.busy_imbalance`` (ratios, no
unit or ``x``), ``fleet.prefix_hit_rate`` (a fraction), ``<pool>.<name>[.<stat>]`` for the
pools ``router``, ``prefill`` and ``decode`` over the common server names without their
``server.`` (``prefill.queue_time.p99 < 200ms``, ``decode.kv_usage.max < 90%``) and
``kv_transfer.<stat>`` (the fleet's ``server.kv_transfer``; its metric is that name).
``<op>`` is one of ``< <= > >= ==`` (``server.preemptions == 0``). ``<stat>`` is ``mean``,
``max`` or any percentile ``pN`` / ``pN.M…`` with 0 < N < 100 (``p75``,
``p99.99``: k6 and HDR tools take any, so do we), written one way only (``p5``,
not ``p05``; ``p50``, not ``p50.0``) so that each has one name in the reports.
Values are converted to one canonical unit per metric kind (milliseconds,
fractions, per second) so comparisons and reports never mix units.

Parsing only: whether a run meets an SLO is :mod:`pytest_llmperf.slo.verdicts`.
:func:`request_limits` is here because the load generator needs it before a
run (goodput counts each request against the limits the SLOs imply) and must
not depend on the verdict layer that judges its results.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.conversation_names import (
    BAND_SLO_METRICS,
    CONVERSATION_LATENCY_METRICS,
    CONVERSATION_RATE_METRICS,
    TURN_BANDS,
)
from pytest_llmperf.specs.fleet_names import (
    FLEET_METRICS,
    KV_TRANSFER,
    POOL_SCOPES,
    REPLICA_SCOPE,
    SERVER_ALIASES,
)
from pytest_llmperf.specs.gpu_names import GPU_METRICS
from pytest_llmperf.specs.process_names import PROCESS_METRICS
from pytest_llmperf.specs.server_names import (
    COMMON_METRICS,
    GAUGE_STATS,
    MetricKind,
)

__all__ = [
    "DEFAULT_CONFIDENCE",
    "GOODPUT_METRICS",
    "LATENCY_SLO_METRICS",
    "OUTPUT_SLO_METRICS",
    "RATE_SLO_METRICS",
    "REPLICA_SLO_METRICS",
    "STATS",
    "Slo",
    "confidence_problem",
    "parse_slo",
    "percentile_of",
    "request_limits",
    "stat_problem",
]

LATENCY_SLO_METRICS = (
    "ttft",
    "ttfo",
    "tpot",
    "itl",
    "e2e",
    "schedule_lag",
    "queue_wait",
    "tpot_token_weighted",
)
# The standard statistics every report shows; an SLO may also name any percentile pN / pN.M.
STATS = ("p50", "p90", "p95", "p99", "p99.9", "mean", "max")
# metric -> (canonical unit, {accepted unit: factor to canonical}); "" = no unit written
RATE_SLO_METRICS: dict[str, tuple[str, dict[str, float]]] = {
    "error_rate": ("fraction", {"%": 0.01, "": 1.0}),
    "blank_rate": ("fraction", {"%": 0.01, "": 1.0}),  # completed replies with no visible text
    "goodput": ("fraction", {"%": 0.01, "": 1.0}),
    "request_throughput": ("req/s", {"req/s": 1.0, "": 1.0}),
    "output_throughput": ("tok/s", {"tok/s": 1.0, "": 1.0}),
    "input_throughput": ("tok/s", {"tok/s": 1.0, "": 1.0}),
    # outputs (llm_workload(structured=, tools=, greedy=True)): shares of the run's samples
    "valid_rate": ("fraction", {"%": 0.01, "": 1.0}),  # checked outputs that were valid
    "output_match": ("fraction", {"%": 0.01, "": 1.0}),  # equal to the other side's
    "output_consistency": ("fraction", {"%": 0.01, "": 1.0}),  # equal under load and alone
}
# The rate metrics about outputs (judged on what the run measured of them, not its issued)
OUTPUT_SLO_METRICS = ("valid_rate", "output_match", "output_consistency")
# the client metrics with a per-replica form (replica.<metric>): not the outputs compared
# sample by sample over a whole run
REPLICA_SLO_METRICS = (
    *LATENCY_SLO_METRICS,
    *(m for m in RATE_SLO_METRICS if m not in ("output_match", "output_consistency")),
)
DEFAULT_CONFIDENCE = 0.99  # of percentile verdicts (--llm-confidence)
GOODPUT_METRICS = ("ttft", "ttfo", "tpot", "e2e")  # latencies with a per-request form
_TIME_UNITS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3}
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
}
# pN or pN.M… with 0 < N < 100, written once: no leading zero (p5, not p05), no
# trailing zero after the point (p50, not p50.0), so a statistic has one name.
_PERCENTILE_WORD = re.compile(r"^p(?:0|[1-9][0-9]?)(?:\.[0-9]*[1-9])?$")
_PERCENTILE_HINT = "a percentile is pN or pN.M with 0 < N < 100 (p75, p99.9, p99.99)"
_PATTERN = re.compile(  # "+" and "-" in the name only so that "ttft.p-1" is named as the bad word
    r"^\s*(?P<lhs>[A-Za-z_][\w.+\-\[\]]*)\s*(?P<op><=|>=|<|>|==|=|!=)\s*"
    r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>\S*(?:\s*/\s*s)?)\s*$"
)


@dataclass(frozen=True)
class Slo:
    """One parsed objective; ``target`` is in ``unit`` (ms, fraction, req/s or tok/s)."""

    expr: str
    metric: str
    stat: str | None
    op: str
    target: float
    unit: str
    # a percentile verdict's confidence (llm_slo(..., confidence=)); None: --llm-confidence
    confidence: float | None = None
    # llm_slo(..., per_model=True): also judged on each served model's requests
    per_model: bool = False
    # turns[11-20].ttft.p90: judged on the requests of that turn band only (None: all)
    turn_band: str | None = None

    @property
    def is_latency(self) -> bool:
        return self.stat is not None

    @property
    def is_server(self) -> bool:
        """A metric of the server's own (``server.queue_time.p99``), judged on its scrapes
        (not a process metric such as ``server.rss_max_mb``: :attr:`is_process`)."""
        return self.metric.startswith("server.") and not self.is_process

    @property
    def is_process(self) -> bool:
        """A metric of the server process the gate started (``startup.ready_s``,
        ``server.rss_max_mb``), judged on the run's ``server_process`` block."""
        return self.metric in PROCESS_METRICS

    @property
    def is_gpu(self) -> bool:
        """A figure of the GPUs over the run (``gpu.power_w.mean``,
        ``energy_per_output_token_j``), judged on the run's ``gpu`` block."""
        return self.metric in GPU_METRICS

    @property
    def is_conversation(self) -> bool:
        """A metric of whole conversations (``conversation.makespan.p90``), judged on the
        run's per-conversation figures, not its requests."""
        return self.metric.startswith("conversation.")

    @property
    def is_replica(self) -> bool:
        """A client metric judged on each replica's own requests (``replica.ttft.p99``)."""
        return self.metric.startswith(REPLICA_SCOPE + ".")

    @property
    def is_fleet(self) -> bool:
        """A fleet-wide figure (``fleet.imbalance``, ``fleet.prefix_hit_rate``)."""
        return self.metric in FLEET_METRICS

    @property
    def pool(self) -> str | None:
        """The pool a ``<pool>.<name>`` SLO judges (``prefill``, ``decode``, ``router``),
        None for any other."""
        head = self.metric.partition(".")[0]
        return head if head in POOL_SCOPES else None

    @property
    def in_fleet_scope(self) -> bool:
        """Judged on a part of a fleet or the fleet's spread (``replica.*``, ``fleet.*``,
        ``<pool>.*``), not on the run's requests or the server as one."""
        return self.is_replica or self.is_fleet or self.pool is not None

    @property
    def plain_metric(self) -> str:
        """The metric without its fleet scope: ``replica.ttft`` -> ``ttft``,
        ``decode.kv_cache_usage`` -> ``server.kv_cache_usage``; any other as it is."""
        if self.is_replica:
            return self.metric.partition(".")[2]
        if self.pool is not None:
            return "server." + self.metric.partition(".")[2]
        return self.metric

    @property
    def name(self) -> str:
        name = f"{self.metric}.{self.stat}" if self.stat else self.metric
        return f"turns[{self.turn_band}].{name}" if self.turn_band is not None else name

    def holds(self, observed: float) -> bool:
        return _OPS[self.op](observed, self.target)

    @property
    def percentile(self) -> float | None:
        """The percentile this SLO reads (``p99`` -> 99.0), or None for mean/max/rates."""
        return percentile_of(self.stat) if self.stat else None


def confidence_problem(value: object) -> str | None:
    """Why ``value`` is not a confidence level (a number with 0.5 < c < 1), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number strictly between 0.5 and 1 (e.g. 0.99), got {value!r}"
    if not 0.5 < float(value) < 1:  # NaN fails this too
        return f"must be strictly between 0.5 and 1 (e.g. 0.99), got {value!r}"
    return None


def percentile_of(stat: str) -> float | None:
    """The percentile a statistic names (``p75`` -> 75.0, ``p99.99`` -> 99.99), None for
    ``mean``/``max``/``min``; ValueError for anything else (:func:`stat_problem` says why)."""
    if stat in ("mean", "max", "min"):
        return None
    problem = stat_problem(stat)
    if problem:
        raise ValueError(problem)
    return float(stat[1:])


def stat_problem(stat: str) -> str | None:
    """Why ``stat`` is not a statistic an SLO may name, or None when it is.

    Any percentile ``pN`` / ``pN.M`` with 0 < N < 100 is one (judged nearest rank on
    the HDR histograms like the standard ones), as are ``mean`` and ``max``.
    """
    if stat in STATS:
        return None
    if _PERCENTILE_WORD.match(stat) and 0 < float(stat[1:]) < 100:
        return None
    hint = f"{_PERCENTILE_HINT}; or mean, max"
    m = re.fullmatch(r"p0*([0-9]+)(?:(\.[0-9]*?)0*)?", stat)
    if m and 0 < float(stat[1:]) < 100:  # a valid number written another way
        return f"unknown statistic {stat!r}: write it {'p' + m[1] + (m[2] or '').rstrip('.')!r}"
    return f"unknown statistic {stat!r}: {hint}"


def parse_slo(expr: str) -> Slo:
    """Parse one expression; the error names the bad word and lists the valid ones."""
    if not isinstance(expr, str):
        raise LlmPerfUsageError(f"SLO must be a string like 'ttft.p99 < 500ms', got {expr!r}")
    m = _PATTERN.match(expr)
    if not m:
        raise LlmPerfUsageError(
            f"malformed SLO {expr!r}: expected '<metric>.<stat> <op> <value><unit>', "
            "e.g. 'ttft.p99 < 500ms' or 'error_rate < 1%'"
        )
    lhs, op, value, unit = m["lhs"], m["op"], float(m["value"]), re.sub(r"\s+", "", m["unit"])
    if op not in _OPS:
        raise LlmPerfUsageError(f"SLO {expr!r}: operator {op!r} is not one of < <= > >= ==")
    if lhs.partition(".")[0] == "startup" or _process_name(lhs) in PROCESS_METRICS:
        return _process_slo(expr, lhs, op, value, unit)
    if lhs.partition(".")[0] == "gpu" or _gpu_name(lhs) in GPU_METRICS:
        return _gpu_slo(expr, lhs, op, value, unit)
    if lhs.startswith("server.") or lhs == "server":
        return _server_slo(expr, lhs, op, value, unit)
    if lhs.startswith("turns"):
        return _band_slo(expr, lhs, op, value, unit)
    scope = lhs.partition(".")[0]
    if scope == REPLICA_SCOPE:
        return _replica_slo(expr, lhs, op, value, unit)
    if scope == "fleet":
        return _fleet_slo(expr, lhs, op, value, unit)
    if scope in POOL_SCOPES:
        return _pool_slo(expr, lhs, op, value, unit)
    if scope == "kv_transfer":
        return _kv_transfer_slo(expr, lhs, op, value, unit)
    if lhs.partition(".")[0] == "conversation":
        return _conversation_slo(expr, lhs, op, value, unit)
    if "[" in lhs or "]" in lhs:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: a band is written before the metric, e.g. 'turns[11-20].ttft.p90 "
            f"< 2s' (bands: {', '.join(TURN_BANDS)})"
        )
    metric, _, stat = lhs.partition(".")
    if metric in RATE_SLO_METRICS:
        if stat:
            raise LlmPerfUsageError(
                f"SLO {expr!r}: {metric!r} is a rate and takes no statistic (got {stat!r})"
            )
        canonical, units = RATE_SLO_METRICS[metric]
        if unit not in units:
            accepted = ", ".join(repr(u) for u in units if u)
            raise LlmPerfUsageError(
                f"SLO {expr!r}: bad unit {unit!r} for {metric}; use {accepted} or no unit"
            )
        return Slo(expr, metric, None, op, value * units[unit], canonical)
    if metric not in LATENCY_SLO_METRICS:
        known = ", ".join(
            (
                *LATENCY_SLO_METRICS,
                *RATE_SLO_METRICS,
                *CONVERSATION_LATENCY_METRICS,
                *CONVERSATION_RATE_METRICS,
                "turns[<band>].<metric>",
                "server.<name>",
                "startup.<name>",
                *GPU_METRICS,
                "replica.<metric>",
                *FLEET_METRICS,
                *(f"{pool}.<name>" for pool in POOL_SCOPES),
                "kv_transfer.<stat>",
            )
        )
        raise LlmPerfUsageError(f"SLO {expr!r}: unknown metric {metric!r}; known: {known}")
    return _latency_slo(expr, metric, stat, op, value, unit, example="p99")


_FRACTION_UNITS = {"%": 0.01, "": 1.0}
_BAND = re.compile(r"^turns\[(?P<band>[^\]]*)\]\.(?P<rest>.*)$")


def _band_slo(expr: str, lhs: str, op: str, value: float, unit: str) -> Slo:
    """``turns[11-20].ttft.p90 < 2s``: a per-request latency over one turn band's requests
    (the band's own confidence bounds and sample minimum)."""
    m = _BAND.match(lhs)
    example = "e.g. 'turns[11-20].ttft.p90 < 2s'"
    if not m:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: a turn band is written turns[<band>].<metric>.<stat>, {example}"
        )
    band, rest = m["band"], m["rest"]
    if band not in TURN_BANDS:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: unknown turn band {band!r}; bands: {', '.join(TURN_BANDS)}"
        )
    metric = rest.partition(".")[0]
    if metric not in BAND_SLO_METRICS:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: {metric!r} has no turn-band form; per band: "
            f"{', '.join(BAND_SLO_METRICS)} ({example})"
        )
    inner_expr = f"{rest} {op} {value!r}{unit}"
    try:
        inner = parse_slo(inner_expr)
    except LlmPerfUsageError as exc:  # said of the expression as written
        raise LlmPerfUsageError(str(exc).replace(repr(inner_expr), repr(expr), 1)) from None
    return Slo(expr, inner.metric, inner.stat, op, inner.target, inner.unit, turn_band=band)


_RATIO_UNITS = {"": 1.0, "x": 1.0}


def _inner(expr: str, inner_expr: str) -> Slo:
    """``inner_expr`` parsed, its errors said of ``expr`` as written."""
    try:
        return parse_slo(inner_expr)
    except LlmPerfUsageError as exc:
        raise LlmPerfUsageError(str(exc).replace(repr(inner_expr), repr(expr), 1)) from None


def _replica_slo(expr: str, lhs: str, op: str, value: float, unit: str) -> Slo:
    """``replica.ttft.p99 < 500ms``, ``replica.error_rate < 1%``: a client metric judged on
    each replica's own requests (the same units and statistics as the plain one)."""
    rest = lhs.partition(".")[2]
    metric = rest.partition(".")[0]
    if metric not in REPLICA_SLO_METRICS:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: {metric or lhs!r} has no per-replica form; replica.<metric> takes "
            f"{', '.join(REPLICA_SLO_METRICS)} (e.g. 'replica.ttft.p99 < 500ms'; a pool's "
            f"server metrics: {', '.join(f'{p}.<name>' for p in POOL_SCOPES)})"
        )
    inner = _inner(expr, f"{rest} {op} {value!r}{unit}")
    return Slo(expr, f"{REPLICA_SCOPE}.{inner.metric}", inner.stat, op, inner.target, inner.unit)


def _fleet_slo(expr: str, lhs: str, op: str, value: float, unit: str) -> Slo:
    """``fleet.imbalance < 1.5`` (max over mean; no unit or ``x``), ``fleet.busy_imbalance``
    alike, ``fleet.prefix_hit_rate > 40%`` (a fraction): one value per run, no statistic."""
    parts = lhs.split(".")
    metric = ".".join(parts[:2])
    entry = FLEET_METRICS.get(metric)
    if entry is None:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: unknown fleet metric {metric!r}; known: {', '.join(FLEET_METRICS)}"
        )
    stat = ".".join(parts[2:])
    if stat:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: {metric!r} is one value per run and takes no statistic (got {stat!r})"
        )
    kind = entry[1]
    units = _FRACTION_UNITS if kind == "fraction" else _RATIO_UNITS
    if unit not in units:
        accepted = "'%' or no unit" if kind == "fraction" else "'x' or no unit"
        raise LlmPerfUsageError(
            f"SLO {expr!r}: bad unit {unit!r} for {metric} (a {kind}); use {accepted}"
        )
    return Slo(expr, metric, None, op, value * units[unit], kind)


def _pool_slo(expr: str, lhs: str, op: str, value: float, unit: str) -> Slo:
    """``prefill.queue_time.p99 < 200ms``, ``decode.kv_usage.max < 90%``: a common server
    metric (without its ``server.``) over the pages of one pool, with the statistics and
    units of the ``server.*`` one."""
    pool, _, rest = lhs.partition(".")
    base, dot, stat = rest.partition(".")
    base = SERVER_ALIASES.get(base, base)
    if f"server.{base}" not in COMMON_METRICS:
        names = (n.removeprefix("server.") for n in COMMON_METRICS)
        raise LlmPerfUsageError(
            f"SLO {expr!r}: unknown server metric {rest.partition('.')[0]!r} for pool {pool!r}; "
            f"known: {', '.join((*names, *SERVER_ALIASES))} (e.g. '{pool}.queue_time.p99 "
            "< 200ms')"
        )
    inner = _inner(expr, f"server.{base}{dot}{stat} {op} {value!r}{unit}")
    return Slo(expr, f"{pool}.{base}", inner.stat, op, inner.target, inner.unit)


def _kv_transfer_slo(expr: str, lhs: str, op: str, value: float, unit: str) -> Slo:
    """``kv_transfer.p99 < 50ms``: the fleet's ``server.kv_transfer`` histogram."""
    stat = lhs.partition(".")[2]
    inner = _inner(expr, f"{KV_TRANSFER}{'.' if stat else ''}{stat} {op} {value!r}{unit}")
    return replace(inner, expr=expr)


def _conversation_slo(expr: str, lhs: str, op: str, value: float, unit: str) -> Slo:
    """``conversation.makespan_excl_tools.p90 < 60s`` (a latency of whole conversations) or
    ``conversation.same_replica_rate > 90%`` (a share)."""
    parts = lhs.split(".")
    metric = ".".join(parts[:2])
    stat = ".".join(parts[2:])
    if metric in CONVERSATION_RATE_METRICS:
        if stat:
            raise LlmPerfUsageError(
                f"SLO {expr!r}: {metric!r} is a share and takes no statistic (got {stat!r})"
            )
        if unit not in _FRACTION_UNITS:
            raise LlmPerfUsageError(
                f"SLO {expr!r}: bad unit {unit!r} for {metric} (a fraction); use '%' or no unit"
            )
        return Slo(expr, metric, None, op, value * _FRACTION_UNITS[unit], "fraction")
    if metric not in CONVERSATION_LATENCY_METRICS:
        known = ", ".join((*CONVERSATION_LATENCY_METRICS, *CONVERSATION_RATE_METRICS))
        raise LlmPerfUsageError(
            f"SLO {expr!r}: unknown conversation metric {metric!r}; known: {known}"
        )
    return _latency_slo(expr, metric, stat, op, value, unit, example="p90")


def _latency_slo(
    expr: str, metric: str, stat: str, op: str, value: float, unit: str, *, example: str
) -> Slo:
    """A latency SLO once its metric is known: a statistic and a time unit are required."""
    if not stat:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: {metric!r} needs a statistic, e.g. {metric}.{example} "
            f"({', '.join(STATS)} or any pN.M)"
        )
    problem = stat_problem(stat)
    if problem:
        raise LlmPerfUsageError(f"SLO {expr!r}: {problem}")
    if unit not in _TIME_UNITS:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: bad unit {unit!r} for a latency; use us, ms or s"
            + (" (a unit is required)" if not unit else "")
        )
    return Slo(expr, metric, stat, op, value * _TIME_UNITS[unit], "ms")


def _server_slo(expr: str, lhs: str, op: str, value: float, unit: str) -> Slo:
    """``server.<name>[.<stat>] <op> <value>[unit]``: a metric of the server's own.

    Latency histograms (``server.queue_time``, …) take a statistic like a client
    latency and a time unit; gauges (``server.kv_cache_usage``, ``server.running``)
    take ``max``, ``mean`` or ``min``; counters and ratios (``server.preemptions``,
    ``server.prefix_cache_hit_rate``) take none. Fractions accept ``%``.
    """
    base, _, stat = lhs[len("server.") :].partition(".")
    metric = f"server.{base}"
    entry = COMMON_METRICS.get(metric)
    if entry is None:
        process = (n for n in PROCESS_METRICS if n.startswith("server."))
        known = ", ".join((*COMMON_METRICS, *process))
        raise LlmPerfUsageError(f"SLO {expr!r}: unknown server metric {metric!r}; known: {known}")
    kind, unit_kind = entry
    if kind is MetricKind.VALUE:
        if stat:
            raise LlmPerfUsageError(
                f"SLO {expr!r}: {metric!r} is a count or ratio over the run and takes "
                f"no statistic (got {stat!r})"
            )
    elif not stat:
        example = f"{metric}.p99" if kind is MetricKind.LATENCY else f"{metric}.max"
        raise LlmPerfUsageError(f"SLO {expr!r}: {metric!r} needs a statistic, e.g. {example}")
    elif kind is MetricKind.GAUGE and stat not in GAUGE_STATS:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: {metric!r} is sampled during the run; its statistics are "
            f"{', '.join(GAUGE_STATS)}, not {stat!r}"
        )
    elif kind is MetricKind.LATENCY:
        problem = stat_problem(stat)
        if problem:
            raise LlmPerfUsageError(f"SLO {expr!r}: {problem}")
    if unit_kind == "ms":
        if unit not in _TIME_UNITS:
            raise LlmPerfUsageError(
                f"SLO {expr!r}: bad unit {unit!r} for a latency; use us, ms or s"
                + (" (a unit is required)" if not unit else "")
            )
        return Slo(expr, metric, stat, op, value * _TIME_UNITS[unit], "ms")
    if unit_kind == "fraction":
        if unit not in _FRACTION_UNITS:
            raise LlmPerfUsageError(
                f"SLO {expr!r}: bad unit {unit!r} for {metric} (a fraction); use '%' or no unit"
            )
        return Slo(expr, metric, stat or None, op, value * _FRACTION_UNITS[unit], "fraction")
    if unit:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: {metric} is a count and takes no unit, got {unit!r}"
        )
    return Slo(expr, metric, stat or None, op, value, "count")


def _process_name(lhs: str) -> str:
    """``server.rss_max_mb.max`` -> ``server.rss_max_mb``: the metric a process SLO names
    (its first two words), so that a statistic after it is named as the mistake."""
    return ".".join(lhs.split(".")[:2])


def _process_slo(expr: str, lhs: str, op: str, value: float, unit: str) -> Slo:
    """``startup.ready_s < 90s``, ``server.rss_growth_mb < 50``: one value per run of the
    server process the gate started (:mod:`.process_names`); no statistic."""
    metric = _process_name(lhs)
    entry = PROCESS_METRICS.get(metric)
    if entry is None:
        known = ", ".join(n for n in PROCESS_METRICS if n.startswith("startup."))
        raise LlmPerfUsageError(f"SLO {expr!r}: unknown startup metric {metric!r}; known: {known}")
    stat = lhs[len(metric) + 1 :]
    if stat:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: {metric!r} is one value per run of the server process and takes "
            f"no statistic (got {stat!r}); write e.g. '{metric} < {value:g}{unit}'"
        )
    if unit not in entry.units:
        accepted = ", ".join(repr(u) for u in entry.units if u)
        raise LlmPerfUsageError(
            f"SLO {expr!r}: bad unit {unit!r} for {metric} (in {entry.unit}); use {accepted} "
            "or no unit"
        )
    return Slo(expr, metric, None, op, value * entry.units[unit], entry.unit)


def _gpu_name(lhs: str) -> str:
    """The GPU figure ``lhs`` names, a statistic written after it left out
    (``gpu.util.max`` -> ``gpu.util``, ``energy_per_output_token_j.mean`` -> the name):
    the longest name of :data:`GPU_METRICS` that ``lhs`` starts with, else ``lhs``."""
    for name in sorted(GPU_METRICS, key=len, reverse=True):
        if lhs == name or lhs.startswith(name + "."):
            return name
    return lhs


def _gpu_slo(expr: str, lhs: str, op: str, value: float, unit: str) -> Slo:
    """``gpu.power_w.mean < 300W``, ``energy_per_output_token_j < 0.5J``: one value per run
    of the GPUs (:mod:`.gpu_names`); no statistic; the units of the name's entry."""
    metric = _gpu_name(lhs)
    entry = GPU_METRICS.get(metric)
    if entry is None:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: unknown GPU metric {lhs!r}; known: {', '.join(GPU_METRICS)}"
        )
    stat = lhs[len(metric) + 1 :]
    if stat:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: {metric!r} is one value per run of the GPUs and takes no "
            f"statistic (got {stat!r}); write e.g. '{metric} {op} {value:g}{unit}' "
            f"(GPU metrics: {', '.join(GPU_METRICS)})"
        )
    if unit not in entry.units:
        accepted = ", ".join(repr(u) for u in entry.units if u)
        raise LlmPerfUsageError(
            f"SLO {expr!r}: bad unit {unit!r} for {metric} (in {entry.unit}); use {accepted} "
            "or no unit"
        )
    return Slo(expr, metric, None, op, value * entry.units[unit], entry.unit)


def request_limits(slos: Iterable[Slo]) -> dict[str, float]:
    """Per-request limits (ms) implied by upper-bound latency SLOs, for goodput.

    ``ttft.p99 < 500ms`` means each request should see TTFT under 500 ms;
    the tightest bound per metric wins. ITL has no per-request form (a
    request's TPOT stands for it), so only ttft, ttfo, tpot and e2e count.
    """
    limits: dict[str, float] = {}
    for slo in slos:
        # a turn band's limit is about some of the requests, not each of them
        if slo.metric in GOODPUT_METRICS and slo.op in ("<", "<=") and slo.turn_band is None:
            limits[slo.metric] = min(limits.get(slo.metric, math.inf), slo.target)
    return limits
