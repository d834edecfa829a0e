"""The Markdown summary's run and session pieces, read from the JSON report: a gated
run's row (:func:`run_row`), the server's view of it (:func:`server_line`) and the
server process the gate started (:func:`process_md_line`), a staged
run's stages, a multi-turn run's turns and a run's served models (:func:`stage_table`,
:func:`turn_table`, :func:`model_table`), the
endpoint and server identity (:func:`identity_lines`) and the load generator's
self-check (:func:`self_check_lines`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.gfm import code, table, text
from pytest_llmperf.reports.markdown_tables import mark
from pytest_llmperf.reports.model_view import issued_share, model_entries, model_mark
from pytest_llmperf.reports.output_words import validity
from pytest_llmperf.reports.server_process import exit_message, process_line
from pytest_llmperf.reports.table import format_value, stage_level, stage_mark
from pytest_llmperf.reports.time_split import (
    cache_reset_note,
    ms_figure,
    server_figures,
    server_head,
    time_split,
)

__all__ = [
    "RUN_HEADER",
    "identity_lines",
    "model_table",
    "ok_cell",
    "process_md_line",
    "run_row",
    "runs_table_head",
    "self_check_lines",
    "server_line",
    "stage_table",
    "turn_table",
]

RUN_HEADER = (
    "test",
    "run",
    "ok/issued",
    "TTFT p50",
    "TTFT p99",
    "TPOT p50",
    "TPOT p99",
    "ITL p50",
    "ITL p99",
    "throughput",
    "output",
    "errors",
    "goodput",
)
_RUN_RIGHT = tuple(range(2, len(RUN_HEADER)))


def ok_cell(counts: Mapping[str, Any]) -> str:
    """``completed/issued``, and the blank replies among the completed where there are
    any: ``40/40 (7 blank)`` (completed with no visible text, docs/measurement.md)."""
    cell = f"{counts.get('completed', 0)}/{counts.get('issued', 0)}"
    return cell + (f" ({blank} blank)" if (blank := counts.get("blank")) else "")


def run_row(nodeid: str, run: Mapping[str, Any]) -> list[str]:
    """The gated-runs table's row (:data:`RUN_HEADER`) of one run."""
    m = run.get("metrics") or {}
    counts = run.get("counts") or {}

    def lat(metric: str, stat: str) -> str:
        entry = m.get(metric)
        return format_value(entry.get(stat) if isinstance(entry, Mapping) else None, "ms")

    def num(name: str, unit: str) -> str:
        value = m.get(name)
        return format_value(float(value), unit) if isinstance(value, (int, float)) else "-"

    return [
        code(nodeid),
        text(run.get("label") or "-"),
        ok_cell(counts),
        lat("ttft", "p50"),
        lat("ttft", "p99"),
        lat("tpot", "p50"),
        lat("tpot", "p99"),
        lat("itl", "p50"),
        lat("itl", "p99"),
        num("request_throughput", "req/s"),
        num("output_throughput", "tok/s"),
        num("error_rate", "fraction"),
        num("goodput", "fraction"),
    ]


def runs_table_head() -> str:
    """The gated-runs table's header lines (rows follow, one per :func:`run_row`)."""
    return table(RUN_HEADER, [], right=_RUN_RIGHT)


def server_line(nodeid: str, run: Mapping[str, Any]) -> str | None:
    """One line of the server's own view of a run: family, its TTFT p50/p99, queue p99,
    preemptions (and the other key figures it has), the TTFT split at p99 where there is
    one, the prefix-cache reset; None when ``--llm-server-metrics`` was off."""
    server = run.get("server_metrics")
    if not isinstance(server, Mapping):
        return None
    figures = server_figures(server)
    family = server.get("family") or "unknown"
    said = ", ".join(figures) if figures else server_head(server)
    line = f"{code(nodeid, cell=False)} [{text(run.get('label') or '-')}]: **{text(family)}**"
    line += f": {text(said)}"
    split = time_split(run)
    if split is not None:
        parts = " + ".join(f"{p.label} {ms_figure(p.values.get('p99'))}" for p in split.parts)
        line += text(f"; ttft p99 {ms_figure(split.ttft.get('p99'))} ≈ {parts} ms")
    if reset := cache_reset_note(run.get("cache_reset")):
        line += f"; {text(reset)}"
    return line


