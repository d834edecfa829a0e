"""The Markdown summary (``--llm-markdown=PATH``, ``$GITHUB_STEP_SUMMARY``): the session's
verdict for a pull request, in GitHub-flavoured Markdown.

Built from the JSON report alone (:func:`~pytest_llmperf.reports.json_report.build_report`,
with the ``trends`` digest the plugin adds under ``--llm-history``), so
``python -m pytest_llmperf.reports.markdown report.json`` writes the same text later, for a
comment step. In order:

1. the verdict line (passed / N tests failed / inconclusive / interrupted) and the counts;
2. a table per failing test, then per inconclusive one: each SLO (observed, target, the
   baseline's or history's value of the same statistic and the change), each baseline,
   history and A/B comparison, the verdicts; the notes; where a failing latency's time
   went; the failed requests in the server's words; the outputs checked (invalid ones in
   the validator's words) and compared (the mismatching samples, where each parts);
3. the session-wide targets (``--llm-ruleset``);
4. a compact table of every gated run (TTFT, TPOT, ITL p50/p99, throughput, errors,
   goodput), a line per run of the server's own view, and of what its workload asked
   beyond plain text (structured output, tools, adapters, greedy); a fleet's runs, per
   replica and per pool (collapsed for a passing test);
5. with ``--llm-history``: per run each statistic's last values as a sparkline and the
   change point the history finds;
6. the endpoint and server identity, the load generator's self-check;
7. collapsed (``<details>``): the passing tests' tables, per-stage, per-turn and
   per-model tables.

Within :data:`~pytest_llmperf.gfm.CHAR_LIMIT` characters (a GitHub comment holds 65,536):
the least important parts go first (passing tests' details, per-stage and per-turn tables,
passing tests' trends and runs, then failing tests' trends and runs), with a note saying
what was left out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.gate_states import did_not_run_line
from pytest_llmperf.gfm import CHAR_LIMIT, Block, Document, Section, code, details, table, text
from pytest_llmperf.history.markdown import TREND_HEADER, trend_rows
from pytest_llmperf.reports.conversation_view import conversation_markdown
from pytest_llmperf.reports.fleet_words import fleet_markdown
from pytest_llmperf.reports.gpu_words import gpu_markdown
from pytest_llmperf.reports.markdown_outputs import paths_line
from pytest_llmperf.reports.markdown_runs import (
    identity_lines,
    model_table,
    process_md_line,
    run_row,
    runs_table_head,
    self_check_lines,
    server_line,
    stage_table,
    turn_table,
)
from pytest_llmperf.reports.markdown_tables import TestView, checks_block, mark, test_view
from pytest_llmperf.reports.steady_words import steady_line
from pytest_llmperf.reports.table import format_interval, format_value
from pytest_llmperf.slo.multiplicity import multiple_comparisons_line

__all__ = [
    "STEP_SUMMARY_ENV",
    "append_step_summary",
    "build_markdown",
    "main",
    "verdict_line",
    "write_markdown",
]

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"

# what goes first when the text is over the limit (lowest first)
_PASSING_DETAILS, _STAGES, _PASSING_TRENDS, _PASSING_RUNS = 1, 2, 3, 4
_FAILING_TRENDS, _FAILING_RUNS, _INCONCLUSIVE, _FAILING = 5, 6, 7, 8

_LEFT_OUT = {
    "passing": "passing tests' tables",
    "stages": "per-stage/per-turn tables",
    "models": "per-model tables",
    "conversations": "per-conversation tables",
    "fleet": "per-replica tables",
    "gpu": "GPU tables",
    "trend": "trend tables",
    "run": "rows of the gated-runs table",
    "server": "server lines",
    "inconclusive": "inconclusive tests' tables",
    "failing": "failing tests' tables",
}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def verdict_line(report: Mapping[str, Any]) -> str:
    """The first line: ``## ❌ pytest-llmperf: 2 tests failed`` (``passed``,
    ``inconclusive``, ``interrupted``, ``session targets missed``; a session that stopped
    before load: ``the gate did not run: ...``)."""
    views = [test_view(t) for t in report.get("tests") or []]
    session = report.get("session") or {}
    failed = sum(1 for v in views if v.kind == "fail") + _other_failures(report, views)
    inconclusive = sum(1 for v in views if v.kind == "inconclusive")
    session_failed = any(v.get("verdict") == "fail" for v in session.get("slos") or [])
    exitstatus = session.get("exitstatus")
    if session.get("stopped"):  # nothing was judged: never green (gate_states.py)
        head = f"⛔ pytest-llmperf: {did_not_run_line(session['stopped'])}"
    elif session.get("interrupted"):
        said = f" ({_plural(failed, 'test')} failed)" if failed else ""
        head = f"⏹️ pytest-llmperf: interrupted{said}"
    elif failed:
        head = f"❌ pytest-llmperf: {_plural(failed, 'test')} failed"
    elif session_failed:
        head = "❌ pytest-llmperf: session-wide targets missed"
    elif inconclusive:
        head = f"⚠️ pytest-llmperf: inconclusive ({_plural(inconclusive, 'test')} undecided)"
    elif exitstatus not in (None, 0, 5):
        head = f"❌ pytest-llmperf: failed (exit status {exitstatus})"
    else:
        head = "✅ pytest-llmperf: passed"
    return f"## {head}\n"


def _other_failures(report: Mapping[str, Any], views: Sequence[TestView]) -> int:
    """Failed tests the report has no entry for (they measured nothing)."""
    outcomes = (report.get("session") or {}).get("outcomes") or {}
    measured = sum(1 for v in views if str(v.test.get("outcome")) == "failed")
    return max(0, int(outcomes.get("failed", 0)) - measured)


def _counts_line(report: Mapping[str, Any], views: Sequence[TestView]) -> str:
    session = report.get("session") or {}
    kinds: dict[str, int] = {}
    for v in views:
        kinds[v.kind] = kinds.get(v.kind, 0) + 1
    words = {"fail": "failed", "inconclusive": "inconclusive", "pass": "passed"}
    parts = [
        f"**{kinds[k]} {words.get(k, k)}**"
        for k in ("fail", "inconclusive", "pass", *sorted(set(kinds) - set(words)))
        if kinds.get(k)
    ]
    other = _other_failures(report, views)
    outcomes = dict(session.get("outcomes") or {})
    for v in views:
        outcome = str(v.test.get("outcome"))
        outcomes[outcome] = outcomes.get(outcome, 0) - 1
    rest = {k: n for k, n in outcomes.items() if n > 0}
    if rest:
        said = ", ".join(f"{n} {k}" for k, n in sorted(rest.items()))
        parts.append(f"other tests: {said}" + (" (failed outside any SLO)" if other else ""))
    if not views:
        parts.append("no test measured anything")
    runs = [
        r for t in report.get("tests") or [] for r in t.get("runs") or [] if r.get("gated", True)
    ]
    issued = sum(int((r.get("counts") or {}).get("issued") or 0) for r in runs)
    completed = sum(int((r.get("counts") or {}).get("completed") or 0) for r in runs)
    blank = sum(int((r.get("counts") or {}).get("blank") or 0) for r in runs)
    parts.append(
        f"{_plural(len(runs), 'gated run')}, {completed}/{issued} requests completed"
        + (f" ({blank} blank)" if blank else "")
    )
    policy = (session.get("options") or {}).get("inconclusive")
    if kinds.get("inconclusive") and policy:
        parts.append(f"`--llm-inconclusive={text(policy)}`")
    if session.get("exitstatus") is not None:
        parts.append(f"exit status {session['exitstatus']}")
    line = " · ".join(parts) + "\n"
    summary = session.get("multiple_comparisons")
    if summary:  # how the session's many comparisons hold its false-failure rate
        line += "\n" + text(multiple_comparisons_line(summary).removeprefix("llmperf: ")) + "\n"
    return line


def _stop_lines(session: Mapping[str, Any]) -> str:
    """Why nothing was judged (a stop before load: the reason, the endpoint, the server's
    words) and the tests whose xdist worker was lost."""
    lines = []
    stopped = session.get("stopped")
    if stopped:
        said = stopped.get("server_says")
        lines += [
            f"- **why**: {text(stopped.get('reason') or '-')}",
            f"- **endpoint**: {code(stopped.get('endpoint') or '-', cell=False)}",
            f"- **the server says**: {text(said)}" if said else "- the server said nothing",
        ]
    for lost in session.get("worker_lost") or []:
        lines.append(
            f"- **worker lost**: `{text(lost.get('worker') or '?')}` crashed while running "
            f"{code(lost.get('nodeid') or '-', cell=False)}"
        )
    return "\n".join(lines) + "\n\n" if lines else ""


def _test_section(view: TestView, rank: int, what: str) -> Section:
    icon = "❌ Failed" if view.kind == "fail" else "⚠️ Inconclusive"
    why = f" ({text('; '.join(view.why))})" if view.why else ""
    body = f"### {icon}: {code(view.nodeid, cell=False)}{why}\n\n{checks_block(view)}\n"
    return Section(blocks=[Block(body, rank=rank, what=what)])


def _session_slos(report: Mapping[str, Any]) -> Section | None:
    slos = (report.get("session") or {}).get("slos") or []
    if not slos:
        return None
    rows = [
        [
            code(v.get("expr", "")),
            text(v.get("run") or "-"),
            format_value(v.get("observed"), str(v.get("unit") or "ms")),
            text(format_interval(v) or "-"),
            format_value(v.get("target"), str(v.get("unit") or "ms")),
            str(v.get("samples", "-")),
            mark(v.get("verdict")),
            text(v.get("reason") or ""),
        ]
        for v in slos
    ]
    header = (
        "target",
        "group",
        "observed",
        "interval",
        "target value",
        "samples",
        "verdict",
        "why",
    )
    return Section("### Session-wide targets\n\n" + table(header, rows, right=(2, 3, 4, 5)) + "\n")


def _gated(test: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in test.get("runs") or [] if r.get("gated", True)]


def _runs_sections(views: Sequence[TestView]) -> list[Section]:
    rows, servers, paths, processes, windows = [], [], [], [], []
    for view in views:
        important = view.kind in ("fail", "inconclusive")
        rank = _FAILING_RUNS if important else _PASSING_RUNS
        for run in _gated(view.test):
            row = "| " + " | ".join(run_row(view.nodeid, run)) + " |\n"
            rows.append(Block(row, rank=rank, what="run"))
            line = server_line(view.nodeid, run)
            if line is not None:
                servers.append(Block(f"- {line}\n", rank=rank, what="server"))
            said = process_md_line(view.nodeid, run)
            if said is not None:
                line, died = said
                processes.append(
                    Block(f"- {line}\n", rank=_FAILING if died else rank, what="server")
                )
            if (window := steady_line(run)) is not None:
                windows.append(
                    Block(f"- {code(view.nodeid)} {text(window)}\n", rank=rank, what="run")
                )
            asked = paths_line(view.nodeid, run)
            if asked is not None:
                paths.append(Block(f"- {asked}\n", rank=rank, what="run"))
    if not rows:
        return []
    out = [Section("### Gated runs\n\n" + runs_table_head(), rows, "\n")]
    if windows:  # llm_load(steady=...): the throughput figures above are the window's
        out.append(Section("**Steady-state windows** (throughput over them):\n\n", windows, "\n"))
    if paths:
        out.append(Section("**Asked of the server** beyond plain text:\n\n", paths, "\n"))
    if servers:
        out.append(
            Section("**The server's own view** (its /metrics over each run):\n\n", servers, "\n")
        )
    if processes:
        out.append(Section("**The server process** (started by the gate):\n\n", processes, "\n"))
    return out


def _fleet_sections(views: Sequence[TestView]) -> list[Section]:
    """A fleet's runs (``runs[].by_replica``, ``runs[].fleet``): per run its figures, the
    per-replica and per-pool tables (:func:`~.fleet_words.fleet_markdown`), open for a
    failing test; none without a fleet."""
    blocks = []
    for view in views:
        important = view.kind in ("fail", "inconclusive")
        slos = list(view.test.get("slos") or [])
        for run in _gated(view.test):
            if body := fleet_markdown(view.nodeid, run, slos):
                rank = _FAILING_RUNS if important else _STAGES
                blocks.append(Block(body + "\n", rank=rank, what="fleet"))
    if not blocks:
        return []
    head = "### Fleet: per replica and per pool\n\n"
    return [Section(head, blocks)]


def _gpu_sections(views: Sequence[TestView]) -> list[Section]:
    """The GPUs of each gated run that read them (``runs[].gpu``): its table, the GPUs
    together then each GPU (:func:`~.gpu_words.gpu_markdown`); none without a block."""
    blocks = []
    for view in views:
        important = view.kind in ("fail", "inconclusive")
        for run in _gated(view.test):
            if body := gpu_markdown(view.nodeid, run):
                rank = _FAILING_RUNS if important else _STAGES
                blocks.append(Block(body + "\n", rank=rank, what="gpu"))
    if not blocks:
        return []
    head = "### GPUs: power, energy and memory over each run\n\n"
    return [Section(head, blocks)]


def _trends_sections(report: Mapping[str, Any], views: Sequence[TestView]) -> list[Section]:
    """``--llm-history``: the trend table of each run, a failing or inconclusive test's
    open, the passing tests' collapsed; or the history's note or error."""
    trends = report.get("trends")
    if not isinstance(trends, Mapping):
        return []
    where = code(trends.get("where") or "-", cell=False)
    if trends.get("error"):
        return [
            Section(f"### Trends\n\nHistory {where}: **unreadable**: {text(trends['error'])}\n\n")
        ]
    by_test = trends.get("tests") or {}
    if not by_test:
        note = trends.get("note") or "no stored run comparable with this session's runs yet"
        return [Section(f"### Trends\n\nHistory {where}: {text(note)}.\n\n")]
    last = trends.get("last") or 20
    head = (
        f"### Trends\n\nHistory {where}: each statistic's last {last} values, this run last "
        "(`│`: a change point; E-divisive means, permutation test, significance 0.05).\n\n"
    )
    failing: list[Block] = []
    passing: list[Block] = []
    changed = 0
    for view in views:
        important = view.kind in ("fail", "inconclusive")
        for entry in by_test.get(view.nodeid) or []:
            series = entry.get("series") or []
            title = (
                f"{code(view.nodeid, cell=False)} [{text(entry.get('run') or '-')}] · "
                f"key {code(entry.get('key') or '-', cell=False)}\n\n"
            )
            body = table(TREND_HEADER, trend_rows(series), right=(1,))
            if important:
                failing.append(Block(title + body + "\n", rank=_FAILING_TRENDS, what="trend"))
            else:
                changed += any(s.get("change_points") for s in series)
                passing.append(Block(title + body + "\n", rank=_PASSING_TRENDS, what="trend"))
    out = [Section(head), Section("", failing)] if failing else [Section(head)]
    if passing:
        with_change = f"; {changed} with a change point" if changed else ""

        def summary(kept: int, total: int) -> str:
            shown = "" if kept == total else f", {kept} shown"
            return (
                f"<details><summary>Trends of the passing tests ({_plural(total, 'run')}{shown}"
                f"{with_change})</summary>\n\n"
            )

        out.append(Section(summary, passing, "</details>\n\n"))
    return out


def _details_sections(views: Sequence[TestView]) -> list[Section]:
    passing = [v for v in views if v.kind not in ("fail", "inconclusive")]
    out = []
    if passing:
        blocks = [
            Block(
                f"#### {mark(v.kind) if v.kind == 'pass' else text(v.kind)}: "
                f"{code(v.nodeid, cell=False)}\n\n{checks_block(v)}\n",
                rank=_PASSING_DETAILS,
                what="passing",
            )
            for v in passing
        ]

        def head(kept: int, total: int) -> str:
            shown = "" if kept == total else f", {kept} shown"
            return f"<details><summary>Passing tests ({total}{shown})</summary>\n\n"

        out.append(Section(head, blocks, "</details>\n\n"))
    staged = []
    for view in views:
        for run in view.test.get("runs") or []:
            where = f"{view.nodeid} [{run.get('label') or '-'}]"
            if run.get("stages"):
                body = stage_table(run, list(view.test.get("slos") or []))
                staged.append(Block(details(f"Stages: {where}", body) + "\n", _STAGES, "stages"))
            if run.get("turns"):
                body = turn_table(run)
                staged.append(Block(details(f"Turns: {where}", body) + "\n", _STAGES, "stages"))
            if body := conversation_markdown(run):
                staged.append(
                    Block(details(f"Conversations: {where}", body) + "\n", _STAGES, "conversations")
                )
            body = model_table(run, list(view.test.get("slos") or []))
            if body:
                staged.append(Block(details(f"Models: {where}", body) + "\n", _STAGES, "models"))
    if staged:
        out.append(Section("", staged))
    return out


def _note(left: Mapping[str, int], limit: int) -> str:
    said = ", ".join(f"{n} {_LEFT_OUT.get(what, what)}" for what, n in left.items())
    return (
        f"> ✂️ **Shortened** to stay under {limit:,} characters: left out {said}. "
        "The JSON and HTML reports hold every figure.\n\n"
    )


def build_markdown(report: Mapping[str, Any], *, limit: int = CHAR_LIMIT) -> str:
    """The session's summary in GitHub-flavoured Markdown, within ``limit`` characters."""
    views = [test_view(t) for t in report.get("tests") or []]
    doc = Document(note=_note, note_at=1)
    doc.sections.append(Section(verdict_line(report) + "\n" + _counts_line(report, views) + "\n"))
    ended = _stop_lines(report.get("session") or {})
    if ended:
        doc.sections.append(Section(ended))
    for view in views:
        if view.kind == "fail":
            doc.sections.append(_test_section(view, _FAILING, "failing"))
    for view in views:
        if view.kind == "inconclusive":
            doc.sections.append(_test_section(view, _INCONCLUSIVE, "inconclusive"))
    session_slos = _session_slos(report)
    if session_slos:
        doc.sections.append(session_slos)
    doc.sections += _runs_sections(views)
    doc.sections += _fleet_sections(views)
    doc.sections += _gpu_sections(views)
    doc.sections += _trends_sections(report, views)
    identity = "".join(f"- {line}\n" for line in identity_lines(report))
    doc.sections.append(Section(f"### Endpoint and server\n\n{identity}\n"))
    checks = "".join(f"- {line}\n" for line in self_check_lines(report.get("tests") or []))
    doc.sections.append(Section(f"### Load generator self-check\n\n{checks}\n"))
    doc.sections += _details_sections(views)
    footer = (
        f"<sub>pytest-llmperf · report_version {text(report.get('report_version', '-'))} · "
        f"generated {text(report.get('generated_at') or '-')} · latencies in ms at the "
        "client, counted from each request's planned send</sub>\n"
    )
    doc.sections.append(Section(footer))
    return doc.render(limit)[0]


