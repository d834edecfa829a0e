"""``GET /metrics`` in the Prometheus text format, with vLLM's metric names.

Dashboards and scrapers written for vLLM (``vllm:num_requests_running``,
``vllm:kv_cache_usage_perc``, the TTFT/ITL histograms, ...) work unchanged
against the simulator, and the plugin can cross-check its client-side
measurements with the server's own view (:mod:`pytest_llmperf.server_metrics`).

The page is written as vLLM's ``prometheus_client`` writes it (a counter's
``# TYPE`` line names it with ``_total``), with what the simulator honestly
knows: the engine's gauges (running, waiting, KV-cache usage), its counters
(preemptions, prefix-cache queries and hits, tokens, finished requests) and
per-request histograms. The request phase histograms (queue, prefill, decode)
come from the back end's own times of each finished request
(:meth:`~.streams.TokenStream.served_times`, the engine's clock as vLLM's
engine core stamps it), the TTFT, ITL and end-to-end ones from the front end's
writes. vLLM's default buckets for the phase histograms start at 300 ms, too
coarse for the simulator's millisecond phases; they use vLLM's TTFT buckets
instead, as a vLLM started with ``--custom-histogram-buckets
'{"request_latency": [0.001, 0.005, ...]}'`` would. Two series say which server this is:
``process_start_time_seconds`` (when this simulator started, as every
``prometheus_client`` process exports it) and ``llmperf_sim_info``, the
simulator's identity gauge.

A simulator of several engines (replicas, or disaggregated prefill and decode pools)
also serves each engine's own page (pages.py): the same names, one process's view
each — its own counters, gauges and histograms, a start time of its own and its
index as the ``engine`` label, with ``role`` and ``name`` on ``llmperf_sim_info`` — so
a reader that scrapes two of them sees two processes. A decode engine's page adds
the KV transfer histogram in vLLM's NIXL connector's name
(``vllm:nixl_xfer_time_seconds``, buckets from 1 ms).
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field

from .streams import BackendStats, ServedTimes

__all__ = [
    "ITL_BUCKETS",
    "KV_TRANSFER_BUCKETS",
    "KV_TRANSFER_METRIC",
    "PHASE_BUCKETS",
    "SIM_INFO",
    "TTFT_BUCKETS",
    "Histogram",
    "ServerCounters",
    "render_metrics",
    "render_replicas",
]

SIM_INFO = "llmperf_sim_info"  # the simulator's identity (its page is vLLM's otherwise)

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

    def add(self, other: Histogram) -> None:
        """Add ``other``'s observations (same buckets): two processes' histograms as one."""
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.total += other.total
        self.count += other.count


# The request phase histograms (queue, prefill, decode, end to end): vLLM's TTFT buckets
# (its request_latency default starts at 0.3 s; see the module's docstring).
PHASE_BUCKETS = TTFT_BUCKETS
# KV transfer (a decode engine's pull of the prompt's blocks): vLLM's NIXL connector's name;
# its buckets start at 5 ms, these at 1 ms, fine enough to check that transfer + queue +
# engine time add up to TTFT within the bucket bounds (helper facts: nixl_connector.py)
KV_TRANSFER_METRIC = "vllm:nixl_xfer_time_seconds"
KV_TRANSFER_BUCKETS = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    5.0,
)


@dataclass
class ServerCounters:
    """What the HTTP front end counts itself (and when this simulator started)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    success: dict[str, int] = field(default_factory=dict)  # finish_reason -> count
    errors: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    queue: Histogram = field(default_factory=lambda: Histogram(PHASE_BUCKETS))
    prefill: Histogram = field(default_factory=lambda: Histogram(PHASE_BUCKETS))
    decode: Histogram = field(default_factory=lambda: Histogram(PHASE_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(PHASE_BUCKETS))
    started: float = field(default_factory=time.time)  # process_start_time_seconds
    kv_transfer: Histogram | None = None  # a decode engine's page only

    def prefilled(self, times: ServedTimes | None) -> None:
        """A disaggregated prefill engine ran a request's prompt (its one token, as vLLM's
        prefill instance runs it with ``max_tokens=1``): count it, observe its queue and
        prefill times; the answer's own histograms are the decode engine's (disagg.py)."""
        self.generation_tokens += 1
        self.success["length"] = self.success.get("length", 0) + 1
        if times is not None:
            self.queue.observe(max(0.0, times.scheduled - times.queued))
            self.prefill.observe(max(0.0, times.first_token - times.scheduled))

    @classmethod
    def merged(cls, parts: list[ServerCounters], whole: ServerCounters) -> ServerCounters:
        """``parts`` (each engine's page) summed as one page, with ``whole``'s start time and
        errors (the front end's own): the simulator's ``/metrics`` over several engines."""
        out = cls(started=whole.started, errors=whole.errors)
        for part in parts:
            out.prompt_tokens += part.prompt_tokens
            out.generation_tokens += part.generation_tokens
            for reason, n in part.success.items():
                out.success[reason] = out.success.get(reason, 0) + n
            for name in ("ttft", "itl", "queue", "prefill", "decode", "e2e"):
                getattr(out, name).add(getattr(part, name))
            if part.kv_transfer is not None:
                if out.kv_transfer is None:
                    out.kv_transfer = Histogram(KV_TRANSFER_BUCKETS)
                out.kv_transfer.add(part.kv_transfer)
        return out

    def finished(self, finish: str, n_out: int, times: ServedTimes | None, e2e_s: float) -> None:
        """A request completed with ``n_out`` tokens: count it, and observe its phases as
        vLLM does for a finished request (queued -> scheduled -> first -> last token, from
        the back end's ``times``; ``e2e_s`` from the front end's arrival to its last write)."""
        self.generation_tokens += n_out
        self.success[finish] = self.success.get(finish, 0) + 1
        self.e2e.observe(max(0.0, e2e_s))
        if times is not None:
            self.queue.observe(max(0.0, times.scheduled - times.queued))
            self.prefill.observe(max(0.0, times.first_token - times.scheduled))
            self.decode.observe(max(0.0, times.last_token - times.first_token))


def render_metrics(
    model: str,
    stats: BackendStats,
    counters: ServerCounters,
    engine: str = "0",
    page: tuple[str, str] | None = None,
) -> str:
    """The full exposition text; ``engine`` is the ``engine`` label, ``page`` the ``(role,
    name)`` of one engine's own page (on ``llmperf_sim_info``), None for the simulator's."""
    labels = f'engine="{engine}",model_name="{model}"'
    lines: list[str] = []

    def metric(name: str, kind: str, help_: str, value: float) -> None:
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} {kind}")
        lines.append(f"{name}{{{labels}}} {float(value)}")

    lines.append("# HELP process_start_time_seconds Start time of the process since unix epoch.")
    lines.append("# TYPE process_start_time_seconds gauge")
    lines.append(f"process_start_time_seconds {counters.started}")
    if page is None:
        metric(SIM_INFO, "gauge", "The pytest-llmperf simulator (vLLM's metric names).", 1)
    else:
        role, name = page
        lines.append(f"# HELP {SIM_INFO} The pytest-llmperf simulator (vLLM's metric names).")
        lines.append(f"# TYPE {SIM_INFO} gauge")
        lines.append(f'{SIM_INFO}{{{labels},role="{role}",name="{name}"}} 1.0')

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
    )
    metric(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        counters.prompt_tokens,
    )
    metric(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        counters.generation_tokens,
    )
    metric(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        stats.prefix_query_tokens,
    )
    metric(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        stats.prefix_hit_tokens,
    )
    lines.append("# HELP vllm:request_success_total Count of successfully processed requests.")
    lines.append("# TYPE vllm:request_success_total counter")
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
        (
            "vllm:e2e_request_latency_seconds",
            counters.e2e,
            "Histogram of e2e request latency in seconds.",
        ),
        (
            "vllm:request_queue_time_seconds",
            counters.queue,
            "Histogram of time spent in WAITING phase for request.",
        ),
        (
            "vllm:request_prefill_time_seconds",
            counters.prefill,
            "Histogram of time spent in PREFILL phase for request.",
        ),
        (
            "vllm:request_decode_time_seconds",
            counters.decode,
            "Histogram of time spent in DECODE phase for request.",
        ),
    ):
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} histogram")
        lines.extend(hist.lines(name, labels))
    if counters.kv_transfer is not None:
        lines.append(
            f"# HELP {KV_TRANSFER_METRIC} Histogram of transfer duration for NIXL KV Cache "
            "transfers."
        )
        lines.append(f"# TYPE {KV_TRANSFER_METRIC} histogram")
        lines.extend(counters.kv_transfer.lines(KV_TRANSFER_METRIC, labels))
    return "\n".join(lines) + "\n"


# The simulator's own per-replica series (several replicas): vLLM's names above stay the
# sum over the replicas, one process's view, which the plugin's reader expects of a page.
REPLICA_SERIES = (
    ("llmperf_sim_replica_requests", "Requests the router sent to the replica."),
    ("llmperf_sim_replica_prefix_cache_queries", "The replica's prefix-cache queries (tokens)."),
    ("llmperf_sim_replica_prefix_cache_hits", "The replica's prefix-cache hits (tokens)."),
)


def render_replicas(each: list[BackendStats], routed: list[int], names: list[str]) -> str:
    """The per-replica counters of a multi-engine simulator (label ``replica="<name>"``)."""
    lines: list[str] = []
    columns = (
        routed,
        [s.prefix_query_tokens for s in each],
        [s.prefix_hit_tokens for s in each],
    )
    for (name, help_), values in zip(REPLICA_SERIES, columns, strict=True):
        lines.append(f"# HELP {name}_total {help_}")
        lines.append(f"# TYPE {name}_total counter")
        for replica, value in zip(names, values, strict=True):
            lines.append(f'{name}_total{{replica="{replica}"}} {float(value)}')
    return "\n".join(lines) + "\n"
