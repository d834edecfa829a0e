"""Which server wrote a ``/metrics`` page, and where each common ``server.*`` name comes from.

Each server family names the same facts differently (vLLM's
``vllm:request_queue_time_seconds``, SGLang's ``sglang:queue_time_seconds``,
TGI's ``tgi_request_queue_duration``); the verdicts and reports want one name,
``server.queue_time``. :data:`MAPPINGS` is that translation as a data table, one
row per common name and family, naming the exact metric each number comes
from, so a reader can audit it against the server's source (and
docs/server-metrics.md prints it). The names were read from the servers'
sources: vLLM 0.32 ``vllm/v1/metrics/loggers.py`` and
``vllm/v1/spec_decode/metrics.py`` (the KV transfer: the NIXL connector's
``vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py``); llama.cpp
(commit 0c1e570, the one the conformance tier builds) ``tools/server/server-task.cpp``
(``server_task_result_metrics::to_metrics``); SGLang
``python/sglang/srt/metrics/collector.py``; TGI ``router/src/server.rs`` and
``backends/v3/src``. A name a family does not export is simply absent: an SLO
on it is inconclusive, never a guess.

The family is told by metric-name prefix (:func:`detect_family`). The embedded
simulator uses vLLM's names (dashboards written for vLLM work on it) and says
who it is with its own ``llmperf_sim_info`` gauge.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_llmperf.server_metrics.exposition import Scrape
from pytest_llmperf.server_metrics.summary import COMMON_METRICS, ServerFamily

__all__ = [
    "MAPPINGS",
    "SIM_IDENTITY",
    "Counter",
    "Gauge",
    "GaugeMean",
    "Histogram",
    "HistogramSum",
    "Ratio",
    "Source",
    "detect_family",
    "family_of",
    "mapping_rows",
    "metric_names",
]

SIM_IDENTITY = "llmperf_sim_info"  # the simulator's own gauge: its page is vLLM's otherwise

# Prefixes, most specific first: the simulator's page also has every vllm: name.
_PREFIXES: tuple[tuple[ServerFamily, str], ...] = (
    (ServerFamily.SIM, SIM_IDENTITY),
    (ServerFamily.VLLM, "vllm:"),
    (ServerFamily.SGLANG, "sglang:"),
    (ServerFamily.LLAMACPP, "llamacpp:"),
    (ServerFamily.TGI, "tgi_"),
)


@dataclass(frozen=True, slots=True)
class Histogram:
    """A latency histogram in seconds (``scale`` 1000; 1 for one in ms): the run's bucket
    deltas, reported in ms."""

    metric: str
    scale: float = 1000.0

    def describe(self) -> str:
        unit = "ms" if self.scale == 1.0 else "s → ms"
        return f"histogram `{self.metric}` (bucket deltas, {unit})"


@dataclass(frozen=True, slots=True)
class Gauge:
    """A gauge sampled during the run; over label sets ``"sum"`` (counts) or ``"mean"``
    (a usage fraction per engine, as vLLM's own logger averages it)."""

    metric: str
    combine: str = "sum"

    def describe(self) -> str:
        how = ", mean over engines" if self.combine == "mean" else ""
        return f"gauge `{self.metric}`{how}"


@dataclass(frozen=True, slots=True)
class Counter:
    """The run's delta of counters, summed (label sets with a ``without`` pair left out)."""

    metrics: tuple[str, ...]
    without: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        names = " + ".join(f"`{m}`" for m in self.metrics)
        if self.without:
            names += " without " + ", ".join(f'{k}="{v}"' for k, v in self.without)
        return f"counter delta {names}"


@dataclass(frozen=True, slots=True)
class Ratio:
    """Δ(numerator counters) / Δ(denominator counters) over the run (absent when the
    denominator did not move: no prefix-cache lookups, no draft tokens)."""

    numerator: tuple[str, ...]
    denominator: tuple[str, ...]
    counts: str = "events"  # what the denominator counts, for the note when it did not move

    def describe(self) -> str:
        num = " + ".join(f"`{m}`" for m in self.numerator)
        den = " + ".join(f"`{m}`" for m in self.denominator)
        return f"Δ{num} / Δ({den})" if len(self.denominator) > 1 else f"Δ{num} / Δ{den}"


@dataclass(frozen=True, slots=True)
class HistogramSum:
    """The run's delta of a histogram's ``_sum`` (TGI counts tokens only in histograms)."""

    metric: str

    def describe(self) -> str:
        return f"Δ`{self.metric}_sum` (histogram sum)"


@dataclass(frozen=True, slots=True)
class GaugeMean:
    """The mean of a gauge's samples, used as a value (SGLang exports the acceptance rate
    only as a gauge of its last logging interval, no counters)."""

    metric: str

    def describe(self) -> str:
        return f"mean of gauge `{self.metric}` over the run's samples"


Source = Histogram | Gauge | Counter | Ratio | HistogramSum | GaugeMean

_VLLM: dict[str, tuple[Source, ...]] = {
    "server.queue_time": (Histogram("vllm:request_queue_time_seconds"),),
    "server.prefill_time": (Histogram("vllm:request_prefill_time_seconds"),),
    "server.decode_time": (Histogram("vllm:request_decode_time_seconds"),),
    "server.ttft": (Histogram("vllm:time_to_first_token_seconds"),),
    "server.itl": (Histogram("vllm:inter_token_latency_seconds"),),
    "server.e2e": (Histogram("vllm:e2e_request_latency_seconds"),),
    # the NIXL connector's transfer time (vllm/distributed/kv_transfer/kv_connector/v1/
    # nixl_connector.py, NixlPromMetrics), on the engine that pulls the KV cache (decode)
    "server.kv_transfer": (Histogram("vllm:nixl_xfer_time_seconds"),),
    "server.kv_cache_usage": (Gauge("vllm:kv_cache_usage_perc", "mean"),),
    "server.running": (Gauge("vllm:num_requests_running"),),
    "server.waiting": (Gauge("vllm:num_requests_waiting"),),
    "server.preemptions": (Counter(("vllm:num_preemptions_total",)),),
    "server.prefix_cache_hit_rate": (
        Ratio(
            ("vllm:prefix_cache_hits_total",),
            ("vllm:prefix_cache_queries_total",),
            "prefix-cache lookups",
        ),
    ),
    "server.spec_decode_acceptance": (
        Ratio(
            ("vllm:spec_decode_num_accepted_tokens_total",),
            ("vllm:spec_decode_num_draft_tokens_total",),
            "draft tokens",
        ),
    ),
    # aborted (client went away) and errored requests are not completed ones
    "server.requests": (
        Counter(
            ("vllm:request_success_total",),
            (("finished_reason", "abort"), ("finished_reason", "error")),
        ),
    ),
    "server.prompt_tokens": (Counter(("vllm:prompt_tokens_total",)),),
    "server.generation_tokens": (Counter(("vllm:generation_tokens_total",)),),
}

_SGLANG: dict[str, tuple[Source, ...]] = {
    "server.queue_time": (Histogram("sglang:queue_time_seconds"),),
    "server.ttft": (Histogram("sglang:time_to_first_token_seconds"),),
    "server.itl": (Histogram("sglang:inter_token_latency_seconds"),),
    "server.e2e": (Histogram("sglang:e2e_request_latency_seconds"),),
    # in ms; a histogram in recent releases (earlier ones: a gauge of the last interval,
    # which has no percentiles and is not read)
    "server.kv_transfer": (Histogram("sglang:kv_transfer_latency_ms", scale=1.0),),
    "server.kv_cache_usage": (Gauge("sglang:token_usage", "mean"),),
    "server.running": (Gauge("sglang:num_running_reqs"),),
    "server.waiting": (Gauge("sglang:num_queue_reqs"),),
    # SGLang calls a preemption a retraction
    "server.preemptions": (Counter(("sglang:num_retracted_requests_total",)),),
    "server.prefix_cache_hit_rate": (
        Ratio(("sglang:cached_tokens_total",), ("sglang:prompt_tokens_total",), "prompt tokens"),
    ),
    "server.spec_decode_acceptance": (GaugeMean("sglang:spec_accept_rate"),),
    "server.requests": (Counter(("sglang:num_requests_total",)),),
    "server.prompt_tokens": (Counter(("sglang:prompt_tokens_total",)),),
    "server.generation_tokens": (Counter(("sglang:generation_tokens_total",)),),
}

# llama.cpp's server (--metrics): counters and gauges only, no latency histograms.
_LLAMACPP: dict[str, tuple[Source, ...]] = {
    # older builds only: upstream removed it (not in the conformance tier's 0c1e570)
    "server.kv_cache_usage": (Gauge("llamacpp:kv_cache_usage_ratio", "mean"),),
    "server.running": (Gauge("llamacpp:requests_processing"),),
    "server.waiting": (Gauge("llamacpp:requests_deferred"),),
    # prompt_tokens_total excludes the tokens reused from the cache
    "server.prefix_cache_hit_rate": (
        Ratio(
            ("llamacpp:prompt_tokens_cached_total",),
            ("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total"),
            "prompt tokens",
        ),
    ),
    "server.spec_decode_acceptance": (
        Ratio(
            ("llamacpp:spec_decode_num_accepted_tokens_total",),
            ("llamacpp:spec_decode_num_draft_tokens_total",),
            "draft tokens",
        ),
    ),
    "server.prompt_tokens": (
        Counter(("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total")),
    ),
    "server.generation_tokens": (Counter(("llamacpp:tokens_predicted_total",)),),
}

# TGI's router (metrics-exporter-prometheus): request histograms, token counts as histograms.
_TGI: dict[str, tuple[Source, ...]] = {
    "server.queue_time": (Histogram("tgi_request_queue_duration"),),
    "server.e2e": (Histogram("tgi_request_duration"),),
    "server.running": (Gauge("tgi_batch_current_size"),),
    "server.waiting": (Gauge("tgi_queue_size"),),
    "server.requests": (Counter(("tgi_request_success",)),),
    "server.prompt_tokens": (HistogramSum("tgi_request_input_length"),),
    "server.generation_tokens": (HistogramSum("tgi_request_generated_tokens"),),
}

MAPPINGS: dict[ServerFamily, dict[str, tuple[Source, ...]]] = {
    ServerFamily.VLLM: _VLLM,
    ServerFamily.SIM: _VLLM,  # the simulator exports vLLM's names
    ServerFamily.SGLANG: _SGLANG,
    ServerFamily.LLAMACPP: _LLAMACPP,
    ServerFamily.TGI: _TGI,
}


def detect_family(names: Iterable[str]) -> ServerFamily:
    """The family whose prefix the metric ``names`` use (the simulator's identity gauge
    first; then the prefix most names have), UNKNOWN when none."""
    counts = dict.fromkeys(ServerFamily, 0)
    for name in names:
        if name.startswith(SIM_IDENTITY):
            return ServerFamily.SIM
        for family, prefix in _PREFIXES[1:]:
            if name.startswith(prefix):
                counts[family] += 1
                break
    best = max(counts, key=lambda f: counts[f])
    return best if counts[best] else ServerFamily.UNKNOWN


def family_of(scrape: Scrape) -> ServerFamily:
    """:func:`detect_family` of a scrape's metric names."""
    return detect_family(scrape.names)


def metric_names(family: ServerFamily) -> set[str]:
    """Every metric a family's mapping reads (what a scrape of it must keep)."""
    out: set[str] = set()
    for sources in MAPPINGS.get(family, {}).values():
        for source in sources:
            if isinstance(source, Counter):
                out.update(source.metrics)
            elif isinstance(source, Ratio):
                out.update(source.numerator + source.denominator)
            else:
                out.add(source.metric)
    if family is ServerFamily.SIM:
        out.add(SIM_IDENTITY)
    return out


def mapping_rows() -> list[tuple[str, dict[ServerFamily, str]]]:
    """The mapping as a table: each common name and, per family, where it comes from."""
    families = [f for f in MAPPINGS if f is not ServerFamily.SIM]
    rows: list[tuple[str, dict[ServerFamily, str]]] = []
    for name in COMMON_METRICS:
        cells: dict[ServerFamily, str] = {}
        for family in families:
            sources = MAPPINGS[family].get(name, ())
            if sources:
                cells[family] = "; or ".join(s.describe() for s in sources)
        rows.append((name, cells))
    return rows
