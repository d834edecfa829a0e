"""Trends as Markdown: a series' last values as a sparkline and the change point the
history finds; and the whole store as a Markdown page (``export --format markdown``).

A *trend digest* is the plain-data form of a :class:`~pytest_llmperf.history.trends.TrendReport`
(what the HTML report draws, from :func:`~pytest_llmperf.history.trends.report_trends`): per
test and run, per statistic, the last :data:`TREND_LAST` values (the current run last) and
every change point of the series. The plugin puts it in the JSON report (``trends``), so
the Markdown summary is a function of the JSON report alone and
``python -m pytest_llmperf.reports.markdown report.json`` writes it again, sparklines
included. :func:`trend_rows` turns a digest's series into table rows, the same here and
in the session summary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.analysis.change_points import detect_change_points
from pytest_llmperf.gfm import (
    CHAR_LIMIT,
    Block,
    Document,
    Section,
    code,
    sparkline,
    table,
    text,
)
from pytest_llmperf.history.records import SeriesPoint
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.history.trends import (
    REPORT_SERIES,
    TrendReport,
    TrendSeries,
    unit_of,
)

__all__ = [
    "MARKDOWN_SERIES",
    "TREND_HEADER",
    "TREND_LAST",
    "export_markdown",
    "format_trend_value",
    "series_digest",
    "trend_digest",
    "trend_rows",
]

TREND_LAST = 20  # values a sparkline shows
# the statistics the Markdown summary shows for each gated run, and so its trends: (metric, stat)
MARKDOWN_SERIES: tuple[tuple[str, str], ...] = (
    ("ttft", "p50"),
    ("ttft", "p99"),
    ("tpot", "p50"),
    ("tpot", "p99"),
    ("itl", "p50"),
    ("itl", "p99"),
    ("request_throughput", "value"),
    ("output_throughput", "value"),
    ("error_rate", "value"),
    ("goodput", "value"),
)
# what one trend query fetches: the Markdown summary's statistics and the HTML's charts
TREND_SERIES: tuple[tuple[str, str], ...] = (
    *MARKDOWN_SERIES,
    *(s for s in REPORT_SERIES if s not in MARKDOWN_SERIES),
)
TREND_HEADER = ("statistic", "latest", "last runs (oldest → latest)", "range", "change point")
_TITLES = {
    "request_throughput": "throughput (req/s)",
    "output_throughput": "throughput (tok/s)",
    "input_throughput": "input (tok/s)",
    "error_rate": "error rate",
    "goodput": "goodput",
}
_RECENT = 100  # stored runs a series is searched for change points over
_PER_SECOND = {"request_throughput": "req/s", "output_throughput": "tok/s"}


def format_trend_value(value: float | None, metric: str) -> str:
    """A stored value in its unit, as the reports write it: ``20.7 ms``, ``0.50%``,
    ``41.20 req/s``; ``-`` when missing."""
    if value is None or not math.isfinite(value):
        return "-"
    unit = unit_of(metric)
    if unit == "ms":
        return f"{value:.1f} ms" if value >= 10 else f"{value:.3f} ms"
    if unit == "fraction":
        return f"{value * 100:.2f}%"
    if unit == "/s":
        return f"{value:.2f} {_PER_SECOND.get(metric, 'tok/s')}"
    if unit in ("s", "MB"):  # the server process's startup and memory, a GPU's memory
        return f"{value:.1f} {unit}"
    if unit in ("W", "J", "C"):  # the GPUs' power, energy (per token), temperature
        return f"{value:.4g} {'°C' if unit == 'C' else unit}"
    return f"{value:.4g}"


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def series_digest(series: TrendSeries, *, last: int = TREND_LAST) -> dict[str, Any]:
    """One series as plain data: its last ``last`` values (``first``: the 1-based number of
    the first of them in the series of ``count``), whether the last is the current run, and
    every change point (``run``: 1-based number of the first run of the new level)."""
    points = series.points
    shown = points[-last:] if last > 0 else points
    changes = []
    for cp in series.change_points:
        point = points[cp.index]
        changes.append(
            {
                "run": cp.index + 1,
                "this_run": series.current == cp.index,
                "session_id": point.session_id,
                "when": point.when,
                "tag": point.tag,
                "before": _finite(cp.mean_before),
                "after": _finite(cp.mean_after),
                "change": _finite(cp.relative_change),
                "p_value": _finite(cp.p_value),
            }
        )
    return {
        "metric": series.metric,
        "stat": series.stat,
        "title": _TITLES.get(series.metric, series.title),
        "key": series.key,
        "values": [_finite(p.value) for p in shown],
        "first": len(points) - len(shown) + 1,
        "count": len(points),
        "current": series.current is not None and series.current == len(points) - 1,
        "change_points": changes,
    }


def trend_digest(
    trends: TrendReport,
    *,
    last: int = TREND_LAST,
    series: Sequence[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """The JSON report's ``trends``: where the history is, its note or error, and per test
    node id its runs (``run`` label, comparison ``key``) with their series (``series``:
    only these statistics, in this order; default every one the sections hold)."""
    tests: dict[str, list[dict[str, Any]]] = {}
    for nodeid, sections in trends.sections.items():
        runs = []
        for section in sections:
            by_stat = {(s.metric, s.stat): s for s in section.series}
            order = list(series) if series is not None else list(by_stat)
            chosen = [by_stat[k] for k in order if k in by_stat]
            if chosen:
                runs.append(
                    {
                        "run": section.label,
                        "key": section.key,
                        "series": [series_digest(s, last=last) for s in chosen],
                    }
                )
        if runs:
            tests[nodeid] = runs
    return {
        "where": trends.where,
        "note": trends.note,
        "error": trends.error,
        "last": last,
        "tests": tests,
    }


def _change_text(series: Mapping[str, Any]) -> str:
    """The latest change point of a series digest in words (Markdown), ``none in N runs``."""
    changes = list(series.get("change_points") or [])
    count = int(series.get("count") or 0)
    if not changes:
        return f"none in {count} runs"
    cp = changes[-1]
    metric = str(series.get("metric") or "")
    before = format_trend_value(cp.get("before"), metric)
    after = format_trend_value(cp.get("after"), metric)
    change = cp.get("change")
    pct = "" if change is None else f" ({change * 100:+.1f}%)"
    if cp.get("this_run"):
        where = "**this run**"
    else:
        when = str(cp.get("when") or "")[:16].replace("T", " ")
        tag = f"{code(cp['tag'])}, " if cp.get("tag") else ""
        where = f"run {cp.get('run')} of {count} ({tag}{text(when)})"
    p = cp.get("p_value")
    more = f"; {len(changes) - 1} earlier" if len(changes) > 1 else ""
    return f"{where}: {before} → {after}{pct}" + (f", p={p:.2g}" if p is not None else "") + more


def trend_rows(series: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Table rows (:data:`TREND_HEADER`) of a run's series digests: statistic, latest value,
    sparkline of the last values (a ``│`` at each change point among them), their range,
    the latest change point."""
    rows = []
    for s in series:
        values = list(s.get("values") or [])
        metric = str(s.get("metric") or "")
        first = int(s.get("first") or 1)
        breaks = [int(cp["run"]) - first for cp in s.get("change_points") or []]
        finite = [v for v in values if v is not None]
        span = (
            f"{format_trend_value(min(finite), metric)} – {format_trend_value(max(finite), metric)}"
            if finite
            else "-"
        )
        latest = format_trend_value(values[-1] if values else None, metric)
        rows.append(
            [
                text(s.get("title") or metric),
                latest + (" (this run)" if s.get("current") else ""),
                sparkline(values, breaks),
                span,
                _change_text(s),
            ]
        )
    return rows


