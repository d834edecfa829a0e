"""The server's own counters from its Prometheus ``/metrics``, when it exposes them.

Preemptions and KV-cache use are invisible from the client side; vLLM (and
the embedded simulator, which uses vLLM's metric names) publish them at
``GET /metrics`` on the server root. :func:`scrape_metrics` reads that page
once, through the metadata client (:mod:`~pytest_llmperf.client.metadata`:
bounded, transient answers retried); :func:`counter_deltas` turns two
scrapes around a run into per-run counts. A server without ``/metrics``
yields ``None``; one whose ``/metrics`` hangs, trickles or keeps failing is
the metadata client's usage error naming the call, never a hang.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import (
    CallFailure,
    CallLimits,
    MetadataCallError,
    MetadataClient,
    server_root,
)

__all__ = ["PREEMPTIONS", "counter_deltas", "metrics_url", "parse_prometheus", "scrape_metrics"]

PREEMPTIONS = "vllm:num_preemptions_total"
KV_USAGE = "vllm:kv_cache_usage_perc"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def metrics_url(base_url: str) -> str:
    """``http://h:p/v1`` -> ``http://h:p/metrics``."""
    return server_root(base_url) + "/metrics"


def parse_prometheus(text: str) -> dict[str, float]:
    """Each metric name's value summed over its label sets (comments and bad lines skipped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if math.isnan(value):
            continue
        out[match.group(1)] = out.get(match.group(1), 0.0) + value
    return out


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
