"""A fleet run as every report reads it: the client's requests by the replica that served
them (``runs[].by_replica``) joined with each ``/metrics`` page of the same name
(``runs[].fleet.pages``), each role's pool (``runs[].fleet.roles``) and the fleet's
figures (imbalance, prefix-cache hit rate, KV transfer).

Why a join by name: the client knows which replica served each request only where a
response header says so (``RequestRecord.replica``), and the server's view of that
replica is its own page; a page is named as the header names its replica
(docs/fleets.md), so the two meet in one row. A page the client never saw named (no
attribution, or a header that names replicas otherwise) keeps its server columns only;
a replica the client saw without a page keeps its client columns only. Nothing is
guessed: a column the run does not have is ``-``.

The terminal, Markdown, HTML and JUnit reports (:mod:`.fleet_words`, :mod:`.fleet_plots`,
:mod:`.fleet_junit`) all read :func:`fleet_view`, so they agree. A run with neither
``by_replica`` nor ``fleet`` has no view (None), and every report prints what it printed
before fleets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.results.fleet_figures import CLIENT_SOURCE, PAGES_SOURCE, fleet_figures
from pytest_llmperf.specs.fleet_names import KV_TRANSFER, POOL_SCOPES, PageRole

__all__ = [
    "FleetView",
    "PoolRow",
    "ReplicaRow",
    "fleet_view",
    "has_fleet",
    "pool_verdicts",
    "replica_mark",
    "replica_verdicts",
    "server_stat",
    "verdict_replica",
    "worst_mark",
]


@dataclass(frozen=True)
class ReplicaRow:
    """One replica (or prefill/decode engine): its name, the role of its page (``""``:
    no page), the client's block for it (``{"counts", "metrics"}``; None: the client
    attributed no request to it) and its page's ``server_metrics`` (None: no page)."""

    name: str
    role: str
    client: Mapping[str, Any] | None
    server: Mapping[str, Any] | None

    def issued(self) -> int | None:
        """The client's requests sent to this replica (None: not attributed)."""
        if self.client is None:
            return None
        return int((self.client.get("counts") or {}).get("issued") or 0)

    def requests(self) -> float | None:
        """Requests to this replica: the client's where attributed, else the page's own
        ``server.requests`` (None: neither)."""
        issued = self.issued()
        if issued is not None:
            return float(issued)
        return server_stat(self.server, "server.requests", "value")


@dataclass(frozen=True)
class PoolRow:
    """One role's pages together (``runs[].fleet.roles[role]``) and how many pages."""

    role: str
    pages: int
    server: Mapping[str, Any]


@dataclass(frozen=True)
class FleetView:
    """A run's fleet: replica rows in the pages' order (then replicas without a page, in
    natural order), the pools, the figures said of the fleet as one, and what is
    unattributed."""

    label: str
    rows: tuple[ReplicaRow, ...]
    pools: tuple[PoolRow, ...]
    attributed: bool  # the client attributed some request to a replica
    unattributed: int  # the run's requests no response named a replica for
    pages: int  # /metrics pages read (0: client attribution only)
    # the fleet.* figures, as results/fleet_figures.py computes them for the verdicts
    imbalance: float | None  # max over mean of completed requests per replica
    imbalance_source: str  # where those counts come from (CLIENT_SOURCE, PAGES_SOURCE)
    busy_imbalance: float | None  # max over mean of each serving page's mean running
    prefix_hit_rate: float | None
    kv_transfer: Mapping[str, Any] | None  # the fleet's server.kv_transfer statistics
    discovered: str | None
    notes: tuple[str, ...] = field(default=())

    @property
    def replicas(self) -> tuple[ReplicaRow, ...]:
        """The rows of whole replicas (role ``replica`` or no page): what imbalance is
        over. A disaggregated fleet's prefill and decode engines are in :attr:`rows`
        too, each with its role."""
        return tuple(r for r in self.rows if r.role in ("", PageRole.REPLICA.value))


# the client's block of a replica with a page that no response named, where every replica
# the responses named has a page (so the names join): it served none of the run's requests
_NONE_SERVED: Mapping[str, Any] = {"counts": {"issued": 0, "completed": 0, "failed": 0}}


def has_fleet(run: Mapping[str, Any]) -> bool:
    """Does ``run`` have a per-replica breakdown or a list of pages?"""
    return bool(run.get("by_replica")) or bool((run.get("fleet") or {}).get("pages"))


def server_stat(server: Mapping[str, Any] | None, name: str, stat: str) -> float | None:
    """``server["metrics"][name][stat]`` as a float, None when absent."""
    entry = ((server or {}).get("metrics") or {}).get(name)
    value = entry.get(stat) if isinstance(entry, Mapping) else None
    return None if value is None else float(value)


