"""Trends over the stored runs: series, change points, tables and charts.

A *series* is one test's metric (``ttft`` ``p50``..., or one value per run: a
throughput, the server process's ``startup.ready_s``, ``server.rss_max_mb``,
``server.rss_growth_mb``, ``server.cpu_ms_per_output_token``) over every stored run
with one comparison key (the same endpoint model, API, load and workload:
runs with different keys measured different experiments and are never mixed),
in time order. Its change points come from
:func:`~pytest_llmperf.analysis.change_points.detect_change_points`
(E-divisive means with a permutation test, docs/change-points.md).

Used by ``python -m pytest_llmperf.history PATH trend|detect``
(:func:`trend_table`, :func:`detect_command`) and by the HTML report under
``--llm-history`` (:func:`report_trends`, :func:`trend_sections`): each test's
series with its change points and the current run marked.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from pytest_llmperf.analysis.change_points import ChangePoint, detect_change_points
from pytest_llmperf.history.errors import HistoryError
from pytest_llmperf.history.records import (
    SeriesPoint,
    comparison_key,
    metric_value,
    process_values,
    run_metrics_with_gpu,
)
from pytest_llmperf.history.session import clean_endpoint
from pytest_llmperf.history.store import HistoryStore, describe_target
from pytest_llmperf.redaction import scrub
from pytest_llmperf.results.accumulator import LATENCY_METRICS
from pytest_llmperf.results.fleet_figures import run_metrics_with_fleet
from pytest_llmperf.specs.conversation_names import (
    CONVERSATION_LATENCY_METRICS,
    CONVERSATION_RATE_METRICS,
)
from pytest_llmperf.specs.gpu_names import GPU_METRICS
from pytest_llmperf.specs.process_names import PROCESS_METRICS
from pytest_llmperf.specs.server_names import COMMON_METRICS, MetricKind, metric_kind
from pytest_llmperf.svg import PALETTE, Band, Series, line_chart

__all__ = [
    "REPORT_SERIES",
    "TrendReport",
    "TrendSection",
    "TrendSeries",
    "detect_command",
    "report_trends",
    "trend_chart",
    "trend_sections",
    "trend_series",
    "trend_table",
]

# what the HTML report draws for each test with history: (metric, stat); the server
# process's (a scalar per run, "value" like a throughput's) only where runs stored them
REPORT_SERIES = (
    ("ttft", "p50"),
    ("ttft", "p99"),
    ("tpot", "p50"),
    ("e2e", "p50"),
    ("startup.ready_s", "value"),
    ("server.rss_max_mb", "value"),
    ("energy_per_output_token_j", "value"),  # the GPUs': drawn where stored (docs/gpu.md)
    ("gpu.power_w.mean", "value"),
)
_LATENCIES = {*LATENCY_METRICS, *CONVERSATION_LATENCY_METRICS}
_NAMES = {"ttft": "TTFT", "ttfo": "TTFO", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E"}


@dataclass(frozen=True)
class TrendSeries:
    """One metric of one test over its comparable runs (one comparison key), oldest first.

    ``current`` is the index in ``points`` of the session's own run (the HTML
    report's current run, not stored yet), None when the series is only history.
    """

    test: str
    metric: str
    stat: str
    key: str
    points: list[SeriesPoint]
    change_points: list[ChangePoint]
    current: int | None = None

    @property
    def unit(self) -> str:
        return unit_of(self.metric)

    @property
    def title(self) -> str:
        name = _NAMES.get(self.metric, self.metric)
        kind = metric_kind(self.metric)
        with_stat = self.metric in _LATENCIES or kind not in (None, MetricKind.VALUE)
        return f"{name} {self.stat}" if with_stat else name

    @property
    def labels(self) -> list[str]:
        """The run labels the series holds, in order of appearance."""
        return list(dict.fromkeys(p.label for p in self.points if p.label))


@dataclass(frozen=True)
class TrendSection:
    """What the HTML report shows for one run of one test: its series, one per metric."""

    test: str
    label: str
    key: str
    series: list[TrendSeries]
    charts: list[str] = field(default_factory=list)  # SVG, one per series


@dataclass(frozen=True)
class TrendReport:
    """The HTML report's history part: sections per test node id, and a note or an error."""

    where: str
    sections: dict[str, list[TrendSection]] = field(default_factory=dict)
    note: str = ""
    error: str = ""


