"""A deterministic, purpose-built OpenAI streaming server for the load-generator benchmarks.

Why not the embedded simulator: the benchmarks must measure the *client*,
so the server has to be cheaper than the client and must say exactly when
it did things. This one is a bare ``asyncio.Protocol`` (no web framework):
it answers ``POST /v1/chat/completions`` with ``max_tokens`` content chunks,
the first ``ttft_ms`` after the request's last byte arrived and then one
every ``itl_ms`` (zero: everything in one write), followed by a usage chunk
and ``[DONE]``. It records, per request, ``time.monotonic_ns()`` at the
arrival of the request and at the write of each content chunk. On Linux
``CLOCK_MONOTONIC`` is system-wide, so these server-side instants are on
the same clock as the client's readings in another process: ``GET /truth``
returns the server's own TTFT and ITL (and ``POST /truth/reset`` clears
them), the ground truth the client's measurements are compared with.

Run: ``python benchmarks/streaming_server.py --ttft-ms 50 --itl-ms 10``
prints ``LISTENING http://127.0.0.1:PORT``; or use :func:`start_server`.

``--metrics`` (``start_server(metrics=True)``) adds ``GET /metrics``: a vLLM
0.32-sized Prometheus page (:class:`MetricsPage`, built once at start with
``prometheus_client``) whose per-request counters and histograms follow the
requests served, so a scrape's deltas are the run's. Without it ``/metrics``
is a 404, as before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MetricsPage", "ServerProcess", "start_server"]

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
)
_MODELS = b'{"object":"list","data":[{"id":"bench-model","object":"model"}]}'


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(obj: dict) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


def _token_event(i: int, last: bool) -> bytes:
    return _event(
        {
            "id": "b",
            "object": "chat.completion.chunk",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": f"t{i} "},
                    "finish_reason": "length" if last else None,
                }
            ],
        }
    )


_DONE = _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


def _plain(status: str, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        status.encode(),
        ctype,
        len(body),
        body,
    )


@dataclass
class Truth:
    """Server-side instants (monotonic ns) of the requests served since the last reset."""

    ttft_ns: list[int] = field(default_factory=list)
    itl_ns: list[int] = field(default_factory=list)
    arrival_ns: list[int] = field(default_factory=list)
    first_write_ns: list[int] = field(default_factory=list)


class StreamingServer:
    """Shared state: latencies to serve and the truth recorded so far."""

    def __init__(self, ttft_ms: float, itl_ms: float, record: bool) -> None:
        self.ttft_ns = int(ttft_ms * 1e6)
        self.itl_ns = int(itl_ms * 1e6)
        self.record = record
        self.truth = Truth()
        self.token_cache: dict[tuple[int, bool], bytes] = {}
        self.served = 0  # chat completions answered (the metrics page's request count)
        self.metrics_page: MetricsPage | None = None  # with --metrics

    def token(self, i: int, last: bool) -> bytes:
        key = (i, last)
        got = self.token_cache.get(key)
        if got is None:
            got = self.token_cache[key] = _token_event(i, last)
        return got

    def truth_body(self) -> bytes:
        t = self.truth
        return json.dumps(
            {
                "ttft_ns": t.ttft_ns,
                "itl_ns": t.itl_ns,
                "arrival_ns": t.arrival_ns,
                "first_write_ns": t.first_write_ns,
            }
        ).encode()


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; requests are handled one at a time."""

    def __init__(self, server: StreamingServer) -> None:
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        arrival = time.monotonic_ns()
        self.buf += data
        while not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            method, path = head.split(" ", 2)[:2]
            self.handle(method, path, body, arrival)

    def handle(self, method: str, path: str, body: bytes, arrival: int) -> None:
        t = self.transport
        if t is None:
            return
        if path.endswith("/models"):
            t.write(_plain("200 OK", _MODELS))
        elif path == "/metrics" and self.server.metrics_page is not None:
            page = self.server.metrics_page.render(self.server.served)
            t.write(_plain("200 OK", page, b"text/plain; version=0.0.4; charset=utf-8"))
        elif path == "/truth":
            t.write(_plain("200 OK", self.server.truth_body()))
        elif path == "/truth/reset":
            self.server.truth = Truth()
            t.write(_plain("200 OK", b"{}"))
        elif method == "POST" and path.endswith("/completions"):
            n = int(json.loads(body).get("max_tokens") or 16)
            self.stream(n, arrival)
        else:
            t.write(_plain("404 Not Found", b'{"error":{"message":"not found"}}'))

    def stream(self, n: int, arrival: int) -> None:
        srv = self.server
        t = self.transport
        assert t is not None
        srv.served += 1
        if srv.ttft_ns == 0 and srv.itl_ns == 0:
            parts = [_HEAD, *(srv.token(i, i == n - 1) for i in range(n)), _usage(n), _DONE]
            t.write(b"".join(parts))
            return
        self.busy = True
        t.write(_HEAD)
        loop = asyncio.get_running_loop()
        # loop.time() and monotonic_ns share CLOCK_MONOTONIC on Linux.
        base = arrival / 1e9 + srv.ttft_ns / 1e9
        state = {"i": 0, "last": 0}

        def emit() -> None:
            tr = self.transport
            if tr is None:
                self.busy = False
                return
            i = state["i"]
            tr.write(srv.token(i, i == n - 1))
            now = time.monotonic_ns()
            if srv.record:
                if i == 0:
                    srv.truth.ttft_ns.append(now - arrival)
                    srv.truth.arrival_ns.append(arrival)
                    srv.truth.first_write_ns.append(now)
                else:
                    srv.truth.itl_ns.append(now - state["last"])
            state["last"] = now
            state["i"] = i + 1
            if i + 1 < n:
                loop.call_at(base + (i + 1) * srv.itl_ns / 1e9, emit)
            else:
                tr.write(_usage(n) + _DONE)
                self.busy = False
                if self.buf:
                    self.data_received(b"")

        loop.call_at(base, emit)


