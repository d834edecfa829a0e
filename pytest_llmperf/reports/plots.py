"""The report's charts, from measurements to SVG (drawing itself is in :mod:`.svg`).

Latency CDFs and histograms come from the lossless HDR states, not from the
summary percentiles, so the plots show the whole distribution; throughput
over time from the accumulator's per-second timeline; latency-vs-load from
a test's several runs; and tests' attached ``curve`` analyses are drawn
generically.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.metrics.accumulator import MetricsAccumulator
from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.reports.svg import Series, bar_chart, line_chart

__all__ = [
    "PLOTTED_METRICS",
    "analysis_curve",
    "cdf_plot",
    "histogram_bins",
    "histogram_plot",
    "latency_vs_load_plot",
    "throughput_plots",
]

PLOTTED_METRICS = ("ttft", "tpot", "itl", "e2e")
_NAMES = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2e": "E2E latency",
    "schedule_lag": "schedule lag",
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


def throughput_plots(acc: MetricsAccumulator) -> list[str]:
    """Completed requests and output tokens per second of the run's window."""
    if not acc.timeline:
        return [
            line_chart(
                [], title="throughput over time", x_label="s", y_label="tok/s", kind="timeline"
            )
        ]
    last = max(acc.timeline)
    seconds = range(last + 1)
    tokens = [(s + 0.5, float(acc.timeline.get(s, [0, 0])[1])) for s in seconds]
    requests = [(s + 0.5, float(acc.timeline.get(s, [0, 0])[0])) for s in seconds]
    return [
        line_chart(
            [Series("output tok/s", tokens)],
            title="output tokens per second",
            x_label="s since first planned send",
            y_label="tok/s",
            kind="timeline",
            markers=len(tokens) < 30,
        ),
        line_chart(
            [Series("completed req/s", requests)],
            title="completed requests per second",
            x_label="s since first planned send",
            y_label="req/s",
            kind="timeline",
            markers=len(requests) < 30,
        ),
    ]


def latency_vs_load_plot(runs: Sequence[Mapping[str, Any]]) -> str | None:
    """TTFT and TPOT percentiles against achieved throughput, when a test made several runs."""
    usable = [r for r in runs if (r.get("metrics") or {}).get("ttft", {}).get("count")]
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