def unit_of(metric: str) -> str:
    """``ms`` for a latency, ``/s`` for a throughput, ``fraction`` for a rate, ``s``, ``MB``
    or ``ms`` for the server process's (``startup.ready_s``, ``server.rss_max_mb``), else
    ``""``."""
    if metric in _LATENCIES:
        return "ms"
    if metric in PROCESS_METRICS:
        return PROCESS_METRICS[metric].unit
    if metric in GPU_METRICS:
        return GPU_METRICS[metric].unit
    if metric in COMMON_METRICS:  # the server's own: ms, fraction or a count
        unit = COMMON_METRICS[metric][1]
        return "" if unit == "count" else unit
    if metric.endswith("throughput"):
        return "/s"
    if metric in ("error_rate", "blank_rate", "goodput", *CONVERSATION_RATE_METRICS):
        return "fraction"
    return ""


def _fmt(value: float, unit: str) -> str:
    if unit == "fraction":
        return f"{value * 100:.2f}%"
    text = f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}"
    return f"{text} {unit}".rstrip()


def _change(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value * 100:+.1f}%"


def _detect(points: Sequence[SeriesPoint], alpha: float) -> list[ChangePoint]:
    values = [p.value for p in points if math.isfinite(p.value)]
    if len(values) != len(points):  # a stored NaN: the series is unusable as it is
        return []
    return detect_change_points(values, alpha=alpha)


def trend_series(
    store: HistoryStore,
    test: str,
    metric: str,
    stat: str = "p50",
    *,
    key: str | None = None,
    alpha: float = 0.05,
) -> list[TrendSeries]:
    """``metric``'s ``stat`` of ``test``, one series per comparison key (in order of each
    key's first stored run), each with its change points."""
    points = store.series(test, metric, stat, key=key)
    by_key: dict[str, list[SeriesPoint]] = {}
    for point in points:
        by_key.setdefault(point.key, []).append(point)
    return [
        TrendSeries(test, metric, stat, k, pts, _detect(pts, alpha)) for k, pts in by_key.items()
    ]


# -- the command line ----------------------------------------------------------------------