def _usage(n: int) -> bytes:
    return _event(
        {
            "id": "b",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": n + 8},
        }
    )


# -- GET /metrics: vLLM 0.32's page -------------------------------------------------------

# The served model name vLLM puts in every series' model_name label (an HF id, as most
# deployments serve), and the max_model_len its token-count buckets stop at.
_PAGE_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
_PAGE_MAX_MODEL_LEN = 131072
# vllm/v1/metrics/buckets.py
_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
_TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
    7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
_ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
_ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
_N_BUCKETS = (1, 2, 5, 10, 20)
_PREEMPTION_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
# prometheus_fastapi_instrumentator.metrics.default (the API server's http_* metrics)
_HIGHR_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5,
    7.5, 10, 30, 60,
)  # fmt: skip


def _one_two_five(limit: int) -> tuple[int, ...]:
    """vLLM's ``build_1_2_5_buckets``: 1, 2, 5, 10, ... up to ``limit``."""
    out, scale = [], 1
    while True:
        for m in (1, 2, 5):
            if m * scale > limit:
                return tuple(out)
            out.append(m * scale)
        scale *= 10


def _cache_config_labels() -> dict[str, str]:
    """``vllm:cache_config_info``'s labels: every CacheConfig field as ``str`` (vLLM's
    ``CacheConfig.metrics_info``), at a typical single-GPU configuration."""
    return {
        "block_size": "16",
        "user_specified_block_size": "False",
        "kv_cache_layout": "None",
        "prefix_match_unit": "None",
        "gpu_memory_utilization": "0.92",
        "cache_dtype": "auto",
        "is_attention_free": "False",
        "num_gpu_blocks_override": "None",
        "sliding_window": "None",
        "enable_prefix_caching": "True",
        "prefix_caching_hash_algo": "sha256",
        "prefix_cache_retention_interval": "0",
        "kv_cache_dtype_skip_layers": "[]",
        "mamba_page_size_padded": "None",
        "skip_page_size_padded": "None",
        "mamba_block_size": "None",
        "mamba_cache_dtype": "auto",
        "mamba_ssm_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "enable_mamba_shared_prefix_checkpoint": "False",
        "replayssm_buffer_len": "16",
        "use_replayssm": "False",
        "use_kda_recoverssm": "False",
        "num_gpu_blocks": "29127",
        "num_cpu_blocks": "None",
        "effective_attention_block_size": "16",
        "kv_cache_size_tokens": "466032",
        "kv_cache_max_concurrency": "3.56",
        "hash_block_size": "16",
        "cache_hit_alignment_tokens": "16",
        "kv_sharing_fast_prefill": "False",
        "swa_bounded_replay": "True",
        "kv_cache_memory_bytes": "None",
        "kv_offloading_size": "None",
        "kv_offloading_backend": "native",
    }