def process_md_line(nodeid: str, run: Mapping[str, Any]) -> tuple[str, bool] | None:
    """One line of the server process the gate started, for a run: startup, RSS, CPU
    (:func:`~pytest_llmperf.reports.server_process.process_line`) and, in bold, its exit;
    with whether it exited. None for a run without the block (an endpoint URL)."""
    block = run.get("server_process")
    if not isinstance(block, Mapping):
        return None
    line = f"{code(nodeid, cell=False)} [{text(run.get('label') or '-')}]: "
    line += text(process_line(block))
    died = exit_message(block)
    if died:
        line += f"; **{text(died)}**"
        if block.get("log"):
            line += f" (log: {code(str(block['log']), cell=False)})"
    return line, bool(died)


def stage_table(run: Mapping[str, Any], slos: Sequence[Mapping[str, Any]]) -> str:
    """A staged run's stages: planned and achieved load, requests, latencies, errors and
    the stage's verdict (the worst of its SLOs')."""
    label = run.get("label")
    rows = []
    for stage in run.get("stages") or []:
        m = stage.get("metrics") or {}
        counts = stage.get("counts") or {}
        verdicts = [
            v for v in slos if v.get("run") == label and v.get("stage") == stage.get("index")
        ]
        worst = stage_mark(verdicts)
        rows.append(
            [
                str(stage.get("index")),
                text(stage_level(stage)),
                format_value(stage.get("achieved_rate"), "req/s"),
                ok_cell(counts),
                format_value((m.get("ttft") or {}).get("p50"), "ms"),
                format_value((m.get("ttft") or {}).get("p99"), "ms"),
                format_value((m.get("tpot") or {}).get("p50"), "ms"),
                format_value((m.get("itl") or {}).get("p99"), "ms"),
                format_value(m.get("error_rate"), "fraction"),
                mark(worst) if worst else "-",
            ]
        )
    header = (
        "stage",
        "planned",
        "achieved",
        "ok/issued",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "ITL p99",
        "errors",
        "verdict",
    )
    return table(header, rows, right=range(2, 9))


def model_table(run: Mapping[str, Any], slos: Sequence[Mapping[str, Any]]) -> str:
    """A run's served models: share of the requests, requests, latencies, errors, valid
    share, and the model's verdict (the worst of its SLOs'); ``""`` without models."""
    label = run.get("label")
    rows = []
    for name, entry in model_entries(run):
        m = entry.get("metrics") or {}
        counts = entry.get("counts") or {}
        share = issued_share(entry, run)
        valid = validity(entry)
        worst = model_mark(slos, label, name)
        rows.append(
            [
                code(name),
                "-" if share is None else f"{share * 100:.1f}%",
                ok_cell(counts),
                format_value((m.get("ttft") or {}).get("p50"), "ms"),
                format_value((m.get("ttft") or {}).get("p99"), "ms"),
                format_value((m.get("tpot") or {}).get("p50"), "ms"),
                format_value((m.get("tpot") or {}).get("p99"), "ms"),
                format_value(m.get("error_rate"), "fraction"),
                "-" if valid is None else format_value(valid[2], "fraction"),
                mark(worst) if worst else "-",
            ]
        )
    if not rows:
        return ""
    header = (
        "model",
        "share",
        "ok/issued",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "errors",
        "valid",
        "verdict",
    )
    return table(header, rows, right=range(1, 9))


def turn_table(run: Mapping[str, Any]) -> str:
    """A multi-turn run's turns: requests and latencies per turn."""
    rows = []
    for turn in run.get("turns") or []:
        m = turn.get("metrics") or {}
        counts = turn.get("counts") or {}
        rows.append(
            [
                str(turn.get("turn")),
                ok_cell(counts),
                str(counts.get("failed", 0)),
                format_value((m.get("ttft") or {}).get("p50"), "ms"),
                format_value((m.get("ttft") or {}).get("p99"), "ms"),
                format_value((m.get("tpot") or {}).get("p50"), "ms"),
                format_value((m.get("e2e") or {}).get("p50"), "ms"),
            ]
        )
    header = ("turn", "ok/issued", "failed", "TTFT p50", "TTFT p99", "TPOT p50", "E2E p50")
    return table(header, rows, right=range(0, 7))


def _endpoint_words(endpoint: Mapping[str, Any]) -> str:
    url = endpoint.get("url")
    sim = endpoint.get("simulator")
    where = code(url, cell=False) if url else "-"
    if sim:
        where += f" (embedded simulator, profile {code(sim, cell=False)})"
    return where


