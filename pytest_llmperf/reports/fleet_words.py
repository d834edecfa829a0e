"""A fleet run in words and cells: the terminal's block, the Markdown tables and the HTML
report's rows (JUnit's properties: :mod:`.fleet_junit`), all from
:func:`~.fleet_view.fleet_view`.

Each figure is formatted once here (client latencies with
:func:`~pytest_llmperf.reports.table.format_value`, the server's with its unit, a
bucket-bounded statistic as ``≤ 50.0 ms``), so every report says the same number. A run
without a fleet gets nothing from any of these (``[]``, ``""``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.gfm import details, table, text
from pytest_llmperf.reports.fleet_view import (
    FleetView,
    PoolRow,
    ReplicaRow,
    fleet_view,
    pool_verdicts,
    replica_mark,
    server_stat,
    worst_mark,
)
from pytest_llmperf.reports.line_breaks import fit, wrap_parts
from pytest_llmperf.reports.table import MARKS, format_value
from pytest_llmperf.reports.time_split import format_server_value

__all__ = [
    "POOL_HEADER",
    "REPLICA_HEADER",
    "bound_cell",
    "fleet_figures",
    "fleet_lines",
    "fleet_markdown",
    "pool_cells",
    "ratio_cell",
    "replica_cells",
    "server_cell",
]

# client columns, then the page's (server) columns
REPLICA_HEADER = (
    "replica",
    "role",
    "ok/issued",
    "errors",
    "TTFT p50",
    "TTFT p99",
    "E2E p99",
    "server requests",
    "queue p99",
    "KV max",
    "prefix hits",
    "preemptions",
)
POOL_HEADER = (
    "pool",
    "pages",
    "requests",
    "queue p99",
    "server TTFT p99",
    "KV max",
    "prefix hits",
    "preemptions",
    "KV transfer p99",
)


def bound_cell(server: Mapping[str, Any] | None, name: str, stat: str) -> str:
    """A server latency statistic: ``≤ 50.0 ms`` where it is a bucket's upper bound
    (``{stat}_lo`` beside it), ``21.5 ms`` where exact, ``-`` when absent."""
    entry = ((server or {}).get("metrics") or {}).get(name)
    if not isinstance(entry, Mapping) or not entry.get("count") or entry.get(stat) is None:
        return "-"
    figure = format_value(float(entry[stat]), "ms")
    return f"≤ {figure}" if entry.get(f"{stat}_lo") is not None else figure


def server_cell(server: Mapping[str, Any] | None, name: str, stat: str = "value") -> str:
    return format_server_value(name, server_stat(server, name, stat))


def _client_ms(row: ReplicaRow, metric: str, stat: str) -> str:
    entry = ((row.client or {}).get("metrics") or {}).get(metric)
    return format_value(entry.get(stat) if isinstance(entry, Mapping) else None, "ms")


def replica_cells(row: ReplicaRow) -> list[str]:
    """A replica's cells under :data:`REPLICA_HEADER` (plain text): ``-`` for the client's
    columns of a replica no response named, and the page's of a replica without a page."""
    if row.client is not None:
        counts = row.client.get("counts") or {}
        rate = (row.client.get("metrics") or {}).get("error_rate")
        client = [
            f"{counts.get('completed', 0)}/{counts.get('issued', 0)}",
            format_value(rate, "fraction"),
            _client_ms(row, "ttft", "p50"),
            _client_ms(row, "ttft", "p99"),
            _client_ms(row, "e2e", "p99"),
        ]
    else:
        client = ["not attributed", "-", "-", "-", "-"]
    server = row.server
    return [
        row.name,
        row.role or "(no page)",
        *client,
        server_cell(server, "server.requests"),
        bound_cell(server, "server.queue_time", "p99"),
        server_cell(server, "server.kv_cache_usage", "max"),
        server_cell(server, "server.prefix_cache_hit_rate"),
        server_cell(server, "server.preemptions"),
    ]


def pool_cells(pool: PoolRow) -> list[str]:
    """A pool's cells under :data:`POOL_HEADER`."""
    s = pool.server
    return [
        pool.role,
        str(pool.pages),
        server_cell(s, "server.requests"),
        bound_cell(s, "server.queue_time", "p99"),
        bound_cell(s, "server.ttft", "p99"),
        server_cell(s, "server.kv_cache_usage", "max"),
        server_cell(s, "server.prefix_cache_hit_rate"),
        server_cell(s, "server.preemptions"),
        bound_cell(s, "server.kv_transfer", "p99"),
    ]