def _vllm_registry(engines: int, model: str) -> tuple[Any, Callable[[], None]]:
    """A registry holding what vLLM 0.32's API server registers by default (one process,
    ``engines`` data-parallel engines), and a function that records one served request
    (8 prompt tokens, half of them prefix-cache hits, 16 generated) on every engine.

    Names, label names and label values, bucket boundaries and metric kinds are those of
    ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``: no LoRA, no speculative
    decoding, no KV connector, KV-block residency metrics off, as by default),
    ``vllm/v1/metrics/perf.py`` (``PerfMetricsProm``) and the API server's
    ``prometheus_fastapi_instrumentator`` (``vllm/entrypoints/serve/instrumentator``),
    in ``prometheus_client``'s default registry with its process, platform and GC
    collectors, as vLLM without ``PROMETHEUS_MULTIPROC_DIR``.
    """
    from prometheus_client import REGISTRY, Counter, Gauge, Histogram, Summary

    r = REGISTRY
    labels = ["model_name", "engine"]
    per_engine = [[model, str(i)] for i in range(engines)]
    tokens_buckets = _one_two_five(_PAGE_MAX_MODEL_LEN)

    def gauge(name: str, doc: str, extra: dict[str, tuple[str, ...]] | None = None) -> Any:
        names = labels + list(extra or {})
        g = Gauge(name, doc, names, registry=r, multiprocess_mode="mostrecent")
        values = [()] if not extra else [(v,) for v in next(iter(extra.values()))]
        return [g.labels(*lv, *v) for lv in per_engine for v in values]

    def counter(name: str, doc: str, extra: dict[str, tuple[str, ...]] | None = None) -> Any:
        c = Counter(name, doc, labels + list(extra or {}), registry=r)
        if not extra:
            return [c.labels(*lv) for lv in per_engine]
        ((_, values),) = extra.items()
        return {v: [c.labels(*lv, v) for lv in per_engine] for v in values}

    def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> list[Any]:
        h = Histogram(name, doc, labels, buckets=buckets, registry=r)
        return [h.labels(*lv) for lv in per_engine]

    running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
    waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
    gauge(
        "vllm:num_requests_waiting_by_reason",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
        "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, "
        "KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
        {"reason": ("capacity", "deferred")},
    )
    for i, g in enumerate(
        gauge(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine "
            "is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep "
            "level 2.",
            {"sleep_state": ("awake", "weights_offloaded", "discard_all")},
        )
    ):
        g.set(1 if i % 3 == 0 else 0)
    kv = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
    queries = counter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
    )
    hits = counter(
        "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
    )
    counter(
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector cross-instance cache sharing, in "
        "terms of number of queried tokens.",
    )
    counter(
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector cross-instance cache sharing, in terms "
        "of number of cached tokens.",
    )
    counter(
        "vllm:mm_cache_queries",
        "Multi-modal cache queries, in terms of number of queried items.",
    )
    counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.")
    counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
    prompt = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
    by_source = counter(
        "vllm:prompt_tokens_by_source",
        "Number of prompt tokens by source.",
        {"source": ("local_compute", "local_cache_hit", "external_kv_transfer")},
    )
    cached = counter(
        "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external)."
    )
    cached_by_source = counter(
        "vllm:prompt_tokens_cached_by_source",
        "Number of cached prompt tokens by the tier their KV came from (device, host, p2p, "
        "disk, external_unspecified).",
        {"source": ("device", "host", "p2p", "disk", "external_unspecified")},
    )
    generation = counter("vllm:generation_tokens", "Number of generation tokens processed.")
    success = counter(
        "vllm:request_success",
        "Count of successfully processed requests.",
        {"finished_reason": ("stop", "length", "abort", "error", "repetition")},
    )
    rejections = Counter(
        "vllm:admission_rejections",
        "Number of requests rejected at admission because a queue limit was reached.",
        ["model_name", "reason"],
        registry=r,
    )
    for reason in ("max_num_queued_reqs", "max_num_queued_tokens"):
        rejections.labels(model, reason)
    flops = counter(
        "vllm:estimated_flops_per_gpu_total",
        "Estimated number of floating point operations per GPU (for Model Flops Utilization "
        "calculations).",
    )
    read_bytes = counter(
        "vllm:estimated_read_bytes_per_gpu_total",
        "Estimated number of bytes read from memory per GPU (for Model Flops Utilization "
        "calculations).",
    )
    write_bytes = counter(
        "vllm:estimated_write_bytes_per_gpu_total",
        "Estimated number of bytes written to memory per GPU (for Model Flops Utilization "
        "calculations).",
    )
    h_prompt = histogram(
        "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens_buckets
    )
    h_generation = histogram(
        "vllm:request_generation_tokens", "Number of generation tokens processed.", tokens_buckets
    )
    h_iteration = histogram(
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        _ITERATION_BUCKETS,
    )
    h_max_generation = histogram(
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        tokens_buckets,
    )
    h_n = histogram("vllm:request_params_n", "Histogram of the n request parameter.", _N_BUCKETS)
    h_max_tokens = histogram(
        "vllm:request_params_max_tokens",
        "Histogram of the max_tokens request parameter.",
        tokens_buckets,
    )
    h_ttft = histogram(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        _TTFT_BUCKETS,
    )
    h_itl = histogram(
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        _ITL_BUCKETS,
    )
    h_tpot = histogram(
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        _ITL_BUCKETS,
    )
    h_e2e = histogram(
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        _LATENCY_BUCKETS,
    )
    h_queue = histogram(
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        _LATENCY_BUCKETS,
    )
    h_inference = histogram(
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        _LATENCY_BUCKETS,
    )
    h_prefill = histogram(
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        _LATENCY_BUCKETS,
    )
    h_decode = histogram(
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        _LATENCY_BUCKETS,
    )
    h_preempt = histogram(
        "vllm:request_num_preemptions",
        "Histogram of the number of times a request was preempted.",
        _PREEMPTION_BUCKETS,
    )
    h_kv_computed = histogram(
        "vllm:request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        tokens_buckets,
    )
    info = _cache_config_labels()
    cache_info = Gauge(
        "vllm:cache_config_info",
        "Information of the LLMEngine CacheConfig",
        [*info, "engine"],
        registry=r,
        multiprocess_mode="mostrecent",
    )
    for i in range(engines):
        cache_info.labels(**info, engine=str(i)).set(1)
    # the API server's prometheus_fastapi_instrumentator (default metrics)
    http_total = Counter(
        "http_requests_total",
        "Total number of requests by method, status and handler.",
        ["method", "status", "handler"],
        registry=r,
    )
    in_size = Summary(
        "http_request_size_bytes",
        "Content length of incoming requests by handler. Only value of header is respected. "
        "Otherwise ignored. No percentile calculated. ",
        ["handler"],
        registry=r,
    )
    out_size = Summary(
        "http_response_size_bytes",
        "Content length of outgoing responses by handler. Only value of header is respected. "
        "Otherwise ignored. No percentile calculated. ",
        ["handler"],
        registry=r,
    )
    highr = Histogram(
        "http_request_duration_highr_seconds",
        "Latency with many buckets but no API specific labels. Made for more accurate "
        "percentile calculations. ",
        buckets=_HIGHR_BUCKETS,
        registry=r,
    )
    lowr = Histogram(
        "http_request_duration_seconds",
        "Latency with only few buckets by handler. Made to be only used if aggregation by "
        "handler is important. ",
        ["method", "handler"],
        buckets=(0.1, 0.5, 1),
        registry=r,
    )
    # the client's GET /v1/models at start-up, once
    http_total.labels("GET", "2xx", "/v1/models").inc()
    in_size.labels("/v1/models").observe(0)
    out_size.labels("/v1/models").observe(420)
    highr.observe(0.002)
    lowr.labels("GET", "/v1/models").observe(0.002)
    for e in range(engines):
        running[e].set(0)
        waiting[e].set(0)
        kv[e].set(0.0021)

    def request() -> None:
        """One request of 8 prompt tokens (4 from the prefix cache) and 16 generated."""
        for e in range(engines):
            queries[e].inc(8)
            hits[e].inc(4)
            prompt[e].inc(8)
            by_source["local_compute"][e].inc(4)
            by_source["local_cache_hit"][e].inc(4)
            cached[e].inc(4)
            cached_by_source["device"][e].inc(4)
            generation[e].inc(16)
            success["length"][e].inc()
            flops[e].inc(3.9e11)
            read_bytes[e].inc(2.6e11)
            write_bytes[e].inc(1.3e6)
            h_prompt[e].observe(8)
            h_generation[e].observe(16)
            h_iteration[e].observe(24)
            h_max_generation[e].observe(16)
            h_n[e].observe(1)
            h_max_tokens[e].observe(16)
            h_ttft[e].observe(0.021)
            for _ in range(15):
                h_itl[e].observe(0.012)
            h_tpot[e].observe(0.012)
            h_e2e[e].observe(0.201)
            h_queue[e].observe(0.0004)
            h_inference[e].observe(0.2)
            h_prefill[e].observe(0.02)
            h_decode[e].observe(0.18)
            h_preempt[e].observe(0)
            h_kv_computed[e].observe(4)
        http_total.labels("POST", "2xx", "/v1/chat/completions").inc()
        in_size.labels("/v1/chat/completions").observe(112)
        out_size.labels("/v1/chat/completions").observe(0)
        highr.observe(0.202)
        lowr.labels("POST", "/v1/chat/completions").observe(0.202)

    return r, request