def _table(rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    align = set(right)
    lines = [
        "  ".join(
            cell.rjust(w) if i in align else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _header(series: TrendSeries) -> str:
    labels = ", ".join(series.labels) or "-"
    return (
        f"{series.test} · {series.title}"
        + (f" ({series.unit})" if series.unit and series.unit != "fraction" else "")
        + f" · run {labels} · key {series.key}"
    )


def _series_rows(series: TrendSeries) -> list[list[str]]:
    marks = {cp.index: cp for cp in series.change_points}
    rows = [["#", "session", "when (UTC)", "tag", "run", "value", "change point"]]
    for i, point in enumerate(series.points):
        cp = marks.get(i)
        note = (
            f"▲ {_change(cp.relative_change)} "
            f"({_fmt(cp.mean_before, series.unit)} → {_fmt(cp.mean_after, series.unit)}, "
            f"p={cp.p_value:.3g})"
            if cp
            else ""
        )
        if series.current == i:
            note = (note + " " if note else "") + "◀ this run"
        rows.append(
            [
                str(i + 1),
                "-" if series.current == i else str(point.session_id),
                point.when[:19].replace("T", " "),
                point.tag or "-",
                point.label or "-",
                _fmt(point.value, series.unit),
                note,
            ]
        )
    return rows


def trend_table(
    store: HistoryStore, test: str, metric: str, stat: str = "p50", html: bool = False
) -> str:
    """``trend TEST METRIC``: the series as a text table, change points marked (``▲`` on
    the first run of each new regime); ``html=True``: a standalone HTML page with a line
    chart per comparison key. Raises :class:`HistoryError` when ``test`` has no stored run
    with that metric."""
    all_series = trend_series(store, test, metric, stat)
    if not all_series:
        raise HistoryError(f"no stored value of {metric} {stat} for {test}", where=store.where)
    if html:
        return trend_page(all_series, where=store.where)
    blocks = []
    for series in all_series:
        lines = [_header(series), *_table(_series_rows(series), right=(0, 1, 5))]
        lines.append(_summary(series))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _summary(series: TrendSeries) -> str:
    n = len(series.points)
    count = len(series.change_points)
    if not count:
        return f"no change point in {n} runs (significance 0.05)"
    return f"{count} change point{'s' if count > 1 else ''} in {n} runs (significance 0.05)"


def detect_command(
    store: HistoryStore,
    test: str | None = None,
    metric: str = "ttft",
    stat: str = "p50",
    alpha: float = 0.05,
) -> str:
    """``detect``: the change points of ``metric``'s ``stat``, per test (all stored tests,
    or ``test``) and comparison key; one line per series, one per change point under it."""
    tests = [test] if test is not None else store.tests()
    lines: list[str] = []
    for name in tests:
        all_series = trend_series(store, name, metric, stat, alpha=alpha)
        if not all_series:
            lines.append(f"{name}: no stored value of {metric} {stat}")
            continue
        for series in all_series:
            n = len(series.points)
            head = f"{name} [key {series.key}] {series.title}"
            if not series.change_points:
                lines.append(f"{head}: no change point in {n} runs (alpha {alpha:g})")
                continue
            count = len(series.change_points)
            lines.append(
                f"{head}: {count} change point{'s' if count > 1 else ''} in {n} runs "
                f"(alpha {alpha:g})"
            )
            for cp in series.change_points:
                point = series.points[cp.index]
                lines.append(
                    f"  from run {cp.index + 1} (session {point.session_id}, "
                    f"{point.when[:19].replace('T', ' ')}, {point.tag or '-'}): "
                    f"{_fmt(cp.mean_before, series.unit)} → {_fmt(cp.mean_after, series.unit)} "
                    f"({_change(cp.relative_change)}), p={cp.p_value:.3g}"
                )
    return "\n".join(lines)


# -- charts and pages ----------------------------------------------------------------------


def trend_chart(series: TrendSeries) -> str:
    """A line chart of the series (x: run number, oldest first): the regimes between change
    points as alternately shaded bands with a dashed line at each change point, the current
    run as a point of its own (``data-series="this run"``)."""
    return trend_plot(
        [p.value for p in series.points],
        [cp.index for cp in series.change_points],
        current=series.current,
        title=series.title,
        y_label=series.unit if series.unit != "fraction" else "share",
    )


def trend_page(all_series: Sequence[TrendSeries], *, where: str) -> str:
    """A standalone HTML page (no scripts, no external assets): per series a chart and its
    table."""
    first = all_series[0]
    title = f"{first.test} · {first.title}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        "<style>",
        _PAGE_CSS,
        "</style></head>",
        "<body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">history {escape(where)} · ▲ first run of a new regime '
        "(E-divisive means, permutation test, significance 0.05)</p>",
    ]
    for series in all_series:
        parts.append(f'<section class="trend" data-key="{escape(series.key)}">')
        parts.append(f"<h2>{escape(_header(series))}</h2>")
        parts.append(f'<div class="plots">{trend_chart(series)}</div>')
        rows = _series_rows(series)
        parts.append('<table class="trend-table">')
        parts.append("<tr>" + "".join(f"<th>{escape(c)}</th>" for c in rows[0]) + "</tr>")
        marks = {cp.index for cp in series.change_points}
        for i, row in enumerate(rows[1:]):
            cls = ' class="change-point"' if i in marks else ""
            parts.append(f"<tr{cls}>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
        parts.append("</table>")
        parts.append(f'<p class="muted">{escape(_summary(series))}</p>')
        parts.append("</section>")
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


_PAGE_CSS = """\
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1100px;
  padding: 0 24px 48px; color: #1d2329; }
h1 { font-size: 20px; } h2 { font-size: 15px; margin: 24px 0 6px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #d8dde3; padding: 2px 8px; text-align: left; }
th { background: #f2f4f7; }
tr.change-point td { background: #fff3d6; }
.muted { color: #66707a; }
svg.plot { background: #fff; border: 1px solid #e3e7eb; }
svg.plot .plot-bg { fill: #fbfcfd; }
svg.plot .grid { stroke: #e8ebee; stroke-width: 1; }
svg.plot .axis { stroke: #6b7480; stroke-width: 1; }
svg.plot text { font: 10px system-ui, sans-serif; fill: #4a5560; }
svg.plot .plot-title { font-size: 12px; font-weight: 600; fill: #1d2329; }"""


# -- the HTML report -----------------------------------------------------------------------


def _current_runs(
    test: Mapping[str, Any], endpoint: Mapping[str, Any]
) -> list[tuple[str, str, dict[str, Any]]]:
    """``(label, comparison key, metrics)`` of a report test's runs, keyed as the history
    keys them when it appends the session."""
    # as build_session_record keys them (a test's own endpoint, when it has one, wins whole)
    test_endpoint = {**clean_endpoint(endpoint), **clean_endpoint(test.get("endpoint") or endpoint)}
    out: list[tuple[str, str, dict[str, Any]]] = []
    for i, run in enumerate(test.get("runs") or []):
        key = comparison_key(
            test_endpoint.get("model"),
            test_endpoint.get("api"),
            dict(run.get("load") or {}),
            dict(run.get("workload") or {}),
        )
        # and the server process's values and the GPUs' figures, by name
        metrics = run_metrics_with_gpu(run_metrics_with_fleet(run), run)
        metrics.update(process_values(run.get("server_process")) or {})
        out.append((str(run.get("label") or f"run{i}"), key, metrics))
    return out


def trend_sections(
    store: HistoryStore,
    tests: Sequence[Mapping[str, Any]],
    current: Mapping[str, Any] | None = None,
    *,
    series: Sequence[tuple[str, str]] = REPORT_SERIES,
    alpha: float = 0.05,
    last: int = 100,
) -> dict[str, list[TrendSection]]:
    """The HTML report's trends: for each of ``tests`` (the JSON report's test entries, the
    current session's) and each of its runs with stored comparable runs, the series of
    ``series`` metrics over the stored runs followed by the current run (marked), with
    change points. ``current`` is the report's endpoint (a test's own endpoint wins), which
    keys the current runs as the history will. Tests without history are left out; a long
    history is drawn (and searched for change points) over its ``last`` stored runs."""
    endpoint = dict(current or {})
    out: dict[str, list[TrendSection]] = {}
    for test in tests:
        nodeid = str(test.get("nodeid", ""))
        sections = []
        for label, key, metrics in _current_runs(test, endpoint):
            drawn: list[TrendSeries] = []
            for metric, stat in series:
                stored = store.series(nodeid, metric, stat, key=key)
                if not stored:
                    continue
                points = list(stored[-last:]) if last > 0 else list(stored)
                now = metric_value(metrics, metric, stat)
                index = None
                if now is not None and math.isfinite(now):
                    index = len(points)
                    points.append(SeriesPoint(0, "this session", "this run", now, label, key))
                drawn.append(
                    TrendSeries(
                        nodeid, metric, stat, key, points, _detect(points, alpha), current=index
                    )
                )
            if drawn:
                sections.append(
                    TrendSection(nodeid, label, key, drawn, [trend_chart(s) for s in drawn])
                )
        if sections:
            out[nodeid] = sections
    return out


def report_trends(
    target: str,
    report: Mapping[str, Any],
    *,
    series: Sequence[tuple[str, str]] = REPORT_SERIES,
) -> TrendReport:
    """The plugin's one call under ``--llm-history`` (for the HTML, JSON and Markdown
    reports): the trend sections of ``report``'s tests (the ``series`` statistics) from the
    store at ``target``, before this session is appended.
    Never raises: a missing store is a note (the first session), an unusable one an error
    shown in the report (the history append reports it too)."""
    where = describe_target(target)
    if "://" not in target and not Path(target.strip()).exists():
        return TrendReport(where, note="no history yet: this session will be its first")
    try:
        with HistoryStore.open(target, create=False) as store:
            sections = trend_sections(
                store,
                list(report.get("tests") or []),
                dict(report.get("endpoint") or {}),
                series=series,
            )
    except HistoryError as exc:
        return TrendReport(where, error=scrub(str(exc)))
    except Exception as exc:  # never cost the session its report
        return TrendReport(where, error=f"could not read the history: {scrub(repr(exc))}")
    if not sections:
        return TrendReport(where, note="no stored run comparable with this session's runs yet")
    return TrendReport(where, sections=sections)


def trend_plot(
    values: Sequence[float],
    change_points: Sequence[int],
    *,
    current: int | None = None,
    title: str,
    y_label: str = "ms",
) -> str:
    """A metric over stored runs (x: run number, oldest first).

    Each regime between ``change_points`` (indices of the first run of a new
    regime) is a band, alternately shaded, with a dashed line at each change
    point and its mean as hover text; ``current`` (an index) is drawn as a
    point of its own, the ``this run`` series.
    """
    history = [(i + 1.0, float(v)) for i, v in enumerate(values) if i != current]
    series = [Series("history", history)]
    if current is not None and 0 <= current < len(values):
        series.append(Series("this run", [(current + 1.0, float(values[current]))]))
    bands = []
    if change_points:
        bounds = [0, *sorted(change_points), len(values)]
        for n, (start, end) in enumerate(itertools.pairwise(bounds)):
            regime = [float(v) for v in values[start:end] if math.isfinite(v)]
            mean = sum(regime) / len(regime) if regime else math.nan
            first = "" if n == 0 else f"change point at run {start + 1}; "
            bands.append(
                Band(
                    start + 0.5,
                    end + 0.5,
                    label="",
                    title=f"{first}runs {start + 1}-{end}: mean {mean:.4g} {y_label}".rstrip(),
                )
            )
    finite = [float(v) for v in values if math.isfinite(v)]
    y_range = None
    if finite:  # zoomed on the values (a 10% step is invisible on an axis from 0)
        low, high = min(finite), max(finite)
        pad = 0.25 * ((high - low) or abs(high) * 0.1 or 1.0)
        y_range = (max(0.0, low - pad) if low >= 0 else low - pad, high + pad)
    svg = line_chart(
        series,
        title=title,
        y_range=y_range,
        x_label="stored run (oldest first)",
        y_label=y_label,
        kind="trend",
        markers=len(values) <= 60,
        bands=bands,
    )
    # this run (the second series, the palette's second colour) larger than the markers
    return svg.replace(
        f'r="2.6" fill="{PALETTE[1]}"/>',
        f'r="4.5" fill="{PALETTE[1]}" class="current-run"/>',
    )
