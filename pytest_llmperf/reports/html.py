"""The HTML report (``--llm-html``): one self-contained file, plots as inline SVG.

Built from the JSON report (so both always say the same) plus the runs' HDR
states (for whole-distribution plots). No scripts, fonts, stylesheets or
images are fetched: the file opens offline and as a CI artefact. Rendered
with jinja2 and autoescaping; only the SVG this package draws is marked safe.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup

from pytest_llmperf.gate_states import did_not_run_line
from pytest_llmperf.reports import plots
from pytest_llmperf.reports.conversation_view import (
    BAND_HEADER,
    band_rows,
    conversation_figures,
    has_conversations,
)
from pytest_llmperf.reports.html_fleet import fleet_html
from pytest_llmperf.reports.html_gpu import gpu_html
from pytest_llmperf.reports.html_outputs import is_path_key, outputs_view, path_config_rows
from pytest_llmperf.reports.outcome import NOTHING_MEASURED
from pytest_llmperf.reports.server_process import exit_message, exit_tail, log_uri, process_rows
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.steady_words import steady_line
from pytest_llmperf.reports.table import (
    MARKS,
    format_change,
    format_interval,
    format_value,
    stage_level,
    stage_mark,
    stage_where,
    verdict_model,
    verdict_where,
)
from pytest_llmperf.reports.time_split import (
    cache_reset_word,
    format_server_value,
    metric_unit,
    server_figures,
    server_head,
    time_split,
)
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.blank import all_blank_note
from pytest_llmperf.slo.multiplicity import multiple_comparisons_line
from pytest_llmperf.specs.server_names import COMMON_METRICS, MetricKind, metric_kind
from pytest_llmperf.specs.slo import percentile_of

if TYPE_CHECKING:
    from pytest_llmperf.history.trends import TrendReport, TrendSection

__all__ = ["build_html_report", "write_html_report"]

_TEMPLATES = Path(__file__).parent / "templates"
_LATENCY_ROWS = ("ttft", "ttfo", "tpot", "itl", "e2e", "schedule_lag")
_STATS = ("p50", "p90", "p95", "p99", "p99.9", "mean", "min", "max", "count")
_PERCENTILE_COLUMNS = 5  # _STATS[:5]; a run's requested percentiles (p75) join them in order
# the server's latency histograms: the run's bucket deltas (bucket_ms: the p50's bucket width)
_SERVER_LATENCY_STATS = ("p50", "p90", "p95", "p99", "p99.9", "mean", "max", "count", "bucket_ms")
_SERVER_GAUGE_STATS = ("max", "mean", "min")


def build_html_report(
    report: Mapping[str, Any],
    data: SessionData | None = None,
    trends: TrendReport | None = None,
) -> str:
    """Render ``report`` (as built by :func:`~.json_report.build_report`) to HTML text.

    ``trends`` (``--llm-history``, :func:`~pytest_llmperf.history.trends.report_trends`)
    adds a history row to the summary and, to each test with stored comparable runs, its
    metrics over them with change points and the current run marked; without it the
    report is exactly what it was before histories existed.
    """
    template = _environment().get_template("report.html.jinja2")
    states = {t.nodeid: t.states for t in data.tests.values()} if data else {}
    sections = trends.sections if trends else {}
    tests = [
        _test_view(t, states.get(t["nodeid"], []), sections.get(t["nodeid"], []))
        for t in report.get("tests", [])
    ]
    return template.render(
        report=report,
        trends=trends,
        endpoint=report.get("endpoint", {}),
        session=report.get("session", {}),
        multiplicity=_multiplicity(report),
        tests=tests,
        stopped=_stopped_view(report),
    )


@functools.cache
def _environment() -> jinja2.Environment:
    """The report's jinja2 environment, made once per process: it keeps its template
    compiled (~85 ms of a core each time; a process that writes several reports, as the
    test suite's in-process sessions do, compiled it for each; a changed template file
    is still read again, by jinja2's own check of its modification time)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["value"] = lambda v, unit="ms": format_value(v, unit)
    env.filters["interval"] = format_interval
    env.filters["change"] = format_change
    env.filters["mark"] = lambda verdict: MARKS.get(verdict, "")
    env.filters["cell"] = _cell
    env.filters["where"] = verdict_where
    env.filters["stage_cell"] = lambda v: stage_where(v).removeprefix("stage ")
    env.filters["model_cell"] = verdict_model
    return env


def _stopped_view(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """A session that stopped before load: the banner under the title (gate_states.py's
    words, as the Markdown's first line), else None."""
    stopped = (report.get("session") or {}).get("stopped")
    if not stopped:
        return None
    return {**stopped, "line": did_not_run_line(stopped)}


def _multiplicity(report: Mapping[str, Any]) -> str:
    """The session's many comparisons and how their false-failure rate is held (the
    terminal's line), or ``""`` when the session compared nothing."""
    summary = (report.get("session") or {}).get("multiple_comparisons")
    return multiple_comparisons_line(summary).removeprefix("llmperf: ") if summary else ""


def write_html_report(
    path: str | os.PathLike[str],
    report: Mapping[str, Any],
    data: SessionData | None = None,
    trends: TrendReport | None = None,
) -> Path:
    """Write atomically (temp file + rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(build_html_report(report, data, trends), "utf-8")
    os.replace(tmp, target)
    return target


def _test_view(
    test: Mapping[str, Any],
    states: list[dict[str, Any]],
    trend_sections: Sequence[TrendSection] = (),
) -> dict[str, Any]:
    runs = []
    slos = list(test.get("slos", []))
    for i, run in enumerate(test.get("runs", [])):
        state = states[i] if i < len(states) else None
        runs.append(_run_view(run, state, slos))
    analyses = []
    for analysis in test.get("analyses", []):
        svg = plots.analysis_curve(analysis) if analysis.get("kind") == "curve" else None
        analyses.append({**analysis, "svg": Markup(svg) if svg else None})
    load_curve = plots.latency_vs_load_plot(test.get("runs", []))
    return {
        **test,
        "anchor": "test-" + "".join(c if c.isalnum() else "-" for c in test["nodeid"]),
        "run_views": runs,
        "analysis_views": analyses,
        "load_curve": Markup(load_curve) if load_curve else None,
        "staged_slos": any(v.get("stage") is not None for v in slos),
        "modelled_slos": any(verdict_model(v) for v in slos),
        "baseline_rows": [  # each in its metric's unit (ms; a server count, s, MB)
            {**c, "unit": metric_unit(str(c.get("metric") or ""))}
            for c in test.get("baseline", [])
            if c.get("metric") != "*"
        ],
        "baseline_notes": [c for c in test.get("baseline", []) if c.get("metric") == "*"],
        "trend_views": [_trend_view(s) for s in trend_sections],
        "nothing_measured_line": (
            f"{NOTHING_MEASURED}: {test['nothing_measured']}"
            if test.get("nothing_measured")
            else None
        ),
    }


def _trend_view(section: TrendSection) -> dict[str, Any]:
    """One run's history: its charts, and its change points as table rows."""
    rows = []
    for series in section.series:
        for cp in series.change_points:
            point = series.points[cp.index]
            rows.append(
                {
                    "metric": series.title,
                    "run": cp.index + 1,
                    "when": "this run" if series.current == cp.index else point.when[:19],
                    "tag": point.tag,
                    "before": cp.mean_before,
                    "after": cp.mean_after,
                    "change": cp.relative_change,
                    "p_value": cp.p_value,
                    "unit": series.unit,
                }
            )
    return {
        "label": section.label,
        "key": section.key,
        "stored": max(len(s.points) - (s.current is not None) for s in section.series),
        "charts": [Markup(svg) for svg in section.charts],
        "change_rows": rows,
    }


def _run_view(
    run: Mapping[str, Any], state: Mapping[str, Any] | None, slos: list[Mapping[str, Any]]
) -> dict[str, Any]:
    charts: dict[str, list[Markup]] = {"cdf": [], "histogram": [], "throughput": []}
    stages = list(run.get("stages") or [])
    if state is not None:
        acc = MetricsAccumulator.from_state(state)
        for metric in plots.PLOTTED_METRICS:
            hist = acc.histograms[metric]
            charts["cdf"].append(Markup(plots.cdf_plot(hist, metric)))
            charts["histogram"].append(Markup(plots.histogram_plot(hist, metric)))
        charts["throughput"] = [
            Markup(s) for s in plots.throughput_plots(acc, stages=stages, steady=run.get("steady"))
        ]
        charts["latency"] = [Markup(s) for s in plots.latency_timeline_plots(acc, stages=stages)]
        charts["lag"] = [Markup(plots.cdf_plot(acc.histograms["schedule_lag"], "schedule_lag"))]
        if acc.histograms["queue_wait"].count:  # a capped open loop: its users' wait for a slot
            charts["cdf"].append(Markup(plots.cdf_plot(acc.histograms["queue_wait"], "queue_wait")))
    server = run.get("server_metrics")
    # the server's gauges over the run, drawn beside its throughput over time
    charts["server"] = [Markup(svg) for svg in plots.server_series_plots(server, stages=stages)]
    workload = dict(run.get("workload", {}))
    config = [
        ("workload", workload.get("name")),
        *[(f"workload.{k}", v) for k, v in workload.items() if k != "name" and not is_path_key(k)],
        *path_config_rows(workload),
        *[(f"load.{k}", v) for k, v in dict(run.get("load", {})).items()],
        ("token counts from", run.get("metrics", {}).get("token_count_source")),
        ("started at", run.get("started_at")),
        ("wall duration", f"{run.get('duration_s', 0):.2f} s"),
        ("gated (judged by SLOs)", run.get("gated", True)),
        *([("prefix cache", reset)] if (reset := cache_reset_word(run.get("cache_reset"))) else []),
    ]
    label = run.get("label")
    stage_rows = []
    for stage in stages:
        verdicts = [v for v in slos if v.get("run") == label and v.get("stage") == stage["index"]]
        stage_server = stage.get("server_metrics")
        stage_rows.append(
            {
                **stage,
                "level": stage_level(stage),
                "verdicts": verdicts,
                "mark": stage_mark(verdicts),
                "server": (
                    ", ".join(server_figures(stage_server)) or server_head(stage_server)
                    if stage_server is not None
                    else None
                ),
            }
        )
    metrics = run.get("metrics", {})
    queued = (metrics.get("queue_wait") or {}).get("count", 0)
    latency_rows = (*_LATENCY_ROWS, "queue_wait") if queued else _LATENCY_ROWS
    return {
        **run,
        "charts": charts,
        "config": config,
        "steady_line": steady_line(run),
        "stage_rows": stage_rows,
        "turn_rows": list(run.get("turns") or []),
        "conversation_view": _conversation_view(run),
        "fleet_view": fleet_html(run, slos, stages),
        "gpu_view": gpu_html(run, stages),
        "latency_rows": latency_rows,
        "stats": _stat_columns(metrics.get(name) for name in latency_rows),
        "cancelled": (run.get("counts") or {}).get("cancelled", 0),
        "blank": (run.get("counts") or {}).get("blank", 0),
        "blank_note": all_blank_note(run.get("counts") or {}),
        "server_view": _server_view(server) if server is not None else None,
        "process_view": _process_view(run.get("server_process")),
        "split_view": _split_view(run),
        "stage_server": any(row["server"] is not None for row in stage_rows),
        "outputs_view": outputs_view(run, slos),
    }


def _conversation_view(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """A run's conversations (``runs[].conversations``) as the "Conversations" section:
    its figures in words, the turn-band and prompt-band tables and the two plots."""
    if not has_conversations(run):
        return None
    block = run["conversations"]
    return {
        "figures": conversation_figures(block),
        "header": BAND_HEADER,
        "turn_rows": band_rows(block, "by_turn_band"),
        "prompt_rows": band_rows(block, "by_prompt_band"),
        "charts": [Markup(svg) for svg in plots.turn_band_plots(block)],
    }


def _process_view(block: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A run's ``server_process`` block as the "Server process" table, its log as a
    ``file://`` link and, where the server exited, the banner's message and log tail."""
    if not block:
        return None
    log = block.get("log")
    return {
        "rows": process_rows(block),
        "log": str(log) if log else "",
        "log_url": log_uri(log),
        "exit": exit_message(block),
        "tail": exit_tail(block),
    }


def _server_latency_cell(entry: Mapping[str, Any], stat: str) -> str:
    """One cell of a server latency histogram: ``≤ 40.0 ms`` for a statistic read at its
    bucket's upper bound (``{stat}_lo`` beside it), as the terminal says it."""
    if stat == "count":
        return _cell(entry.get(stat))
    figure = format_value(entry.get(stat), "ms")
    return f"≤ {figure}" if entry.get(f"{stat}_lo") is not None else figure


def _server_view(server: Mapping[str, Any]) -> dict[str, Any]:
    """A run's ``server_metrics`` as tables of formatted cells: latency histograms (ms),
    gauges (max, mean, min), counts and ratios (value), an unknown family's raw ones."""
    metrics = dict(server.get("metrics") or {})
    order = {name: i for i, name in enumerate(COMMON_METRICS)}
    names = sorted(metrics, key=lambda n: (order.get(n, len(order)), n))
    latency, gauges, values = [], [], []
    for name in names:
        entry = metrics[name] if isinstance(metrics[name], Mapping) else {}
        kind = metric_kind(name)
        if kind is MetricKind.LATENCY:
            cells = [_server_latency_cell(entry, s) for s in _SERVER_LATENCY_STATS]
            latency.append({"name": name, "cells": cells})
        elif kind is MetricKind.GAUGE:
            cells = [format_server_value(name, entry.get(s)) for s in _SERVER_GAUGE_STATS]
            gauges.append({"name": name, "cells": cells})
        else:
            values.append({"name": name, "value": format_server_value(name, entry.get("value"))})
    raw = server.get("raw") or {}
    return {
        "head": server_head(server),
        "family": server.get("family") or "unknown",
        "source": server.get("source"),
        "scrapes": int(server.get("scrapes") or 0),
        "missing": server.get("missing"),
        "latency": latency,
        "latency_stats": _SERVER_LATENCY_STATS,
        "gauges": gauges,
        "gauge_stats": _SERVER_GAUGE_STATS,
        "counters": values,
        "raw": sorted((str(k), _cell(v)) for k, v in raw.items()),
    }


def _split_view(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where the run's TTFT went: per statistic the client's TTFT and each part (ms), the
    server's own TTFT where it has one, and the stacked bars."""
    split = time_split(run)
    if split is None:
        return None
    has_server_ttft = any(v is not None for v in split.server_ttft.values())
    rows = [
        {
            "stat": stat,
            "ttft": format_value(split.ttft.get(stat), "ms"),
            "parts": [format_value(p.values.get(stat), "ms") for p in split.parts],
            "server_ttft": format_value(split.server_ttft.get(stat), "ms"),
        }
        for stat in split.stats
    ]
    return {
        "per_request": split.per_request,
        "source": split.source,
        "labels": [p.label for p in split.parts],
        "rows": rows,
        "server_ttft": has_server_ttft,
        "notes": list(split.notes),
        "svg": Markup(plots.ttft_split_plot(split)),
    }


def _stat_columns(rows: Iterable[Any]) -> tuple[str, ...]:
    """The metric table's columns: the standard statistics, plus any further percentile
    the rows carry (a test's ``ttft.p75`` SLO), among the percentiles in numeric order."""
    extra = {
        key
        for row in rows
        if isinstance(row, Mapping)
        for key in row
        if key not in _STATS and key.startswith("p") and _is_percentile(key)
    }
    percentiles = sorted((*_STATS[:_PERCENTILE_COLUMNS], *extra), key=lambda k: float(k[1:]))
    return (*percentiles, *_STATS[_PERCENTILE_COLUMNS:])


def _is_percentile(key: str) -> bool:
    try:
        return percentile_of(key) is not None
    except ValueError:
        return False


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(v) for v in value)
    return str(value)