def write_markdown(path: str | os.PathLike[str], markdown: str) -> Path:
    """Write atomically (temp file + rename), so a reader never sees half a summary."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(markdown, "utf-8")
    os.replace(tmp, target)
    return target


def append_step_summary(path: str | os.PathLike[str], markdown: str) -> Path:
    """Append to GitHub's step summary file (never overwrite: other steps and sessions
    write there too), a blank line between one summary and the next."""
    target = Path(path)
    with target.open("a", encoding="utf-8") as out:
        if target.stat().st_size:
            out.write("\n")
        out.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_llmperf.reports.markdown report.json [--out FILE]``: the
    Markdown summary of a JSON report (``--llm-json``); exit status 2 for an unreadable
    report."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_llmperf.reports.markdown",
        description="Render a pytest-llmperf JSON report (--llm-json) as the Markdown "
        "summary that --llm-markdown writes.",
    )
    parser.add_argument("report", metavar="REPORT.json", help="the JSON report")
    parser.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    parser.add_argument(
        "--limit",
        type=int,
        default=CHAR_LIMIT,
        metavar="CHARS",
        help=f"size cap in characters (default {CHAR_LIMIT})",
    )
    args = parser.parse_args(argv)
    try:
        report = json.loads(Path(args.report).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"pytest_llmperf.reports.markdown: cannot read {args.report}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(report, dict) or "tests" not in report:
        print(
            f"pytest_llmperf.reports.markdown: {args.report} is no pytest-llmperf JSON report",
            file=sys.stderr,
        )
        return 2
    markdown = build_markdown(report, limit=args.limit)
    if args.out:
        write_markdown(args.out, markdown)
    else:
        sys.stdout.write(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