# -- export --format markdown --------------------------------------------------------------


def _when(value: str) -> str:
    return value[:16].replace("T", " ")


def export_markdown(store: HistoryStore, *, last: int = TREND_LAST, limit: int = CHAR_LIMIT) -> str:
    """The store as a Markdown page: per test and comparison key the statistics of
    :data:`MARKDOWN_SERIES` (and ``e2e`` p50) over the stored runs, the last ``last`` as a
    sparkline, with the latest value and change point; then the last sessions. Within
    ``limit`` characters (the oldest sessions, then the last tests' tables, left out first,
    with a note)."""
    sessions = store.sessions()
    runs = store.runs()
    tests = store.tests()
    doc = Document(note=_export_note)
    head = [f"# pytest-llmperf history: {code(store.where, cell=False)}\n\n"]
    if not sessions:
        head.append("No session stored yet.\n")
        doc.sections.append(Section("".join(head)))
        return doc.render(limit)[0]
    first, latest = sessions[0], sessions[-1]
    head.append(
        f"{len(sessions)} session(s), {len(runs)} run(s) of {len(tests)} test(s), "
        f"{text(_when(first.started_at))} → {text(_when(latest.started_at))} UTC; "
        f"latest: session {latest.id}"
        + (f" ({code(latest.tag, cell=False)})" if latest.tag else "")
        + ". Change points: E-divisive means, permutation test, significance 0.05; "
        "a `│` in a sparkline marks one.\n\n"
    )
    doc.sections.append(Section("".join(head)))
    for test in tests:
        blocks = []
        by_key: dict[str, list[TrendSeries]] = {}
        for metric, stat in TREND_SERIES:
            for series in _recent_series(store, test, metric, stat):
                by_key.setdefault(series.key, []).append(series)
        for key, all_series in by_key.items():
            labels = ", ".join(code(x, cell=False) for x in all_series[0].labels) or "-"
            digests = [series_digest(s, last=last) for s in all_series]
            body = (
                f"run {labels} · key {code(key, cell=False)} · "
                f"{len(all_series[0].points)} stored run(s)\n\n"
                + table(TREND_HEADER, trend_rows(digests))
                + "\n"
            )
            blocks.append(Block(body, rank=10, what="tests' trend tables"))
        doc.sections.append(Section(f"## {code(test, cell=False)}\n\n", blocks))
    rows = [
        Block(
            "| "
            + " | ".join(
                [
                    str(s.id),
                    text(_when(s.started_at)),
                    code(s.tag) if s.tag else "-",
                    code(s.endpoint.get("url") or s.endpoint.get("simulator") or "-"),
                    code(s.endpoint.get("model") or "-"),
                    # a session that stopped before load stored no run: say why none
                    f"{s.run_count} (⛔ the gate did not run)" if s.stopped else str(s.run_count),
                ]
            )
            + " |\n",
            rank=5,
            what="rows of the sessions table",
        )
        for s in reversed(sessions[-_RECENT:])
    ]
    some = f", the last {_RECENT} of {len(sessions)}" if len(sessions) > _RECENT else ""
    head_rows = table(
        ("session", "started (UTC)", "tag", "endpoint", "model", "runs"), [], right=(0, 5)
    )
    doc.sections.append(Section(f"## Sessions (newest first{some})\n\n{head_rows}", rows, "\n"))
    return doc.render(limit)[0]


def _recent_series(
    store: HistoryStore, test: str, metric: str, stat: str, *, recent: int = _RECENT
) -> list[TrendSeries]:
    """``metric``'s ``stat`` of ``test`` per comparison key over its last ``recent`` stored
    runs (the HTML report's window: a change-point search is quadratic in the points),
    with the change points found in them."""
    by_key: dict[str, list[SeriesPoint]] = {}
    for point in store.series(test, metric, stat):
        by_key.setdefault(point.key, []).append(point)
    out = []
    for key, points in by_key.items():
        tail = points[-recent:]
        values = [p.value for p in tail]
        finite = all(math.isfinite(v) for v in values)
        changes = detect_change_points(values) if finite else []
        out.append(TrendSeries(test, metric, stat, key, tail, changes))
    return out


def _export_note(left: Mapping[str, int], limit: int) -> str:
    parts = [f"{n} {what}" for what, n in left.items()]
    return (
        f"> Shortened to stay under {limit:,} characters: left out {', '.join(parts)} "
        "(`export --format json` has everything).\n\n"
    )
