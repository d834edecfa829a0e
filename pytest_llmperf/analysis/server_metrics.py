"""The server's own counters from its Prometheus ``/metrics``, when it exposes them.

Preemptions and KV-cache use are invisible from the client side; vLLM (and
the embedded simulator, which uses vLLM's metric names) publish them at
``GET /metrics`` on the server root. :func:`scrape_metrics` reads that page
once, through the metadata client (:mod:`~pytest_llmperf.client.metadata`:
bounded, transient answers retried); :func:`counter_deltas` turns two
scrapes around a run into per-run counts. A server without ``/metrics``
yields ``None``; one whose ``/metrics`` hangs, trickles or keeps failing is
the metadata client's usage error naming the call, never a hang.

The page is read by the server-metrics package's exposition parser
(:func:`pytest_llmperf.server_metrics.exposition.parse_scrape`, which is
``prometheus_client``'s parser), so this flat view and every run's
``server_metrics`` read a page the same way. Every run already samples
``/metrics`` itself (:mod:`pytest_llmperf.server_metrics`); this module stays
for the procedures that compare scrapes around whole runs (memory pressure).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import (
    CallFailure,
    CallLimits,
    MetadataCallError,
    MetadataClient,
)
from pytest_llmperf.server_metrics.exposition import ScrapeFailure, flatten, parse_scrape
from pytest_llmperf.server_metrics.source import metrics_url

__all__ = ["PREEMPTIONS", "counter_deltas", "metrics_url", "parse_prometheus", "scrape_metrics"]

PREEMPTIONS = "vllm:num_preemptions_total"
KV_USAGE = "vllm:kv_cache_usage_perc"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"


def parse_prometheus(text: str) -> dict[str, float]:
    """Each metric's value summed over its label sets: counters by their ``_total`` name,
    gauges, a histogram's ``_sum`` and ``_count`` (lines the parser cannot read are
    skipped; a body that is not Prometheus text at all gives ``{}``)."""
    scrape = parse_scrape(text, time.monotonic_ns())
    return {} if isinstance(scrape, ScrapeFailure) else flatten(scrape)


async def scrape_metrics(endpoint: Endpoint, *, timeout_s: float = 5.0) -> dict[str, float] | None:
    """The endpoint's ``/metrics`` parsed, or ``None`` when it has none (or not in Prometheus).

    One call of the metadata client, its limits capped at ``timeout_s``: a
    page that never ends, a server that stalls or answers 5xx after its retries
    raise :class:`~pytest_llmperf.client.metadata.MetadataCallError`; a page
    that is not there (any other status, nothing listening) is ``None``.
    """
    limits = CallLimits.of(endpoint.timeouts).within(timeout_s)
    try:
        async with MetadataClient(endpoint, limits=limits) as meta:
            answer = await meta.call("GET", meta.root_url("/metrics"))
    except MetadataCallError as exc:
        if exc.failure is CallFailure.UNREACHABLE:
            return None  # no HTTP answer at all: no page to read
        raise
    if answer.status != 200:
        return None
    parsed = parse_prometheus(answer.body.decode("utf-8", "replace"))
    return parsed or None


def counter_deltas(
    before: Mapping[str, float] | None, after: Mapping[str, float] | None
) -> dict[str, float] | None:
    """``after - before`` for every counter (``*_total``) present in both scrapes."""
    if before is None or after is None:
        return None
    return {
        name: after[name] - before[name]
        for name in after
        if name.endswith("_total") and name in before
    }
