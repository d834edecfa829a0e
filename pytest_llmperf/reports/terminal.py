"""The ``llmperf`` section of pytest's terminal summary.

One line per SLO (✓ pass, ✗ fail, ? inconclusive) with observed and target
values, then the session's merged figures per endpoint and any session-wide
ruleset verdicts, then the paths of reports written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.table import MARKS, format_value
from pytest_llmperf.slo.verdicts import SloVerdict

__all__ = ["summary_lines", "write_terminal_summary"]


def summary_lines(data: SessionData, session_verdicts: Sequence[SloVerdict]) -> list[str]:
    lines: list[str] = []
    for test in data.measured_tests():
        lines.append(f"{test.nodeid} [{test.outcome}]")
        for v in test.slos:
            mark = MARKS.get(v["verdict"], " ")
            run = f" [{v['run']}]" if v.get("run") else ""
            why = f"  ({v['reason']})" if v.get("reason") else ""
            lines.append(
                f"  {mark} {v['expr']}{run}: observed {format_value(v['observed'], v['unit'])}"
                f", target {format_value(v['target'], v['unit'])}{why}"
            )
        if not test.slos:
            for run in test.runs:
                m = run["metrics"]
                lines.append(f"    {run['label']}: {_brief(m, run['counts'])}")
    merged = data.merged()
    if merged:
        lines.append("session (all gated runs merged):")
        for key, acc in merged.items():
            lines.append(f"  {key}: {_brief(acc.summary(), acc.counts())}")
    for v in session_verdicts:
        lines.append(
            f"  {MARKS.get(v.verdict, ' ')} session {v.expr}: observed "
            f"{format_value(v.observed, v.unit)}, target {format_value(v.target, v.unit)}"
            + (f"  ({v.reason})" if v.reason else "")
        )
    if data.interrupted:
        lines.append("session was interrupted: figures cover what was measured until then")
    return lines


def _brief(metrics: dict[str, Any], counts: dict[str, int]) -> str:
    ttft = metrics["ttft"]
    tpot = metrics["tpot"]
    return (
        f"{counts['completed']}/{counts['issued']} ok, "
        f"ttft p50 {format_value(ttft['p50'], 'ms')} p99 {format_value(ttft['p99'], 'ms')}, "
        f"tpot p50 {format_value(tpot['p50'], 'ms')}, "
        f"{metrics['request_throughput']:.2f} req/s, {metrics['output_throughput']:.1f} tok/s, "
        f"errors {metrics['error_rate'] * 100:.2f}%"
    )


def write_terminal_summary(
    terminalreporter: Any,
    data: SessionData,
    session_verdicts: Sequence[SloVerdict],
    written: Sequence[str],
) -> None:
    lines = summary_lines(data, session_verdicts)
    if not lines and not written:
        return
    terminalreporter.section("llmperf")
    for line in lines:
        terminalreporter.write_line(line)
    for path in written:
        terminalreporter.write_line(f"llmperf report: {path}")
