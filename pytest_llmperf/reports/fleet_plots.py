"""A fleet run's charts for the HTML report: per-replica bars (requests, TTFT p99) and each
page's gauges on the run's time axis (requests running, KV-cache usage), one line per page.

The bars are horizontal, a replica per row with its name on the left: replica names are
words (``0``, ``w1``, ``10.0.0.7:8001``), not numbers on an axis, and a slow replica reads
as the longest bar. The time series reuse :func:`~pytest_llmperf.svg.line_chart`, as the
single page's do (:func:`~.plots.server_series_plots`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from html import escape
from typing import Any

from pytest_llmperf.reports.fleet_view import FleetView, ReplicaRow
from pytest_llmperf.reports.plots import run_timeline, series_points, stage_bands
from pytest_llmperf.svg import PALETTE, Series, nice_ticks, tick_labels

__all__ = ["fleet_plots", "page_series_plots", "replica_bars"]

# geometry: the bars' rows, the name column on the left
_W, _LEFT, _RIGHT, _TOP, _ROW = 420, 110, 56, 28, 20


def replica_bars(
    rows: Sequence[tuple[str, float | None]],
    *,
    title: str,
    unit: str,
    kind: str,
    failed: Collection[str] = (),
) -> str:
    """Horizontal bars, one per ``(name, value)`` (None: no bar, ``-`` beside the name);
    each bar says its value at its end and on hover; a replica in ``failed`` (a verdict
    on it alone failed) is drawn red."""
    values = [v for _, v in rows if v is not None and math.isfinite(v)]
    height = _TOP + _ROW * max(1, len(rows)) + 34
    out = [
        f'<svg class="plot" data-kind="{escape(kind)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {_W} {height}" width="{_W}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{_W / 2}" y="16" text-anchor="middle" class="plot-title">{escape(title)}</text>',
    ]
    if not values or max(values) <= 0:
        out.append(
            f'<text x="{_W / 2}" y="{height / 2}" text-anchor="middle" class="empty">no data</text>'
        )
        return "\n".join([*out, "</svg>"])
    ticks = nice_ticks(0.0, max(values), 4)
    top = max(max(values), ticks[-1])
    span = _W - _LEFT - _RIGHT
    bottom = _TOP + _ROW * len(rows)

    def x(value: float) -> float:
        return _LEFT + value / top * span

    for t, label in zip(ticks, tick_labels(ticks), strict=True):
        out.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{_TOP}" y2="{bottom}" class="grid"/>'
        )
        out.append(
            f'<text x="{x(t):.1f}" y="{bottom + 13}" text-anchor="middle" class="tick" '
            f'data-axis="x">{label}</text>'
        )
    out.append(
        f'<text x="{_LEFT + span / 2}" y="{bottom + 27}" text-anchor="middle" '
        f'class="axis-label">{escape(unit)}</text>'
    )
    for i, (name, value) in enumerate(rows):
        y = _TOP + _ROW * i + 3
        bar = _ROW - 6
        short = name if len(name) <= 18 else name[:17] + "…"
        out.append(
            f'<text x="{_LEFT - 6}" y="{y + bar / 2 + 4}" text-anchor="end" class="tick">'
            f"<title>{escape(name)}</title>{escape(short)}</text>"
        )
        if value is None or not math.isfinite(value):
            out.append(f'<text x="{_LEFT + 4}" y="{y + bar / 2 + 4}" class="tick">-</text>')
            continue
        said = f"{value:.4g}"
        out.append(
            f'<rect class="bar" data-replica="{escape(name)}" x="{_LEFT}" y="{y}" '
            f'width="{max(0.6, x(value) - _LEFT):.1f}" height="{bar}" '
            f'fill="{PALETTE[1] if name in failed else PALETTE[0]}">'
            f"<title>{escape(f'{name}: {said} {unit}')}</title></rect>"
        )
        out.append(f'<text x="{x(value) + 4:.1f}" y="{y + bar / 2 + 4}" class="tick">{said}</text>')
    out.append(f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{bottom}" class="axis"/>')
    return "\n".join([*out, "</svg>"])


def _ttft_p99(row: ReplicaRow) -> float | None:
    entry = ((row.client or {}).get("metrics") or {}).get("ttft")
    value = entry.get("p99") if isinstance(entry, Mapping) else None
    return None if value is None else float(value)


def page_series_plots(view: FleetView, *, stages: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    """Each page's ``server.running`` and ``server.kv_cache_usage`` samples on the run's
    time axis (seconds since the run started), a line per page; none without series."""
    bands = stage_bands(stages)
    charts = []
    for metric, scale, title, y_label, y_range in (
        ("server.running", 1.0, "requests running, per page", "requests", None),
        ("server.kv_cache_usage", 100.0, "KV-cache usage, per page", "% of KV cache", (0.0, 100.0)),
    ):
        series = [
            Series(f"{row.role} {row.name}", pts)
            for row in view.rows
            if (pts := series_points(row.server, metric, scale))
        ]
        chart = run_timeline(
            series,
            title=title,
            y_label=y_label,
            kind="fleet-timeline",
            y_range=y_range,
            bands=bands,
        )
        if chart is not None:
            charts.append(chart)
    return charts


def fleet_plots(
    view: FleetView, *, stages: Sequence[Mapping[str, Any]] = (), failed: Collection[str] = ()
) -> list[str]:
    """The fleet's charts: requests and TTFT p99 per replica (bars; requests from the
    client where attributed, else the page's ``server.requests``; the replicas in
    ``failed`` red), then each page's gauges over the run."""
    rows = [r for r in view.rows if r.requests() is not None or r.client is not None]
    charts = []
    if rows:
        clients = sum(r.client is not None for r in rows)
        whose = (
            "client"
            if clients == len(rows)
            else "server.requests"
            if not clients
            else ("client, else the page's count")
        )
        charts.append(
            replica_bars(
                [(r.name, r.requests()) for r in rows],
                title=f"requests per replica ({whose})",
                unit="requests",
                kind="replica-requests",
                failed=failed,
            )
        )
    if view.attributed:
        charts.append(
            replica_bars(
                [(r.name, _ttft_p99(r)) for r in view.rows if r.client is not None],
                title="TTFT p99 per replica (client)",
                unit="ms",
                kind="replica-ttft",
                failed=failed,
            )
        )
    return charts + page_series_plots(view, stages=stages)