def _natural(name: str) -> tuple[Any, ...]:
    """``"2"`` before ``"10"``; ``"w2"`` before ``"w10"``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _client_blocks(run: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    by_replica = run.get("by_replica")
    if not isinstance(by_replica, Mapping):
        return {}
    return {str(k): v for k, v in by_replica.items() if isinstance(v, Mapping)}


def fleet_view(run: Mapping[str, Any]) -> FleetView | None:
    """The run's fleet, or None for a run with neither ``by_replica`` nor pages."""
    if not has_fleet(run):
        return None
    blocks = _client_blocks(run)
    unnamed = blocks.pop("", None)  # requests the responses named no replica for
    fleet = run.get("fleet") or {}
    pages = [p for p in fleet.get("pages") or () if isinstance(p, Mapping)]
    rows: list[ReplicaRow] = []
    seen: set[str] = set()
    # every replica a response named has a page: a page of the same role none named
    # served no request (a prefill engine, where the header names the decode engine that
    # answered, is not attributed: the client cannot tell which prefilled a request)
    role_of = {str(p.get("name") or ""): str(p.get("role") or "") for p in pages}
    joined = bool(blocks) and set(blocks) <= set(role_of)
    named_roles = {role_of[name] for name in blocks} if joined else set()
    for page in pages:
        role, name = str(page.get("role") or ""), str(page.get("name") or "")
        if role == PageRole.ROUTER.value or name in seen:
            continue  # a router serves no request itself: its page is in the pools
        seen.add(name)
        mine = blocks.get(name) or (_NONE_SERVED if role in named_roles else None)
        rows.append(ReplicaRow(name, role, mine, page.get("server_metrics") or {}))
    for name in sorted(set(blocks) - seen, key=_natural):
        rows.append(ReplicaRow(name, "", blocks[name], None))
    counts = run.get("counts") or {}
    issued = int(counts.get("issued") or 0)
    unattributed = counts.get("replica_unattributed")  # results/accumulator.py's count
    if unattributed is None:
        unattributed = max(0, issued - sum(r.issued() or 0 for r in rows)) if blocks else issued
    if unnamed is not None:
        unattributed = max(int(unattributed), int((unnamed.get("counts") or {}).get("issued") or 0))
    view_rows = tuple(rows)
    figures = fleet_figures(run)  # as the fleet.* verdicts judge them
    roles = fleet.get("roles") or {}
    pools = tuple(
        PoolRow(str(role), sum(1 for p in pages if p.get("role") == role), server)
        for role, server in roles.items()
        if isinstance(server, Mapping)
    )
    whole = (run.get("server_metrics") or {}).get("metrics") or {}
    kv = whole.get(KV_TRANSFER)
    return FleetView(
        label=str(run.get("label") or ""),
        rows=view_rows,
        pools=pools,
        attributed=bool(blocks),
        unattributed=unattributed,
        pages=len(pages),
        imbalance=figures.get("fleet.imbalance"),
        imbalance_source=CLIENT_SOURCE if blocks else PAGES_SOURCE,
        busy_imbalance=figures.get("fleet.busy_imbalance"),
        prefix_hit_rate=figures.get("fleet.prefix_hit_rate"),
        kv_transfer=kv if isinstance(kv, Mapping) and kv.get("count") else None,
        discovered=fleet.get("discovered"),
        notes=tuple(str(n) for n in fleet.get("notes") or ()),
    )


def verdict_replica(v: Mapping[str, Any]) -> str:
    """The replica a verdict dict was judged on alone (``replica.ttft.p99 < 500ms``,
    judged on each replica's requests); ``""`` for a whole run's."""
    return str(v.get("replica") or "")


def replica_verdicts(
    slos: Sequence[Mapping[str, Any]], label: str, name: str
) -> list[Mapping[str, Any]]:
    """The verdict dicts judged on replica ``name`` of run ``label`` alone."""
    return [v for v in slos if str(v.get("run") or "") == label and verdict_replica(v) == name]


def pool_verdicts(
    slos: Sequence[Mapping[str, Any]], label: str, role: str
) -> list[Mapping[str, Any]]:
    """The verdict dicts of run ``label`` on pool ``role`` (``prefill.queue_time.p99 <
    50ms``: a router, prefill or decode pool's pages together)."""
    if role not in POOL_SCOPES:
        return []
    return [
        v
        for v in slos
        if str(v.get("run") or "") == label and str(v.get("expr") or "").startswith(f"{role}.")
    ]


def worst_mark(verdicts: Sequence[Mapping[str, Any]]) -> str:
    """The worst of ``verdicts`` (``fail``, ``inconclusive``, ``pass``); ``""`` for none."""
    said = {str(v.get("verdict")) for v in verdicts}
    return next((w for w in ("fail", "inconclusive", "pass") if w in said), "")


def replica_mark(slos: Sequence[Mapping[str, Any]], label: str, name: str) -> str:
    """The worst of a replica's verdicts (``fail``, ``inconclusive``, ``pass``); ``""``
    when none judged it alone."""
    return worst_mark(replica_verdicts(slos, label, name))
