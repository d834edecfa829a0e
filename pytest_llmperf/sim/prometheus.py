"""``GET /metrics`` in the Prometheus text format, with vLLM's metric names.

Dashboards and scrapers written for vLLM (``vllm:num_requests_running``,
``vllm:kv_cache_usage_perc``, the TTFT/ITL histograms, ...) work unchanged
against the simulator, and the plugin can cross-check its client-side
measurements with the server's own view.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from .streams import BackendStats

__all__ = ["ITL_BUCKETS", "TTFT_BUCKETS", "Histogram", "ServerCounters", "render_metrics"]

# vLLM's bucket boundaries (seconds).
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)


@dataclass
class Histogram:
    """A cumulative-bucket histogram as Prometheus exposes it."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out = []
        cum = 0
        for le, c in zip(self.buckets, self.counts, strict=False):
            cum += c
            out.append(f'{name}_bucket{{{labels},le="{le}"}} {float(cum)}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(self.count)}')
        out.append(f"{name}_count{{{labels}}} {float(self.count)}")
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        return out


@dataclass
class ServerCounters:
    """What the HTTP front end counts itself."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    success: dict[str, int] = field(default_factory=dict)  # finish_reason -> count
    errors: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))


def render_metrics(model: str, stats: BackendStats, counters: ServerCounters) -> str:
    """The full exposition text."""
    labels = f'engine="0",model_name="{model}"'
    lines: list[str] = []

    def metric(name: str, kind: str, help_: str, value: float, base: str | None = None) -> None:
        lines.append(f"# HELP {base or name} {help_}")
        lines.append(f"# TYPE {base or name} {kind}")
        lines.append(f"{name}{{{labels}}} {float(value)}")

    metric(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        stats.running,
    )
    metric(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        stats.waiting,
    )
    metric(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        stats.kv_usage,
    )
    metric(
        "vllm:num_preemptions_total",
        "counter",
        "Cumulative number of preemption from the engine.",
        stats.preemptions,
        "vllm:num_preemptions",
    )
    metric(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        counters.prompt_tokens,
        "vllm:prompt_tokens",
    )
    metric(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        counters.generation_tokens,
        "vllm:generation_tokens",
    )
    metric(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        stats.prefix_query_tokens,
        "vllm:prefix_cache_queries",
    )
    metric(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        stats.prefix_hit_tokens,
        "vllm:prefix_cache_hits",
    )
    lines.append("# HELP vllm:request_success Count of successfully processed requests.")
    lines.append("# TYPE vllm:request_success counter")
    for reason in ("length", "stop"):
        lines.append(
            f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} '
            f"{float(counters.success.get(reason, 0))}"
        )
    for name, hist, help_ in (
        (
            "vllm:time_to_first_token_seconds",
            counters.ttft,
            "Histogram of time to first token in seconds.",
        ),
        (
            "vllm:inter_token_latency_seconds",
            counters.itl,
            "Histogram of inter-token latency in seconds.",
        ),
    ):
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} histogram")
        lines.extend(hist.lines(name, labels))
    return "\n".join(lines) + "\n"
