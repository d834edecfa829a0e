"""A fleet's own figures (``fleet.imbalance``, ``fleet.busy_imbalance``,
``fleet.prefix_hit_rate``), computed one way for the verdicts (:mod:`pytest_llmperf.slo.
fleet_verdicts`, on a run) and for the history and baselines (on a run's report dict),
and what a history keeps of a fleet run besides the plain metrics.

- requests per replica: the client's attribution (``runs[].by_replica``, each replica's
  completed requests) where the responses named replicas, with 0 for a replica page that
  served none where the pages and the header name the replicas alike; else the replica
  pages' own counters (``runs[].fleet.requests``). The *serving* pages are the replica
  pages, or, in a disaggregated fleet, the decode pages.
- busy: each serving page's mean ``server.running`` over the run.
- ``imbalance``: the largest over the mean (1.0: even; N replicas with one doing all: N).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_llmperf.server_metrics.summary import run_metrics_with_server
from pytest_llmperf.specs.fleet_names import POOL_SCOPES, REPLICA_SCOPE, PageRole

__all__ = [
    "CLIENT_SOURCE",
    "PAGES_SOURCE",
    "busy_by_page",
    "fleet_figures",
    "imbalance",
    "replica_requests",
    "run_metrics_with_fleet",
    "serving_pages",
]

CLIENT_SOURCE = "the responses' replica header"
PAGES_SOURCE = "the replica pages' request counters"
_SERVING = (PageRole.REPLICA.value, PageRole.DECODE.value)


def serving_pages(pages: Iterable[tuple[str, str]]) -> list[str]:
    """The names of the pages that serve requests, of ``(role, name)`` pairs: the replica
    pages, else the decode pages (a disaggregated fleet's), else none."""
    listed = list(pages)
    for role in _SERVING:
        names = [name for r, name in listed if r == role]
        if names:
            return names
    return []


def replica_requests(
    attributed: Mapping[str, float],
    serving: Sequence[str],
    page_requests: Mapping[str, float],
) -> tuple[dict[str, float], str]:
    """Completed requests per replica and where they come from (see the module's
    docstring); ``({}, "")`` where neither the responses nor the pages say."""
    if attributed:
        counts = {name: float(n) for name, n in attributed.items()}
        if serving and set(counts) <= set(serving):
            counts = {name: counts.get(name, 0.0) for name in serving}
        return counts, CLIENT_SOURCE
    wanted = set(serving) or set(page_requests)
    counts = {k: float(v) for k, v in page_requests.items() if k in wanted}
    return (counts, PAGES_SOURCE) if counts else ({}, "")


def busy_by_page(
    running_means: Mapping[str, float | None], serving: Sequence[str]
) -> dict[str, float]:
    """Each serving page's mean running requests, where its page sampled them."""
    out: dict[str, float] = {}
    for name in serving:
        value = running_means.get(name)
        if value is not None and not math.isnan(value):
            out[name] = float(value)
    return out


def imbalance(values: Mapping[str, float]) -> float | None:
    """The largest of ``values`` over their mean; None without values or without load."""
    if not values:
        return None
    mean = sum(values.values()) / len(values)
    return max(values.values()) / mean if mean > 0 else None


def fleet_figures(run: Mapping[str, Any]) -> dict[str, float]:
    """A report run's ``fleet.*`` figures, each where the run can say it."""
    fleet = run.get("fleet") or {}
    pages = [
        (str(p.get("role")), str(p.get("name")))
        for p in fleet.get("pages") or ()
        if isinstance(p, Mapping)
    ]
    serving = serving_pages(pages)
    attributed = {
        str(name): float((entry.get("counts") or {}).get("completed") or 0)
        for name, entry in (run.get("by_replica") or {}).items()
        if isinstance(entry, Mapping)
    }
    out: dict[str, float] = {}
    counts, _ = replica_requests(attributed, serving, fleet.get("requests") or {})
    if (value := imbalance(counts)) is not None:
        out["fleet.imbalance"] = value
    running = {
        str(p.get("name")): _stat(p.get("server_metrics"), "server.running", "mean")
        for p in fleet.get("pages") or ()
        if isinstance(p, Mapping)
    }
    if (value := imbalance(busy_by_page(running, serving))) is not None:
        out["fleet.busy_imbalance"] = value
    hit = fleet.get("prefix_hit_rate")
    if hit is None:
        hit = _stat(run.get("server_metrics"), "server.prefix_cache_hit_rate", "value")
    if hit is not None and not math.isnan(hit):
        out["fleet.prefix_hit_rate"] = float(hit)
    return out


def run_metrics_with_fleet(run: Mapping[str, Any]) -> dict[str, Any]:
    """What a history keeps of a run: :func:`run_metrics_with_server`'s (the client's
    metrics and the server's ``server.*``) and, for a fleet, ``fleet.imbalance`` /
    ``fleet.busy_imbalance`` / ``fleet.prefix_hit_rate`` (``{"value": x}``), each pool's
    ``<pool>.<name>`` statistics (``decode.kv_cache_usage: {"max", ...}``) and each replica's
    client metrics as ``replica[NAME].<metric>`` (``replica[0].ttft: {"p99", ...}``); a
    single server's run gets nothing more."""
    out = run_metrics_with_server(run)
    for name, value in fleet_figures(run).items():
        out.setdefault(name, {"value": round(value, 6)})
    roles = (run.get("fleet") or {}).get("roles") or {}
    for pool in POOL_SCOPES:
        metrics = (roles.get(pool) or {}).get("metrics") or {}
        for name, stats in metrics.items():
            if str(name).startswith("server.") and isinstance(stats, Mapping):
                out.setdefault(f"{pool}.{str(name)[len('server.') :]}", dict(stats))
    for replica, entry in (run.get("by_replica") or {}).items():
        for name, value in ((entry or {}).get("metrics") or {}).items():
            key = f"{REPLICA_SCOPE}[{replica}].{name}"
            out.setdefault(key, dict(value) if isinstance(value, Mapping) else value)
    return out


def _stat(view: Any, name: str, stat: str) -> float | None:
    """``view["metrics"][name][stat]`` of a report's server metrics dict, None if absent."""
    if not isinstance(view, Mapping):
        return None
    entry = (view.get("metrics") or {}).get(name)
    value = entry.get(stat) if isinstance(entry, Mapping) else None
    return None if value is None else float(value)
