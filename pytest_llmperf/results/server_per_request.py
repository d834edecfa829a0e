"""The server's own view of a run from the timings each response carried.

Where the server says per request how long the request queued and computed
(vLLM's ``--enable-per-request-metrics`` ``metrics`` object, llama.cpp's
``timings``; :mod:`pytest_llmperf.client.server_timing`), the run's
:class:`~pytest_llmperf.results.accumulator.MetricsAccumulator` holds them as
HDR histograms (``server_histograms``). Two views are read from them here:

- :func:`server_metrics_from_requests`: the common ``server.*`` names, the same
  ones a ``/metrics`` scrape fills, with ``source="responses"`` — what fills them
  where the server has no ``/metrics`` (or lacks a histogram there):

  - ``server.queue_time``: vLLM's ``queue_time_ms`` (engine queue -> first
    scheduled); llama.cpp reports none;
  - ``server.prefill_time``: vLLM's ``time_to_first_token_ms`` (first scheduled ->
    first token), llama.cpp's ``prompt_ms``;
  - ``server.ttft``: vLLM's ``queue_time_ms + time_to_first_token_ms`` per request
    (none for llama.cpp: no queue time);
  - ``server.decode_time``: vLLM's ``generation_time_ms`` (first -> last token),
    llama.cpp's ``predicted_ms``;
  - ``server.itl``: vLLM's ``mean_itl_ms``, llama.cpp's ``predicted_ms /
    (predicted_n - 1)``: one sample per request;
  - ``server.spec_decode_acceptance``: Σ ``num_accepted_draft_tokens`` / Σ
    ``num_draft_tokens`` (llama.cpp: Σ ``draft_n_accepted`` / Σ ``draft_n``).

  ``server.ttft`` from responses is the time from the engine queueing the request
  to its first token. It is *not* what vLLM's ``/metrics`` calls TTFT
  (``vllm:time_to_first_token_seconds``, from the API server's arrival): the
  API layer's work before the engine queue (tokenization, the hop to the engine
  core) is in neither part, so it reads a little lower than the scraped one.
  ``server.itl`` is each request's *mean* gap (request-weighted), not every gap
  pooled as ``/metrics`` counts it. Percentiles are the HDR histograms' (1 µs,
  three significant digits): ``bucket_ms`` is that resolution at the p50, and
  ``buckets`` carries the HDR buckets so any percentile an SLO names is read as
  from a scrape. ``family`` is the shape the timings came in: ``vllm`` (queue
  times present: vLLM, and the simulator, which sends vLLM's object) or
  ``llama.cpp``.

- :func:`ttft_split`: "where the time went" — each timed request's client TTFT
  split into client queue, server queue, engine and the remainder (network,
  HTTP, the server's API layer), percentiles of each; the parts add up to each
  request's TTFT exactly (the remainder is defined so), and so do their means.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.results.accumulator import TTFT_PARTS, MetricsAccumulator
from pytest_llmperf.server_metrics.summary import LATENCY_STATS, ServerFamily, ServerMetrics

__all__ = ["RESPONSE_NAMES", "SPLIT_STATS", "server_metrics_from_requests", "ttft_split"]

# server.* name -> the accumulator's server histogram it is read from
RESPONSE_NAMES: dict[str, str] = {
    "server.queue_time": "server_queue",
    "server.prefill_time": "engine",
    "server.ttft": "server_ttft",
    "server.decode_time": "server_decode",
    "server.itl": "server_itl",
}
SPLIT_STATS = ("p50", "p90", "p99", "mean")


def server_metrics_from_requests(acc: MetricsAccumulator) -> ServerMetrics | None:
    """The ``server.*`` metrics the responses' own timings give over ``acc``'s requests
    (a run's, or a stage's: ``acc.stages[k]``); None when no response carried any."""
    hists = acc.server_histograms
    if not hists:
        return None
    metrics: dict[str, dict[str, float]] = {}
    buckets: dict[str, list[list[float]]] = {}
    for name, key in RESPONSE_NAMES.items():
        hist = hists.get(key)
        if hist is None or not hist.count:
            continue
        metrics[name] = _latency(hist)
        buckets[name] = hist.buckets_ms()
    if acc.server_spec_draft:
        acceptance = acc.server_spec_accepted / acc.server_spec_draft
        metrics["server.spec_decode_acceptance"] = {"value": round(acceptance, 6)}
    if not metrics:
        return None
    queue = hists.get("server_queue")
    family = ServerFamily.VLLM if queue is not None and queue.count else ServerFamily.LLAMACPP
    return ServerMetrics(source="responses", family=family, metrics=metrics, buckets=buckets)


def ttft_split(acc: MetricsAccumulator) -> dict[str, Any] | None:
    """Where each timed request's TTFT went, in ms; None when no response said its
    engine time.

    ``{"count": n, "client_queue": {"p50", "p90", "p99", "mean"}, "server_queue":
    {...} | None, "engine": {...}, "remainder": {...}, "ttft": {...},
    "server_queue_reported": k, "remainder_negative": m}``: ``n`` requests whose
    server said its engine time, ``ttft`` their client TTFT; ``server_queue`` is
    None when the server reports no queue time (llama.cpp), and then, as for the
    ``n - k`` requests without one, that wait is inside ``remainder``;
    ``remainder_negative`` counts the requests whose server-side parts overran
    the client's TTFT (the clocks disagreeing; their remainder counts as 0).
    """
    hists = acc.server_histograms
    ttft = hists.get("split_ttft")
    if ttft is None or not ttft.count:
        return None
    out: dict[str, Any] = {"count": ttft.count}
    for part in TTFT_PARTS:
        hist = hists[part]
        out[part] = _split_stats(hist) if hist.count else None
    out["ttft"] = _split_stats(ttft)
    out["server_queue_reported"] = hists["server_queue"].count
    out["remainder_negative"] = acc.server_remainder_negative
    return out


def _latency(hist: LatencyHistogram) -> dict[str, float]:
    out = {name: round(hist.stat(name), 4) for name in LATENCY_STATS}
    out["count"] = hist.count
    out["bucket_ms"] = hist.resolution_ms(hist.p(50))
    return out


def _split_stats(hist: LatencyHistogram) -> dict[str, float]:
    return {name: round(hist.stat(name), 4) for name in SPLIT_STATS}
