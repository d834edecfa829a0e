"""``--llm-reset-cache`` over a fleet: each engine's own server reset, not the router's.

Behind a router, the endpoint's ``POST /reset_prefix_cache`` is proxied to *one*
worker (vLLM's router forwards any path it does not know to a worker the policy picks),
so resetting the endpoint leaves the other replicas' caches warm. Where the session
reads a fleet of pages (:mod:`.fleet_source`), the servers behind its replica, prefill
and decode pages are reset instead, each as a single server is
(:func:`~.cache_reset.reset_prefix_cache`: its routes, its memory, its limits): a page
on the endpoint's own origin is the endpoint (the embedded simulator's engines are one
server: reset once), another page's server is the page's URL without its ``/metrics``,
asked without the endpoint's credentials. A router's page is never reset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_llmperf.client.endpoint import Endpoint, redact_url
from pytest_llmperf.client.metadata import server_root
from pytest_llmperf.server_metrics.fleet_source import FleetSource
from pytest_llmperf.server_metrics.source import origin
from pytest_llmperf.specs.fleet_names import PageRole

__all__ = ["fleet_servers", "reset_fleet"]

Reset = Callable[[Endpoint], dict[str, Any]]


def fleet_servers(target: Endpoint, source: FleetSource) -> list[Endpoint]:
    """The servers behind ``source``'s engine pages, each once, in the pages' order."""
    own = origin(target.base_url)
    out: dict[str, Endpoint] = {}
    for page in source.pages:
        if page.spec.role in (PageRole.ROUTER, PageRole.GPU):  # no engine behind either
            continue
        url = page.spec.url
        if origin(url) == own:
            out.setdefault(server_root(target.base_url), target)
            continue
        root = url.rstrip("/").removesuffix("/metrics")
        out.setdefault(root, Endpoint(base_url=f"{root}/v1", timeouts=target.timeouts))
    return list(out.values())


def reset_fleet(target: Endpoint, source: FleetSource, reset_one: Reset) -> dict[str, Any]:
    """Reset every engine server of the fleet with ``reset_one`` and say it as one record:
    ``done`` when every server's was, ``why`` naming each server that was not, ``how`` the
    routes used, ``prefix_cache`` True where any server showed one, and ``servers`` each
    server's own record. One server (the simulator, a fleet of one): its record alone."""
    servers = fleet_servers(target, source) or [target]
    records = [(s, reset_one(s)) for s in servers]
    if len(records) == 1:
        return records[0][1]
    shown = [(redact_url(server_root(s.base_url)), r) for s, r in records]
    hows = list(dict.fromkeys(str(r["how"]) for _, r in shown if r.get("how")))
    whys = [f"{name}: {r['why']}" for name, r in shown if not r.get("done")]
    caches = [r.get("prefix_cache") for _, r in shown]
    return {
        "done": not whys,
        "how": "; ".join(hows) or None,
        "why": "; ".join(whys) or None,
        "prefix_cache": True if True in caches else (None if None in caches else False),
        "servers": [{"server": name, **r} for name, r in shown],
    }
