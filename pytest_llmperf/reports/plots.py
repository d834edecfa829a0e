"""The report's charts, from measurements to SVG (drawing itself is in :mod:`.svg`).

Latency CDFs and histograms come from the lossless HDR states, not from the
summary percentiles, so the plots show the whole distribution; throughput
and latency over time from the accumulator's per-second timeline (a staged
run's stages drawn as bands); latency-vs-load from
a test's several runs; tests' attached ``curve`` analyses are drawn
generically; a metric's history (``--llm-history``) with its change points; the
server's gauges over the run (``--llm-server-metrics``: KV-cache usage, requests
running and waiting) and the client's TTFT split into the server's parts as
stacked bars; a run's conversations, its TTFT and prefix-cache hit by turn band.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.reports.table import stage_level
from pytest_llmperf.reports.time_split import TimeSplit
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.svg import (
    PALETTE,
    Band,
    Series,
    bar_chart,
    line_chart,
    nice_ticks,
    tick_labels,
)

__all__ = [
    "PLOTTED_METRICS",
    "analysis_curve",
    "cdf_plot",
    "histogram_bins",
    "histogram_plot",
    "latency_timeline",
    "latency_timeline_plots",
    "latency_vs_load_plot",
    "run_timeline",
    "server_series_plots",
    "stage_bands",
    "throughput_plots",
    "ttft_split_plot",
    "turn_band_plots",
]

PLOTTED_METRICS = ("ttft", "tpot", "itl", "e2e")
_NAMES = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2e": "E2E latency",
    "schedule_lag": "schedule lag",
    "queue_wait": "queue wait",
}


def cdf_plot(hist: LatencyHistogram, metric: str) -> str:
    """Cumulative share of requests (%) at or under each latency."""
    points = [(0.0, 0.0)] if hist.count else []
    points += [(x, y * 100) for x, y in hist.cdf_points(300)]
    if len(points) > 1:
        points[0] = (points[1][0], 0.0)
    title = f"{_NAMES.get(metric, metric)} CDF (n={hist.count})"
    return line_chart(
        [Series(metric, points)],
        title=title,
        x_label="ms",
        y_label="% of samples ≤ x",
        kind="cdf",
        y_range=(0.0, 100.0),
        step=True,
    )


def histogram_bins(
    hist: LatencyHistogram, bins: int = 40
) -> tuple[list[tuple[float, float, float]], bool]:
    """Linear bins from min to max (or to p99.9 when the tail would squash the plot).

    Returns ``(bins, clipped)``; counts beyond a clipped range go in the last bin.
    """
    points = hist.cdf_points(1 << 30)
    if not points:
        return [], False
    low = hist.min
    high = hist.max
    p999 = hist.p(99.9)
    clipped = high > 3 * max(p999, 1e-9) and hist.count >= 1000
    if clipped:
        high = p999
    if high <= low:
        return [(low, low + max(low * 0.01, 0.001), float(hist.count))], False
    width = (high - low) / bins
    counts = [0.0] * bins
    previous = 0.0
    for value, share in points:
        n = (share - previous) * hist.count
        previous = share
        index = min(bins - 1, max(0, int((value - low) / width)))
        counts[index] += n
    return [
        (low + i * width, low + (i + 1) * width, round(c)) for i, c in enumerate(counts)
    ], clipped


def histogram_plot(hist: LatencyHistogram, metric: str) -> str:
    bins, clipped = histogram_bins(hist)
    title = f"{_NAMES.get(metric, metric)} histogram" + (" (to p99.9)" if clipped else "")
    return bar_chart(bins, title=title, x_label="ms", y_label="samples")


def series_points(
    server: Mapping[str, Any] | None, name: str, scale: float = 1.0
) -> list[tuple[float, float]]:
    """A server metrics view's gauge ``series[name]`` as plot points (``value × scale``),
    the malformed or non-finite samples of a report read back from JSON left out."""
    out = []
    for pair in ((server or {}).get("series") or {}).get(name) or ():
        try:
            t, v = float(pair[0]), float(pair[1])
        except (TypeError, ValueError, IndexError):
            continue
        if math.isfinite(t) and math.isfinite(v):
            out.append((t, v * scale))
    return out


def run_timeline(
    series: Sequence[Series],
    *,
    title: str,
    y_label: str,
    kind: str,
    y_range: tuple[float, float] | None = None,
    bands: Sequence[Band] = (),
) -> str | None:
    """A gauge of each part of a deployment (a page, a GPU) over one run, on the run's time
    axis (None: no series with points): markers where the points are few."""
    if not series:
        return None
    return line_chart(
        list(series),
        title=title,
        x_label="s since the run started",
        y_label=y_label,
        kind=kind,
        y_range=y_range,
        markers=max(len(s.points) for s in series) < 30,
        bands=bands,
    )


def stage_bands(stages: Sequence[Mapping[str, Any]]) -> list[Band]:
    """A staged run's ``run["stages"]`` as bands on a time axis.

    Stage times count from the first stage's start, the timeline's seconds
    from the first tracked planned send: for an open loop the two differ by
    the first arrival's gap (under a second at any rate worth plotting).
    """
    out = []
    for stage in stages:
        start = float(stage.get("start_s") or 0.0)
        level = stage_level(stage)
        short = level.replace(" req/s", "/s").replace("concurrency ", "c=")
        out.append(
            Band(
                start,
                start + float(stage.get("duration_s") or 0.0),
                label=short,
                short=str(stage.get("index", "")),
                title=f"stage {stage.get('index')}: {level}",
            )
        )
    return out


def steady_band(window: Mapping[str, Any] | None) -> list[Band]:
    """A run's steady-state window (``run["steady"]``) as a green band on its time axis
    (seconds from the first tracked send, as the timeline's); none without one."""
    if not window or window.get("start_s") is None or window.get("end_s") is None:
        return []
    start, end = float(window["start_s"]), float(window["end_s"])
    title = (
        f"steady-state window {start:.1f}-{end:.1f} s: {window.get('requests_in', 0)} "
        f"requests in, {window.get('requests_out', 0)} out (throughput over it)"
    )
    return [Band(start, end, label="steady", title=title, fill="#2e9e5b")]


def throughput_plots(
    acc: MetricsAccumulator,
    *,
    stages: Sequence[Mapping[str, Any]] = (),
    steady: Mapping[str, Any] | None = None,
) -> list[str]:
    """Completed requests and output tokens per second of the run's window.

    ``stages`` (a staged run's ``run["stages"]``) are drawn as bands, and the
    steady-state window (``run["steady"]``) as a green one over them.
    """
    if not acc.timeline:
        return [
            line_chart(
                [], title="throughput over time", x_label="s", y_label="tok/s", kind="timeline"
            )
        ]
    last = max(acc.timeline)
    seconds = range(last + 1)
    tokens = [(s + 0.5, float(acc.timeline[s][1] if s in acc.timeline else 0)) for s in seconds]
    requests = [(s + 0.5, float(acc.timeline[s][0] if s in acc.timeline else 0)) for s in seconds]
    bands = [*stage_bands(stages), *steady_band(steady)]
    return [
        line_chart(
            [Series("output tok/s", tokens)],
            title="output tokens per second",
            x_label="s since first planned send",
            y_label="tok/s",
            kind="timeline",
            markers=len(tokens) < 30,
            bands=bands,
        ),
        line_chart(
            [Series("completed req/s", requests)],
            title="completed requests per second",
            x_label="s since first planned send",
            y_label="req/s",
            kind="timeline",
            markers=len(requests) < 30,
            bands=bands,
        ),
    ]


def latency_timeline(acc: MetricsAccumulator) -> dict[str, list[tuple[float, float]]]:
    """Per second of the window (by completion), in ms: ``ttft mean``, ``ttft max`` and
    ``tpot mean``; seconds with no completion, or no latency recorded, have no point."""
    out: dict[str, list[tuple[float, float]]] = {"ttft mean": [], "ttft max": [], "tpot mean": []}
    for second in sorted(acc.timeline):
        done, _, ttft_sum, ttft_max, tpot_sum, tpot_n = acc.timeline[second][:6]
        x = second + 0.5
        if done and ttft_max:  # an old state (no latency fields) reads 0
            out["ttft mean"].append((x, ttft_sum / done / 1e6))
            out["ttft max"].append((x, ttft_max / 1e6))
        if tpot_n:
            out["tpot mean"].append((x, tpot_sum / tpot_n / 1e6))
    return out


def latency_timeline_plots(
    acc: MetricsAccumulator, *, stages: Sequence[Mapping[str, Any]] = ()
) -> list[str]:
    """TTFT (mean and max) and TPOT (mean) of the requests completing in each second."""
    series = latency_timeline(acc)
    bands = stage_bands(stages)
    ttft = [Series(name, series[name]) for name in ("ttft mean", "ttft max")]
    markers = len(series["ttft max"]) < 30
    return [
        line_chart(
            ttft if series["ttft max"] else [],
            title="TTFT per second of completion",
            x_label="s since first planned send",
            y_label="ms",
            kind="latency-timeline",
            markers=markers,
            bands=bands,
        ),
        line_chart(
            [Series("tpot mean", series["tpot mean"])],
            title="TPOT (mean) per second of completion",
            x_label="s since first planned send",
            y_label="ms",
            kind="latency-timeline",
            markers=markers,
            bands=bands,
        ),
    ]


def latency_vs_load_plot(runs: Sequence[Mapping[str, Any]]) -> str | None:
    """TTFT and TPOT percentiles against achieved throughput, when a test made several runs."""
    usable = [
        r
        for r in runs
        if (r.get("metrics") or {}).get("ttft", {}).get("count")
        and r["metrics"].get("request_throughput") is not None  # (an empty steady window)
    ]
    if len(usable) < 2:
        return None
    usable = sorted(usable, key=lambda r: r["metrics"]["request_throughput"])
    series = []
    for metric, stat in (("ttft", "p50"), ("ttft", "p99"), ("tpot", "p50"), ("tpot", "p99")):
        pts = [
            (r["metrics"]["request_throughput"], r["metrics"][metric][stat])
            for r in usable
            if r["metrics"][metric].get(stat) is not None
        ]
        if pts:
            series.append(Series(f"{metric} {stat}", pts))
    return line_chart(
        series,
        title="latency vs load (this test's runs)",
        x_label="achieved req/s",
        y_label="ms",
        kind="latency-vs-load",
        markers=True,
    )


def analysis_curve(analysis: Mapping[str, Any]) -> str | None:
    """An attached ``{"kind": "curve", "columns", "rows", "x", "y"}`` analysis, drawn."""
    columns = list(analysis.get("columns") or [])
    x = analysis.get("x")
    ys = analysis.get("y") or []
    if isinstance(ys, str):
        ys = [ys]
    if x not in columns or not ys:
        return None
    xi = columns.index(x)
    series = []
    for name in ys:
        if name not in columns:
            continue
        yi = columns.index(name)
        pts = []
        for row in analysis.get("rows") or []:
            try:
                px, py = float(row[xi]), float(row[yi])
            except (TypeError, ValueError, IndexError):
                continue
            if math.isfinite(px) and math.isfinite(py):
                pts.append((px, py))
        series.append(Series(str(name), sorted(pts)))
    if not series:
        return None
    return line_chart(
        series,
        title=str(analysis.get("title", "analysis")),
        x_label=str(x),
        y_label=", ".join(str(y) for y in ys) if len(ys) == 1 else "",
        kind="analysis",
        markers=True,
    )


def server_series_plots(
    server: Mapping[str, Any] | None, *, stages: Sequence[Mapping[str, Any]] = ()
) -> list[str]:
    """The server's gauges sampled during the run (``server_metrics["series"]``, seconds
    since the run started): KV-cache usage (%), and requests running and waiting; none
    when the server gave no series. ``stages`` are drawn as bands, as on the run's
    throughput and latency plots."""

    def points(name: str, scale: float = 1.0) -> list[tuple[float, float]]:
        return series_points(server, name, scale)

    bands = stage_bands(stages)
    charts = []
    kv = points("server.kv_cache_usage", 100.0)
    if kv:
        charts.append(
            line_chart(
                [Series("KV cache usage", kv)],
                title="server KV-cache usage",
                x_label="s since the run started",
                y_label="% of KV cache",
                kind="server-timeline",
                y_range=(0.0, 100.0),
                markers=len(kv) < 30,
                bands=bands,
            )
        )
    queues = [
        Series(word, pts)
        for word, pts in (
            ("running", points("server.running")),
            ("waiting", points("server.waiting")),
        )
        if pts
    ]
    if queues:
        charts.append(
            line_chart(
                queues,
                title="server requests running and waiting",
                x_label="s since the run started",
                y_label="requests",
                kind="server-timeline",
                markers=max(len(q.points) for q in queues) < 30,
                bands=bands,
            )
        )
    return charts


# the stacked bars' geometry (a wider plot than the others: a sum reads left to right)
_SPLIT_W, _SPLIT_LEFT, _SPLIT_RIGHT, _SPLIT_TOP, _SPLIT_ROW = 640, 56, 16, 28, 26


def ttft_split_plot(split: TimeSplit) -> str:
    """The client's TTFT as stacked horizontal bars, one per statistic (mean, p50, p99):
    each part (server queue, prefill or engine, the remainder) a segment, the client's
    own TTFT a black tick. Means add up exactly; each part's percentile is its own
    (bucket-bounded from histograms), so a p99 bar need not end at the tick. A part
    below zero (a bucket bound above the client's value) is drawn as nothing."""
    stats = [s for s in split.stats if split.ttft.get(s) is not None]
    title = "where the TTFT went (" + ("per request" if split.per_request else "server") + ")"
    rows = []
    for stat in stats:
        segments = [(p, max(0.0, float(p.values.get(stat) or 0.0))) for p in split.parts]
        rows.append((stat, segments, float(split.ttft.get(stat) or 0.0)))
    high = max([sum(v for _, v in segs) for _, segs, _ in rows] + [t for *_, t in rows] + [0.0])
    legend_y = _SPLIT_TOP + _SPLIT_ROW * len(rows) + 48
    height = legend_y + 10
    out = [
        f'<svg class="plot" data-kind="ttft-split" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {_SPLIT_W} {height}" width="{_SPLIT_W}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{_SPLIT_W / 2}" y="16" text-anchor="middle" class="plot-title">'
        f"{escape(title)}</text>",
    ]
    if not rows or high <= 0:
        out.append(
            f'<text x="{_SPLIT_W / 2}" y="{height / 2}" text-anchor="middle" class="empty">'
            "no data</text></svg>"
        )
        return "\n".join(out)
    ticks = nice_ticks(0.0, high, 6)
    top_value = max(high, ticks[-1])
    span = _SPLIT_W - _SPLIT_LEFT - _SPLIT_RIGHT

    def x(value: float) -> float:
        return _SPLIT_LEFT + value / top_value * span

    bottom = _SPLIT_TOP + _SPLIT_ROW * len(rows)
    for t, label in zip(ticks, tick_labels(ticks), strict=True):
        out.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{_SPLIT_TOP}" y2="{bottom}" class="grid"/>'
        )
        out.append(
            f'<text x="{x(t):.1f}" y="{bottom + 13}" text-anchor="middle" class="tick" '
            f'data-axis="x">{label}</text>'
        )
    out.append(
        f'<text x="{_SPLIT_LEFT + span / 2}" y="{bottom + 27}" text-anchor="middle" '
        'class="axis-label">ms</text>'
    )
    colors = {p.key: PALETTE[i % len(PALETTE)] for i, p in enumerate(split.parts)}
    for i, (stat, segments, ttft) in enumerate(rows):
        y = _SPLIT_TOP + _SPLIT_ROW * i + 4
        bar = _SPLIT_ROW - 8
        out.append(
            f'<text x="{_SPLIT_LEFT - 6}" y="{y + bar / 2 + 4}" text-anchor="end" '
            f'class="tick">{escape(stat)}</text>'
        )
        at = 0.0
        for part, value in segments:
            if value <= 0:
                continue
            hover = f"{stat} {part.label}: {value:.3g} ms"
            out.append(
                f'<rect class="bar" data-part="{escape(part.key)}" data-stat="{escape(stat)}" '
                f'x="{x(at):.1f}" y="{y}" width="{max(0.6, x(at + value) - x(at)):.1f}" '
                f'height="{bar}" fill="{colors[part.key]}"><title>{escape(hover)}</title></rect>'
            )
            at += value
        out.append(
            f'<line class="ttft-mark" x1="{x(ttft):.1f}" x2="{x(ttft):.1f}" y1="{y - 3}" '
            f'y2="{y + bar + 3}" stroke="#1d2329" stroke-width="2">'
            f"<title>{escape(f'{stat} client ttft: {ttft:.3g} ms')}</title></line>"
        )
    out.append(
        f'<line x1="{_SPLIT_LEFT}" x2="{_SPLIT_LEFT}" y1="{_SPLIT_TOP}" y2="{bottom}" '
        'class="axis"/>'
    )
    legend_x = float(_SPLIT_LEFT)
    for part in split.parts:
        out.append(
            f'<rect x="{legend_x:.1f}" y="{legend_y - 8}" width="10" height="10" '
            f'fill="{colors[part.key]}"/>'
        )
        out.append(
            f'<text x="{legend_x + 14:.1f}" y="{legend_y + 1}" class="legend">'
            f"{escape(part.label)}</text>"
        )
        legend_x += 24 + 6 * len(part.label)
    out.append(
        f'<line x1="{legend_x:.1f}" x2="{legend_x:.1f}" y1="{legend_y - 9}" y2="{legend_y + 2}" '
        'stroke="#1d2329" stroke-width="2"/>'
    )
    out.append(f'<text x="{legend_x + 5:.1f}" y="{legend_y + 1}" class="legend">client ttft</text>')
    out.append("</svg>")
    return "\n".join(out)


