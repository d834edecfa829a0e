"""The names a fleet adds: page roles, fleet-wide SLO names and the scopes of per-role and
per-replica SLOs.

A deployment of several processes (a router, replicas, or disaggregated prefill and
decode pools) is scraped as a list of ``/metrics`` pages, each with a role
(:class:`PageRole`) and a name (``--llm-server-metrics=router=URL,replica=URL,...``,
docs/fleets.md). Its SLOs say which part of the fleet they judge:

- ``server.<name>[.<stat>]``: the fleet as one (counters summed over the pages,
  histograms merged, gauges over all pages) -- unchanged from one page;
- ``<role>.<name>[.<stat>]`` for a pool (``prefill.queue_time.p99``,
  ``decode.kv_cache_usage.max``, ``router.requests``): the pages of that role together;
  ``<name>`` is a common server name without its ``server.`` (:data:`SERVER_ALIASES` also
  takes ``kv_usage``);
- ``replica.<metric>.<stat>`` (``replica.ttft.p99 < 500ms``, ``replica.error_rate < 1%``):
  the client's own metric judged on each replica's requests (attributed from a response
  header), every replica that served requests must meet it;
- ``fleet.imbalance`` (max over mean of requests per replica), ``fleet.busy_imbalance``
  (max over mean of each replica's mean running requests), ``fleet.prefix_hit_rate``
  (prefix-cache hits over lookups summed over the pages);
- ``kv_transfer.<stat>``: the fleet's ``server.kv_transfer`` histogram (the KV cache's
  move from prefill to decode).

A page of role ``gpu`` (an NVIDIA DCGM exporter's, ``gpu=http://node:9400/metrics``)
is read for the run's GPU figures (``runs[].gpu``, :mod:`pytest_llmperf.specs.gpu_names`),
never as a server's page.

Here, in the low package, because the SLO grammar parses them at collection.
"""

from __future__ import annotations

from enum import StrEnum

from pytest_llmperf.specs.server_names import MetricKind

__all__ = [
    "ENGINE_ROLES",
    "FLEET_METRICS",
    "KV_TRANSFER",
    "PAGE_ROLES",
    "POOL_SCOPES",
    "REPLICA_SCOPE",
    "SERVER_ALIASES",
    "PageRole",
]


class PageRole(StrEnum):
    """What the process behind a ``/metrics`` page does in the deployment."""

    ROUTER = "router"  # the front: routes requests to replicas (its own page, its own names)
    REPLICA = "replica"  # a whole engine (prefill and decode)
    PREFILL = "prefill"  # a disaggregated deployment's prefill engine
    DECODE = "decode"  # ... and its decode engine
    # an NVIDIA DCGM exporter's page: it describes GPUs, not a server process (never an
    # engine page: not in the fleet's whole, no pool, no one-process rule; docs/gpu.md)
    GPU = "gpu"


ENGINE_ROLES = (PageRole.ROUTER, PageRole.REPLICA, PageRole.PREFILL, PageRole.DECODE)


PAGE_ROLES = tuple(r.value for r in PageRole)

# The fleet-wide figures an SLO may name, their kind and unit (no statistic).
FLEET_METRICS: dict[str, tuple[MetricKind, str]] = {
    "fleet.imbalance": (MetricKind.VALUE, "ratio"),
    "fleet.busy_imbalance": (MetricKind.VALUE, "ratio"),
    "fleet.prefix_hit_rate": (MetricKind.VALUE, "fraction"),
}
# <pool>.<server name>[.<stat>]: the pages of one role, together
POOL_SCOPES = (PageRole.ROUTER.value, PageRole.PREFILL.value, PageRole.DECODE.value)
# replica.<client metric>.<stat>: judged on each replica's own requests
REPLICA_SCOPE = "replica"
# kv_transfer.<stat>: the fleet's KV-transfer histogram
KV_TRANSFER = "server.kv_transfer"
# other spellings of a common name after a scope (decode.kv_usage.max)
SERVER_ALIASES = {"kv_usage": "kv_cache_usage"}