def ratio_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _kv_words(view: FleetView) -> str:
    kv = {"metrics": {"server.kv_transfer": view.kv_transfer}}
    n = int((view.kv_transfer or {}).get("count") or 0)
    return (
        f"KV transfer p50 {bound_cell(kv, 'server.kv_transfer', 'p50')}, "
        f"p99 {bound_cell(kv, 'server.kv_transfer', 'p99')} (n={n})"
    )


def _unattributed_words(view: FleetView, issued: int) -> str:
    """``""`` when every request was attributed."""
    if not view.attributed:
        return (
            "not attributed: no response named the replica that served it "
            "(--llm-replica-header); the client's figures are the fleet's as one"
        )
    if view.unattributed:
        return f"not attributed: {view.unattributed} of {issued} request(s) named no replica"
    return ""


def fleet_figures(run: Mapping[str, Any]) -> list[str]:
    """The fleet's figures, one sentence each (the Markdown list's and the HTML
    report's): replicas and pages, imbalance, busy imbalance, prefix hits, KV transfer,
    what is not attributed, how the pages were found; none without a fleet."""
    view = fleet_view(run)
    if view is None:
        return []
    issued = int((run.get("counts") or {}).get("issued") or 0)
    said = _members(view)
    if view.pages:
        said += f", {view.pages} /metrics page(s)"
    out = [said + (f" (discovered: {view.discovered})" if view.discovered else "")]
    if view.imbalance is not None:
        out.append(
            f"fleet.imbalance {ratio_cell(view.imbalance)}: completed requests per replica, "
            f"max over mean ({view.imbalance_source})"
        )
    if view.busy_imbalance is not None:
        out.append(
            f"fleet.busy_imbalance {ratio_cell(view.busy_imbalance)}: each serving page's mean "
            "running requests, max over mean"
        )
    if view.prefix_hit_rate is not None:
        hits = format_server_value("server.prefix_cache_hit_rate", view.prefix_hit_rate)
        out.append(f"fleet.prefix_hit_rate {hits}: prefix-cache hits over lookups, all pages")
    if view.kv_transfer is not None:
        out.append(_kv_words(view) + " (prefill to decode, bucket-bounded)")
    if words := _unattributed_words(view, issued):
        out.append(words)
    return out


def _members(view: FleetView) -> str:
    """``2 replica(s)``, ``1 prefill, 2 decode``: the rows by role."""
    roles: dict[str, int] = {}
    for row in view.rows:
        role = row.role or "replica"
        roles[role] = roles.get(role, 0) + 1
    said = [f"{n} replica(s)" if r == "replica" else f"{n} {r}" for r, n in roles.items()]
    return ", ".join(said) or "0 replica(s)"


def _replica_parts(row: ReplicaRow, mark: str) -> list[str]:
    """A replica's terminal line as comma-separated parts (its verdicts' worst first)."""
    head = f"{row.role or 'replica'} {row.name}" + ("" if row.server is not None else " (no page)")
    if mark:
        head = f"{MARKS.get(mark, '')} {head}"
    parts: list[str] = []
    if row.client is not None:
        counts = row.client.get("counts") or {}
        parts += [
            f"{head}: {counts.get('issued', 0)} req",
            f"{counts.get('failed', 0)} failed",
            f"ttft p99 {_client_ms(row, 'ttft', 'p99')}",
            f"e2e p99 {_client_ms(row, 'e2e', 'p99')}",
        ]
    else:
        parts.append(f"{head}: not attributed")
        if (n := server_stat(row.server, "server.requests", "value")) is not None:
            parts.append(f"page: {format_server_value('server.requests', n)} req")
    server = row.server
    if server is not None and not (server.get("metrics") or {}):
        parts.append(f"page: no numbers ({server.get('missing') or 'none exported'})")
    elif server is not None:
        for name, stat, word in (
            ("server.queue_time", "p99", "queue p99"),
            ("server.kv_cache_usage", "max", "KV max"),
            ("server.prefix_cache_hit_rate", "value", "prefix hits"),
            ("server.preemptions", "value", "preemptions"),
        ):
            if name == "server.queue_time":
                if (cell := bound_cell(server, name, stat)) != "-":
                    parts.append(f"{word} {cell}")
            elif server_stat(server, name, stat) is not None:
                parts.append(f"{word} {server_cell(server, name, stat)}")
    return parts