def turn_band_plots(block: Mapping[str, Any] | None) -> list[str]:
    """A run's conversations by turn band (``runs[].conversations.by_turn_band``): TTFT p50
    and p90, and the prefix-cache hit rate where the server said its cached tokens. The x
    axis is the band's place (1 = turn 1, 2 = turns 2-5, ...), named in its label."""
    rows = list((block or {}).get("by_turn_band") or ())
    if not rows:
        return []
    names = ", ".join(f"{k} = {row['turns']}" for k, row in enumerate(rows, 1))
    x_label = f"turn band ({names})"
    series = []
    for stat in ("p50", "p90"):
        pts = [
            (float(k), float(row["ttft"][stat]))
            for k, row in enumerate(rows, 1)
            if (row.get("ttft") or {}).get(stat) is not None
        ]
        if pts:
            series.append(Series(f"TTFT {stat}", pts))
    out = [
        line_chart(
            series,
            title="TTFT by turn band",
            x_label=x_label,
            y_label="ms",
            kind="ttft-by-turn",
            markers=True,
        )
    ]
    hits = [
        (float(k), 100.0 * float(row["cache_hit_rate"]))
        for k, row in enumerate(rows, 1)
        if row.get("cache_hit_rate") is not None
    ]
    if hits:
        out.append(
            line_chart(
                [Series("prefix-cache hit", hits)],
                title="prefix-cache hit by turn band",
                x_label=x_label,
                y_label="% of prompt tokens",
                kind="cache-hit-by-turn",
                y_range=(0.0, 100.0),
                markers=True,
            )
        )
    return out
