"""Prometheus pages as real servers write them, for the server-metrics tests.

:class:`VllmPage` builds vLLM 0.32's ``/metrics`` with ``prometheus_client``
itself (what vLLM uses), with vLLM's metric names, label names, bucket
boundaries and per-engine label sets, copied from the installed vLLM's
``vllm/v1/metrics/loggers.py``, ``buckets.py`` and ``spec_decode/metrics.py``:
so the exposition text (``_total`` counters, ``_created`` series, histogram
buckets per label set) is byte for byte what ``generate_latest`` writes for
vLLM. The tests drive it as a server would (observe, increment) and read the
page at any moment.

:data:`LLAMACPP_PAGE` is the text llama.cpp's server writes (``server-task.cpp``,
``server_task_result_metrics::to_metrics`` at the conformance tier's commit
0c1e570: ``# TYPE`` lines with the ``_total`` name, no labels, no histograms).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# vllm/v1/metrics/buckets.py
REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TIME_TO_FIRST_TOKEN_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
    7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
INTER_TOKEN_LATENCY_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
REQUEST_TOKENS_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)  # 1-2-5 to max_model_len
# vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py (NixlPromMetrics: buckets[1:])
NIXL_XFER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")

LABELS = ["model_name", "engine"]


class VllmPage:
    """vLLM's metrics for ``engines`` engines of one process started at ``started``."""

    def __init__(
        self,
        model: str = "tiny-model",
        engines: int = 1,
        started: float = 1.7e9,
        *,
        nixl: bool = False,
    ):
        self.registry = r = CollectorRegistry()
        self.model = model
        self.engines = [str(i) for i in range(engines)]
        start = Gauge("process_start_time_seconds", "Start time of the process", registry=r)
        start.set(started)
        self.running = Gauge("vllm:num_requests_running", "Running.", LABELS, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Waiting.", LABELS, registry=r)
        self.kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage.", LABELS, registry=r)
        self.prefix_queries = Counter("vllm:prefix_cache_queries", "Q.", LABELS, registry=r)
        self.prefix_hits = Counter("vllm:prefix_cache_hits", "H.", LABELS, registry=r)
        self.preemptions = Counter("vllm:num_preemptions", "Preemptions.", LABELS, registry=r)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prompt.", LABELS, registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Gen.", LABELS, registry=r)
        self.success = Counter(
            "vllm:request_success", "Success.", [*LABELS, "finished_reason"], registry=r
        )
        self.drafts = Counter("vllm:spec_decode_num_drafts", "Drafts.", LABELS, registry=r)
        self.draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "D.", LABELS, registry=r)
        self.accepted = Counter("vllm:spec_decode_num_accepted_tokens", "A.", LABELS, registry=r)
        cache_info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            ["block_size", "cache_dtype", "enable_prefix_caching", "engine", "num_gpu_blocks"],
            registry=r,
        )

        def hist(name: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, name, LABELS, buckets=buckets, registry=r)

        self.ttft = hist("vllm:time_to_first_token_seconds", TIME_TO_FIRST_TOKEN_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", INTER_TOKEN_LATENCY_BUCKETS)
        self.tpot = hist("vllm:request_time_per_output_token_seconds", INTER_TOKEN_LATENCY_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds", REQUEST_LATENCY_BUCKETS)
        self.queue = hist("vllm:request_queue_time_seconds", REQUEST_LATENCY_BUCKETS)
        self.inference = hist("vllm:request_inference_time_seconds", REQUEST_LATENCY_BUCKETS)
        self.prefill = hist("vllm:request_prefill_time_seconds", REQUEST_LATENCY_BUCKETS)
        self.decode = hist("vllm:request_decode_time_seconds", REQUEST_LATENCY_BUCKETS)
        self.iteration = hist("vllm:iteration_tokens_total", ITERATION_TOKENS_BUCKETS)
        self.req_prompt = hist("vllm:request_prompt_tokens", REQUEST_TOKENS_BUCKETS)
        self.req_gen = hist("vllm:request_generation_tokens", REQUEST_TOKENS_BUCKETS)
        self.req_max = hist("vllm:request_params_max_tokens", REQUEST_TOKENS_BUCKETS)
        # only with --kv-transfer-config NixlConnector (a disaggregated deployment's engines)
        self.nixl = hist("vllm:nixl_xfer_time_seconds", NIXL_XFER_BUCKETS) if nixl else None
        # vLLM creates every per-engine child at start (create_metric_per_engine)
        for engine in self.engines:
            labels = (model, engine)
            for metric in (
                self.running, self.waiting, self.kv, self.prefix_queries, self.prefix_hits,
                self.preemptions, self.prompt_tokens, self.generation_tokens, self.drafts,
                self.draft_tokens, self.accepted, self.ttft, self.itl, self.tpot, self.e2e,
                self.queue, self.inference, self.prefill, self.decode, self.iteration,
                self.req_prompt, self.req_gen, self.req_max,
            ):  # fmt: skip
                metric.labels(*labels)
            if self.nixl is not None:
                self.nixl.labels(*labels)
            for reason in FINISH_REASONS:
                self.success.labels(model, engine, reason)
            cache_info.labels("16", "auto", "True", engine, "4096").set(1)

    def text(self) -> str:
        return generate_latest(self.registry).decode()

    def request(
        self,
        engine: str = "0",
        *,
        queue_s: float,
        prefill_s: float,
        decode_s: float,
        prompt: int = 100,
        output: int = 10,
        finished: str = "length",
    ) -> None:
        """One finished request, recorded as vLLM records it."""
        labels = (self.model, engine)
        self.queue.labels(*labels).observe(queue_s)
        self.prefill.labels(*labels).observe(prefill_s)
        self.decode.labels(*labels).observe(decode_s)
        self.inference.labels(*labels).observe(prefill_s + decode_s)
        self.ttft.labels(*labels).observe(queue_s + prefill_s)
        self.e2e.labels(*labels).observe(queue_s + prefill_s + decode_s)
        for _ in range(output - 1):
            self.itl.labels(*labels).observe(decode_s / max(1, output - 1))
        self.prompt_tokens.labels(*labels).inc(prompt)
        self.generation_tokens.labels(*labels).inc(output)
        self.success.labels(self.model, engine, finished).inc()
        self.req_prompt.labels(*labels).observe(prompt)
        self.req_gen.labels(*labels).observe(output)

    def transfer(self, seconds: float, engine: str = "0") -> None:
        """One NIXL KV-cache transfer of ``seconds`` (a page made with ``nixl=True``)."""
        assert self.nixl is not None, "a VllmPage(nixl=True) records transfers"
        self.nixl.labels(self.model, engine).observe(seconds)


LLAMACPP_PAGE = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total {cached}
# HELP llamacpp:prompt_seconds_total Total time spent processing prompts
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 0.512
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {predicted}
# HELP llamacpp:tokens_predicted_seconds_total Total time spent generating tokens
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 1.25
# HELP llamacpp:n_decode_total Total number of llama_decode() calls
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 40
# HELP llamacpp:n_tokens_max Largest observed sequence length (prompt + generation)
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 37
# HELP llamacpp:spec_decode_num_draft_tokens_total Speculative: Total draft tokens generated
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 0
# HELP llamacpp:spec_decode_num_accepted_tokens_total Speculative: Total draft tokens accepted
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 0
# HELP llamacpp:spec_decode_num_drafts_total Speculative: Total verification steps
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 0
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 312.5
# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 24
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing {processing}
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred {deferred}
# HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call
# TYPE llamacpp:n_busy_slots_per_decode gauge
llamacpp:n_busy_slots_per_decode 1
"""
