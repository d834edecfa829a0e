"""The server's own view of one run, as verdicts and reports read it.

A :class:`ServerMetrics` is what the run's scrapes of the server's Prometheus
``/metrics`` (or, where it has none, the timings the server returned with each
response) say about the run's window: latency histograms as the run's own
bucket deltas, gauges as min/mean/max of their samples, counters as the run's
deltas. Names are the common ``server.*`` names of :data:`COMMON_METRICS`
whatever the server family; a family the mapping does not know keeps its own
metric names in ``raw``. ``missing`` says why there is nothing (never a reason
to fail or slow the run): an SLO on a missing metric is inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pytest_llmperf.specs.server_names import (
    COMMON_METRICS,
    GAUGE_STATS,
    LATENCY_STATS,
    MetricKind,
    metric_kind,
)

__all__ = [
    "COMMON_METRICS",
    "GAUGE_STATS",
    "LATENCY_STATS",
    "MetricKind",
    "ServerFamily",
    "ServerMetrics",
    "metric_kind",
    "run_metrics_with_server",
    "with_response_timings",
]


class ServerFamily(StrEnum):
    """Which server's metric names a ``/metrics`` page uses."""

    VLLM = "vllm"
    SGLANG = "sglang"
    LLAMACPP = "llama.cpp"
    TGI = "tgi"
    SIM = "sim"  # the embedded simulator (vLLM's names, plus its own identity)
    UNKNOWN = "unknown"


@dataclass
class ServerMetrics:
    """The server's metrics over one run (or one stage of it).

    ``source``: the ``/metrics`` URL scraped, ``"responses"`` when the numbers
    come from per-request timings in the responses, None when scraping is off.
    ``metrics``: ``{"server.ttft": {"p50": ms, …, "count": n, "bucket_ms": w},
    "server.kv_cache_usage": {"max", "mean", "min"}, "server.preemptions":
    {"value": n}, …}`` (only the names the server has). ``series``: each gauge's
    samples on the run's time axis, ``{"server.kv_cache_usage": [[t_s, v], …]}``
    with ``t_s`` seconds since the run started. ``raw``: an unknown family's
    own metrics (counter deltas and last gauge values by their own names).
    ``missing``: why there are no (or only some) server metrics, None when all
    went well. ``scrapes``: how many scrapes the run's window holds.
    ``buckets``: each LATENCY metric's bucket deltas ``[[upper_ms, count], …]``
    (ascending; the JSON writes the open top bucket's bound as null), from which any
    percentile an SLO names is read (:meth:`percentile`).
    ``notes``: what a reader should know about numbers that are there (a
    percentile beyond the last finite bucket, a window without prefix-cache
    lookups, scrapes that failed mid-run while the boundary ones succeeded).
    ``parts``: not in the JSON; what a fleet's pages add up (a ratio's numerator and
    denominator, a histogram's exact sum and count).
    """

    source: str | None
    family: ServerFamily = ServerFamily.UNKNOWN
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    series: dict[str, list[list[float]]] = field(default_factory=dict)
    raw: dict[str, float] = field(default_factory=dict)
    missing: str | None = None
    scrapes: int = 0
    buckets: dict[str, list[list[float]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # what a fleet's merge adds up and a page's JSON does not say (server_metrics/fleet_merge.py):
    # each ratio's (numerator, denominator) and each histogram's (sum in ms, count)
    parts: dict[str, tuple[float, float]] = field(default_factory=dict, compare=False, repr=False)

    def stat(self, name: str, stat: str | None) -> float | None:
        """``metrics[name][stat]`` (``stat`` None: ``"value"``), None when absent."""
        entry = self.metrics.get(name)
        if entry is None:
            return None
        value = entry.get(stat or "value")
        return None if value is None else float(value)

    def percentile(self, name: str, p: float) -> float | None:
        """Any percentile of a LATENCY metric from its bucket deltas (``buckets[name]``:
        ``[[upper_ms, count], …]`` in ascending order, the last upper bound may be inf):
        the upper bound of the bucket the nearest rank falls in, None when absent."""
        rows = self.buckets.get(name)
        if not rows:
            return None
        total = sum(int(c) for _, c in rows)
        if total <= 0:
            return None
        rank = max(1, math.ceil(p / 100.0 * total))
        seen = 0
        for upper, count in rows:
            seen += int(count)
            if seen >= rank:
                return float(upper)
        return float(rows[-1][0])

    def samples(self, name: str) -> int:
        """Observations behind a LATENCY metric's percentiles (0 when absent)."""
        return int(self.metrics.get(name, {}).get("count", 0))

    def to_dict(self) -> dict[str, Any]:
        """The JSON report's ``runs[].server_metrics``."""
        return {
            "source": self.source,
            "family": self.family.value,
            "metrics": self.metrics,
            "series": self.series,
            "raw": self.raw,
            "missing": self.missing,
            "scrapes": self.scrapes,
            "buckets": {  # strict JSON has no Infinity: the open top bucket's bound is null
                k: [[None if math.isinf(u) else u, c] for u, c in v]
                for k, v in self.buckets.items()
            },
            "notes": self.notes,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerMetrics:
        """Back from :meth:`to_dict` (reports read JSON written by xdist workers)."""
        return cls(
            source=data.get("source"),
            family=ServerFamily(data.get("family") or ServerFamily.UNKNOWN),
            metrics={k: dict(v) for k, v in (data.get("metrics") or {}).items()},
            series={k: [list(p) for p in v] for k, v in (data.get("series") or {}).items()},
            raw=dict(data.get("raw") or {}),
            missing=data.get("missing"),
            scrapes=int(data.get("scrapes") or 0),
            buckets={
                k: [[math.inf if u is None else float(u), c] for u, c in v]
                for k, v in (data.get("buckets") or {}).items()
            },
            notes=[str(n) for n in data.get("notes") or ()],
        )


def with_response_timings(
    scraped: ServerMetrics, from_responses: ServerMetrics | None
) -> ServerMetrics:
    """``scraped`` with the names it lacks filled from the responses' own timings.

    A server without ``/metrics`` (or whose scrapes failed, or that lacks a
    histogram) may still say per request how long it queued and computed
    (vLLM's per-request ``metrics``, llama.cpp's ``timings``): those fill the
    same ``server.*`` names, and ``source`` says where each view came from.
    """
    if from_responses is None or not from_responses.metrics:
        return scraped
    added = {k: v for k, v in from_responses.metrics.items() if k not in scraped.metrics}
    if not added:
        return scraped
    source = f"{scraped.source} + responses" if scraped.metrics else "responses"
    return ServerMetrics(
        source=source,
        family=scraped.family,
        metrics={**scraped.metrics, **added},
        series=scraped.series,
        raw=scraped.raw,
        missing=scraped.missing,
        scrapes=scraped.scrapes,
        buckets={
            **scraped.buckets,
            **{k: v for k, v in from_responses.buckets.items() if k in added},
        },
        notes=scraped.notes,
    )


def run_metrics_with_server(run: Mapping[str, Any]) -> dict[str, Any]:
    """A run's (report dict's) ``metrics`` with its server's ``server.*`` statistics beside
    them, as one mapping: what a history keeps per run, so that ``server.queue_time`` p99
    has a trend and change points like ``ttft`` p99 (``{"server.preemptions": {"value":
    3}}``, ``{"server.queue_time": {"p99": …}}``); no buckets, no series."""
    out = dict(run.get("metrics") or {})
    server = run.get("server_metrics") or {}
    for name, stats in (server.get("metrics") or {}).items():
        out.setdefault(name, dict(stats))
    return out