def identity_lines(report: Mapping[str, Any]) -> list[str]:
    """The endpoint and server identity, as Markdown list items: URL, model, API, server
    software and version, where its metrics came from, request fields dropped, the
    baseline compared with (and whether comparable), the run options."""
    endpoint = report.get("endpoint") or {}
    session = report.get("session") or {}
    lines = []
    if endpoint.get("several"):
        each = [
            f"{_endpoint_words(e)}" + (f" {code(e['model'], cell=False)}" if e.get("model") else "")
            for e in endpoint.get("endpoints") or []
        ]
        lines.append("**endpoints**: " + "; ".join(each) + " (each test names the one it measured)")
    else:
        lines.append(f"**endpoint**: {_endpoint_words(endpoint)}")
        model = endpoint.get("model")
        lines.append(f"**model**: {code(model, cell=False) if model else '-'}")
        lines.append(f"**API**: {text(endpoint.get('api') or '-')}")
        software = endpoint.get("server_software") or "-"
        version = endpoint.get("server_version")
        lines.append(
            f"**server**: {text(software)}" + (f", version {text(version)}" if version else "")
        )
        if endpoint.get("server_metrics"):
            lines.append(f"**server metrics**: {text(endpoint['server_metrics'])}")
        for note in (endpoint.get("request_fields") or {}).get("notes") or []:
            lines.append(f"**request fields**: {text(note)}")
    baseline = session.get("baseline") or {}
    if baseline.get("compared_with"):
        words = f"**baseline**: {code(baseline['compared_with'], cell=False)}"
        if baseline.get("baseline_created_at"):
            words += f" (saved {text(baseline['baseline_created_at'])})"
        if baseline.get("comparable") is False:
            differs = ", ".join(str(d) for d in baseline.get("differs") or [])
            words += f"; **not comparable**: {text(differs or 'the fingerprints differ')}"
        lines.append(words)
    ruleset = session.get("ruleset")
    if isinstance(ruleset, Mapping) and ruleset.get("name"):
        lines.append(f"**ruleset**: {text(ruleset['name'])}")
    options = session.get("options") or {}
    if options:
        said = [
            f"scale {options.get('scale')}",
            f"workers {options.get('workers')}",
            f"--llm-inconclusive={options.get('inconclusive')}",
        ]
        lines.append(f"**options**: {text(', '.join(said))}")
    return lines


def self_check_lines(tests: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the load generator's self-check said over every gated run: that it kept up
    (worst schedule lag p99, lowest achieved share of a planned rate, busiest client
    CPU), or which runs it could not drive as planned, and why."""
    checks = [
        (str(t.get("nodeid")), str(r.get("label")), r.get("self_check") or {})
        for t in tests
        for r in t.get("runs") or []
        if r.get("gated", True)
    ]
    if not checks:
        return ["no gated run"]
    bound = [(n, label, c) for n, label, c in checks if c.get("generator_bound")]
    lags = [
        float(c["schedule_lag_p99_ms"])
        for _, _, c in checks
        if _is_number(c, "schedule_lag_p99_ms")
    ]
    shares = [
        float(c["achieved_rate"]) / float(c["planned_rate"])
        for _, _, c in checks
        if _is_number(c, "achieved_rate") and _is_number(c, "planned_rate") and c["planned_rate"]
    ]
    cpu = [float(c["client_cpu_share"]) for _, _, c in checks if _is_number(c, "client_cpu_share")]
    figures = []
    if lags:
        figures.append(f"schedule lag p99 at most {max(lags):.2f} ms (limit 10 ms)")
    if shares:
        figures.append(f"achieved rate at least {min(shares) * 100:.0f}% of the plan (limit 90%)")
    if cpu:
        figures.append(f"client CPU at most {max(cpu) * 100:.0f}% of a core")
    lines = []
    if not bound:
        lines.append(f"✅ the load generator kept up in every gated run ({len(checks)})")
    else:
        lines.append(
            f"⚠️ the load generator was the bottleneck in {len(bound)} of {len(checks)} gated "
            "run(s): their verdicts are inconclusive"
        )
        for nodeid, label, c in bound:
            reasons = "; ".join(str(r) for r in c.get("reasons") or []) or "no reason given"
            lines.append(f"{code(nodeid, cell=False)} [{text(label)}]: {text(reasons)}")
    if figures:
        lines.append(text(", ".join(figures)))
    return lines


def _is_number(entry: Mapping[str, Any], key: str) -> bool:
    value = entry.get(key)
    return isinstance(value, (int, float)) and not isinstance(value, bool)
