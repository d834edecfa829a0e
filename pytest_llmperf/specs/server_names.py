"""The common names of a server's own metrics (``server.ttft``, ``server.preemptions``, …).

Here, in the low package, because the SLO grammar (:mod:`.slo`) must know them
to parse ``server.queue_time.p99 < 50ms`` at collection, and the layer that
scrapes and maps them (:mod:`pytest_llmperf.server_metrics`) imports them from
here: one table, read by both.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["COMMON_METRICS", "GAUGE_STATS", "LATENCY_STATS", "MetricKind", "metric_kind"]


class MetricKind(StrEnum):
    """How a server metric is summarised over a run, and which statistics it has."""

    LATENCY = "latency"  # a histogram: the run's bucket deltas -> p50 … max, mean, count (ms)
    GAUGE = "gauge"  # sampled during the run -> max, mean, min
    VALUE = "value"  # a counter delta or a ratio of two -> value


# The common names, their kind and unit ("ms", "fraction", "count").
COMMON_METRICS: dict[str, tuple[MetricKind, str]] = {
    "server.queue_time": (MetricKind.LATENCY, "ms"),
    "server.prefill_time": (MetricKind.LATENCY, "ms"),
    "server.decode_time": (MetricKind.LATENCY, "ms"),
    "server.ttft": (MetricKind.LATENCY, "ms"),
    "server.itl": (MetricKind.LATENCY, "ms"),
    "server.e2e": (MetricKind.LATENCY, "ms"),
    # the KV cache's move from a prefill to a decode engine (disaggregated serving)
    "server.kv_transfer": (MetricKind.LATENCY, "ms"),
    "server.kv_cache_usage": (MetricKind.GAUGE, "fraction"),
    "server.running": (MetricKind.GAUGE, "count"),
    "server.waiting": (MetricKind.GAUGE, "count"),
    "server.preemptions": (MetricKind.VALUE, "count"),
    "server.prefix_cache_hit_rate": (MetricKind.VALUE, "fraction"),
    "server.spec_decode_acceptance": (MetricKind.VALUE, "fraction"),
    "server.requests": (MetricKind.VALUE, "count"),
    "server.prompt_tokens": (MetricKind.VALUE, "count"),
    "server.generation_tokens": (MetricKind.VALUE, "count"),
}
# The statistics of a LATENCY metric in a summary (plus "count", the run's observations, and
# "bucket_ms", the width of the bucket the p50 fell in: a percentile from buckets is known
# only to within its bucket, reported at the bucket's upper bound). An SLO may name any pN.
LATENCY_STATS = ("p50", "p90", "p95", "p99", "p99.9", "mean", "max")
GAUGE_STATS = ("max", "mean", "min")


def metric_kind(name: str) -> MetricKind | None:
    """The kind of a common ``server.*`` name, None for a name the mapping does not have."""
    entry = COMMON_METRICS.get(name)
    return entry[0] if entry else None
