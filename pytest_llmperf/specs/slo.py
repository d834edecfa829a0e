"""SLO expressions such as ``"ttft.p99 < 500ms"`` or ``"error_rate < 1%"``.

Grammar: ``<metric>.<stat> <op> <number>[unit]`` for latency metrics and
``<rate-metric> <op> <number>[unit]`` for rates. Values are converted to one
canonical unit per metric kind (milliseconds, fractions, per second) so
comparisons and reports never mix units.

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
from dataclasses import dataclass

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = [
    "GOODPUT_METRICS",
    "LATENCY_SLO_METRICS",
    "RATE_SLO_METRICS",
    "STATS",
    "Slo",
    "parse_slo",
    "request_limits",
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
STATS = ("p50", "p90", "p95", "p99", "p99.9", "mean", "max")
# metric -> (canonical unit, {accepted unit: factor to canonical}); "" = no unit written
RATE_SLO_METRICS: dict[str, tuple[str, dict[str, float]]] = {
    "error_rate": ("fraction", {"%": 0.01, "": 1.0}),
    "goodput": ("fraction", {"%": 0.01, "": 1.0}),
    "request_throughput": ("req/s", {"req/s": 1.0, "": 1.0}),
    "output_throughput": ("tok/s", {"tok/s": 1.0, "": 1.0}),
    "input_throughput": ("tok/s", {"tok/s": 1.0, "": 1.0}),
}
GOODPUT_METRICS = ("ttft", "ttfo", "tpot", "e2e")  # latencies with a per-request form
_TIME_UNITS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3}
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_PATTERN = re.compile(
    r"^\s*(?P<lhs>[A-Za-z_][\w.]*)\s*(?P<op><=|>=|<|>|==|=|!=)\s*"
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

    @property
    def is_latency(self) -> bool:
        return self.stat is not None

    @property
    def name(self) -> str:
        return f"{self.metric}.{self.stat}" if self.stat else self.metric

    def holds(self, observed: float) -> bool:
        return _OPS[self.op](observed, self.target)

    @property
    def percentile(self) -> float | None:
        """The percentile this SLO reads (``p99`` -> 99.0), or None for mean/max/rates."""
        if self.stat and self.stat.startswith("p"):
            return float(self.stat[1:])
        return None


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
        raise LlmPerfUsageError(f"SLO {expr!r}: operator {op!r} is not one of < <= > >=")
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
        known = ", ".join((*LATENCY_SLO_METRICS, *RATE_SLO_METRICS))
        raise LlmPerfUsageError(f"SLO {expr!r}: unknown metric {metric!r}; known: {known}")
    if not stat:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: {metric!r} needs a statistic, e.g. {metric}.p99 ({', '.join(STATS)})"
        )
    if stat not in STATS:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: unknown statistic {stat!r}; use one of {', '.join(STATS)}"
        )
    if unit not in _TIME_UNITS:
        raise LlmPerfUsageError(
            f"SLO {expr!r}: bad unit {unit!r} for a latency; use us, ms or s"
            + (" (a unit is required)" if not unit else "")
        )
    return Slo(expr, metric, stat, op, value * _TIME_UNITS[unit], "ms")


def request_limits(slos: Iterable[Slo]) -> dict[str, float]:
    """Per-request limits (ms) implied by upper-bound latency SLOs, for goodput.

    ``ttft.p99 < 500ms`` means each request should see TTFT under 500 ms;
    the tightest bound per metric wins. ITL has no per-request form (a
    request's TPOT stands for it), so only ttft, ttfo, tpot and e2e count.
    """
    limits: dict[str, float] = {}
    for slo in slos:
        if slo.metric in GOODPUT_METRICS and slo.op in ("<", "<="):
            limits[slo.metric] = min(limits.get(slo.metric, math.inf), slo.target)
    return limits