def fleet_lines(
    run: Mapping[str, Any], slos: Sequence[Mapping[str, Any]], width: int | None
) -> list[str]:
    """The terminal's fleet block of a run (``[]`` without a fleet)::

    fleet [run0]: 2 replica(s), 2 page(s), imbalance 1.10, prefix hits 41.0%
      ✗ replica 0: 60 req, 0 failed, ttft p99 45.0 ms, e2e p99 310.0 ms,
        queue p99 ≤ 50.0 ms, KV max 80.0%, prefix hits 40.0%, preemptions 0
      not attributed: 3 of 120 request(s) named no replica
    """
    view = fleet_view(run)
    if view is None:
        return []
    label = view.label
    issued = int((run.get("counts") or {}).get("issued") or 0)
    head = [f"fleet [{label}]: {_members(view)}"]
    if view.pages:
        head.append(f"{view.pages} page(s)")
    if view.imbalance is not None:
        head.append(f"imbalance {ratio_cell(view.imbalance)}")
    if view.busy_imbalance is not None:
        head.append(f"busy imbalance {ratio_cell(view.busy_imbalance)}")
    if view.prefix_hit_rate is not None:
        hits = format_server_value("server.prefix_cache_hit_rate", view.prefix_hit_rate)
        head.append(f"prefix hits {hits}")
    if view.kv_transfer is not None:
        head.append(_kv_words(view))
    lines = wrap_parts(head, width)
    for row in view.rows:
        parts = _replica_parts(row, replica_mark(slos, label, row.name))
        lines += wrap_parts(parts, width, indent="      ")
    if words := _unattributed_words(view, issued):
        lines += fit(f"      {words}", width)
    if len(view.pools) > 1:  # a router, or prefill and decode pools: each pool in a line
        for pool in view.pools:
            cells = dict(zip(POOL_HEADER, pool_cells(pool), strict=True))
            mark = worst_mark(pool_verdicts(slos, label, pool.role))
            lead = f"{MARKS.get(mark, '')} " if mark else ""
            parts = [f"{lead}pool {pool.role} ({pool.pages} page(s)): requests {cells['requests']}"]
            parts += [f"{k} {v}" for k, v in cells.items() if k not in _POOL_SAID and v != "-"]
            lines += wrap_parts(parts, width, indent="      ")
    for note in view.notes:  # a sentence: wrapped at its spaces
        said = f"    ! fleet [{label}]: {note}"
        lines += [said] if width is None else textwrap.wrap(said, width, subsequent_indent=" " * 8)
    return lines


_POOL_SAID = ("pool", "pages", "requests")


def fleet_markdown(nodeid: str, run: Mapping[str, Any], slos: Sequence[Mapping[str, Any]]) -> str:
    """The Markdown block of a run's fleet: its figures, the per-replica table (with each
    replica's verdict where SLOs judged it alone), the per-pool table and the notes,
    collapsed under a summary (open when ``slos`` has a failure); ``""`` without a fleet."""
    view = fleet_view(run)
    if view is None:
        return ""
    label = view.label
    out = [f"- {text(line)}" for line in fleet_figures(run)]
    rows = []
    for row in view.rows:
        mark = replica_mark(slos, label, row.name)
        rows.append([text(c) for c in replica_cells(row)] + [_md_mark(mark)])
    if rows:
        out += ["", table((*REPLICA_HEADER, "verdict"), rows, right=range(2, 12)).rstrip()]
    if view.pools:
        pools = [
            [text(c) for c in pool_cells(p)]
            + [_md_mark(worst_mark(pool_verdicts(slos, label, p.role)))]
            for p in view.pools
        ]
        out += ["", table((*POOL_HEADER, "verdict"), pools, right=range(1, 9)).rstrip()]
    out += [f"\n> {text(note)}" for note in view.notes]
    failed = any(str(v.get("verdict")) == "fail" for v in slos if v.get("run") == label)
    summary = f"Fleet: {nodeid} [{label}]: {_members(view)}"
    if view.imbalance is not None:
        summary += f", imbalance {ratio_cell(view.imbalance)}"
    return details(summary, "\n".join(out), open_=failed)


def _md_mark(mark: str) -> str:
    return {"pass": "✅ pass", "fail": "❌ fail", "inconclusive": "⚠️ inconclusive"}.get(mark, "-")