class MetricsPage:
    """vLLM 0.32's ``/metrics`` page, generated once, rendered for any request count.

    :meth:`build` writes the page with ``prometheus_client``'s ``generate_latest``
    after one request and after two: the sample lines that differ (the ``vllm:`` and
    ``http_`` counters, histogram buckets, sums and counts a request moves) become
    slots, each ``value(n) = base + n * per_request``; everything else (``# HELP`` and
    ``# TYPE`` lines, ``_created`` series, gauges, process and GC metrics) is kept as
    written. :meth:`render` then costs one float format per slot, no registry.
    """

    def __init__(self, chunks: list[bytes], slots: list[tuple[float, float]]) -> None:
        from prometheus_client.utils import floatToGoString

        self.chunks = chunks  # len(slots) + 1 constant runs around the slots
        self.slots = slots  # (value at 0 requests, per request)
        self._format = floatToGoString

    @classmethod
    def build(cls, engines: int = 1, model: str = _PAGE_MODEL) -> MetricsPage:
        from prometheus_client import generate_latest

        registry, request = _vllm_registry(engines, model)
        request()
        one = generate_latest(registry).decode().split("\n")
        request()
        two = generate_latest(registry).decode().split("\n")
        if len(one) != len(two):
            raise RuntimeError("the metrics page changed shape between two requests")
        chunks: list[bytes] = []
        slots: list[tuple[float, float]] = []
        run: list[str] = []
        for a, b in zip(one, two, strict=True):
            if a == b or not a.startswith(("vllm:", "http_")):
                run.append(a)
                continue
            head, _, va = a.rpartition(" ")
            head_b, _, vb = b.rpartition(" ")
            if head != head_b:
                raise RuntimeError(f"line moved between two requests: {a!r} / {b!r}")
            run.append(head + " ")
            chunks.append("\n".join(run).encode())
            per = float(vb) - float(va)
            slots.append((float(va) - per, per))
            run = [""]  # the slot's line goes on after its value
        chunks.append("\n".join(run).encode())
        return cls(chunks, slots)

    def render(self, requests: int) -> bytes:
        """The page after ``requests`` requests."""
        fmt = self._format
        chunks = self.chunks
        out = [chunks[0]]
        for i, (base, per) in enumerate(self.slots):
            out.append(fmt(base + requests * per).encode())
            out.append(chunks[i + 1])
        return b"".join(out)


