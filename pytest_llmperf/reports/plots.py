"""The report's charts, from measurements to SVG (drawing itself is in :mod:`.svg`).

Latency CDFs and histograms come from the lossless HDR states, not from the
summary percentiles, so the plots show the whole distribution; throughput
and latency over time from the accumulator's per-second timeline (a staged
run's stages drawn as bands); latency-vs-load from
a test's several runs; tests' attached ``curve`` analyses are drawn
generically; and a metric's history (``--llm-history``) with its change points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.metrics.accumulator import MetricsAccumulator
from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.reports.table import stage_level
from pytest_llmperf.svg import Band, Series, bar_chart, line_chart

__all__ = [
    "PLOTTED_METRICS",
    "analysis_curve",
    "cdf_plot",
    "histogram_bins",
    "histogram_plot",
    "latency_timeline",
    "latency_timeline_plots",
    "latency_vs_load_plot",
    "stage_bands",
    "throughput_plots",
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


def throughput_plots(
    acc: MetricsAccumulator, *, stages: Sequence[Mapping[str, Any]] = ()
) -> list[str]:
    """Completed requests and output tokens per second of the run's window.

    ``stages`` (a staged run's ``run["stages"]``) are drawn as bands.
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
    bands = stage_bands(stages)
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