async def serve(
    ttft_ms: float, itl_ms: float, port: int, record: bool, metrics: bool = False
) -> None:
    server = StreamingServer(ttft_ms, itl_ms, record)
    if metrics:
        server.metrics_page = MetricsPage.build()
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: Connection(server), "127.0.0.1", port, backlog=1024)
    real_port = srv.sockets[0].getsockname()[1]
    print(f"LISTENING http://127.0.0.1:{real_port}", flush=True)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()  # parent closed our stdin: exit
    srv.close()


@dataclass
class ServerProcess:
    """A running benchmark server: ``.url``, ``.truth()``, ``.reset()``, ``.stop()``."""

    proc: subprocess.Popen[bytes]
    url: str

    def truth(self) -> dict[str, list[int]]:
        import urllib.request

        with urllib.request.urlopen(self.url + "/truth") as r:
            return json.loads(r.read())

    def reset(self) -> None:
        import urllib.request

        with urllib.request.urlopen(self.url + "/truth/reset") as r:
            r.read()

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_server(
    ttft_ms: float = 0.0, itl_ms: float = 0.0, *, record: bool = True, metrics: bool = False
) -> ServerProcess:
    """Start the server in a child process and wait until it listens (``metrics``:
    serve a vLLM-sized ``/metrics`` page)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--ttft-ms", str(ttft_ms)]
    cmd += ["--itl-ms", str(itl_ms)]
    if not record:
        cmd.append("--no-record")
    if metrics:
        cmd.append("--metrics")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("LISTENING "):
        proc.kill()
        raise RuntimeError(f"benchmark server did not start: {line!r}")
    return ServerProcess(proc, line.split(" ", 1)[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ttft-ms", type=float, default=0.0)
    ap.add_argument("--itl-ms", type=float, default=0.0)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--metrics", action="store_true", help="serve a vLLM-sized GET /metrics")
    args = ap.parse_args()
    asyncio.run(serve(args.ttft_ms, args.itl_ms, args.port, not args.no_record, args.metrics))


if __name__ == "__main__":
    main()
