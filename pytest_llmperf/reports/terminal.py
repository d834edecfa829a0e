"""The ``llmperf`` section of pytest's terminal summary.

Per test one line per SLO (✓ pass, ✗ fail, ? inconclusive) with observed and
target values (on a staged run: per SLO and stage, then one line per stage
with its planned and achieved load, TTFT p99 and verdict; a run of more than
:data:`MAX_STAGE_LINES` stages lists only the stages that did not pass), and
its baseline comparisons when they say something
(regressed, improved, or could not compare); then per endpoint and model the
session's merged figures and one line per session-wide ruleset target; then
the paths of reports written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.table import (
    MARKS,
    error_sample_lines,
    format_change,
    format_value,
    stage_level,
    stage_mark,
    verdict_where,
)
from pytest_llmperf.slo.regression import RegressionVerdict
from pytest_llmperf.slo.verdicts import SloVerdict

__all__ = ["MAX_STAGE_LINES", "summary_lines", "write_terminal_summary"]

MAX_STAGE_LINES = 20  # a run with more stages lists only those that did not pass


def summary_lines(data: SessionData, session_verdicts: Sequence[SloVerdict]) -> list[str]:
    lines: list[str] = []
    notes: dict[str, None] = {}  # what the server refused, said once per session
    for test in data.measured_tests():
        for note in ((test.endpoint or {}).get("request_fields") or {}).get("notes", ()):
            notes[note] = None
        lines.append(f"{test.nodeid} [{test.outcome}]")
        # a run of many stages (a fine ramp) shows only its stages that did not pass
        many = {r["label"] for r in test.runs if len(r.get("stages") or ()) > MAX_STAGE_LINES}
        hidden = 0
        for v in test.slos:
            if v.get("stage") is not None and v.get("run") in many and v["verdict"] == "pass":
                hidden += 1
                continue
            lines.append("  " + _slo_line(v))
        if hidden:
            lines.append(f"  {MARKS['pass']} {hidden} more stage verdict(s) passed")
        for run in test.runs:
            if not test.slos:
                m = run["metrics"]
                lines.append(f"    {run['label']}: {_brief(m, run['counts'], run.get('errors'))}")
            lines.extend(_stage_lines(run, test.slos))
            for line in error_sample_lines(run.get("error_samples") or (), run=run["label"]):
                lines.append(f"    ✗ {line}")
            for warning in (run.get("token_lengths") or {}).get("warnings", ()):
                lines.append(f"    ! {run['label']}: {warning}")
        lines.extend("  " + _baseline_line(c) for c in _notable(test.baseline))
    lines[:0] = [f"endpoint: {note}" for note in notes]
    groups = data.groups()
    if groups:
        lines.append("session (gated runs merged per endpoint and model):")
        for key, group in groups.items():
            acc = group.accumulator
            lines.append(
                f"  {key}: {group.runs} run(s), {group.measured_s:.1f} s measured; "
                f"{_brief(acc.summary(), acc.counts(), dict(acc.errors))}"
            )
            for verdict in session_verdicts:
                if verdict.run == f"session {key}":
                    lines.append("    " + _slo_line({**verdict.to_dict(), "run": ""}))
    if data.interrupted:
        lines.append("session was interrupted: figures cover what was measured until then")
    return lines


def _stage_lines(run: Mapping[str, Any], slos: Sequence[Mapping[str, Any]]) -> list[str]:
    """A staged run's stages, one line each: planned and achieved load, ttft p99, verdict."""
    stages = run.get("stages") or ()
    label = run.get("label") or ""
    lines: list[str] = []
    hidden = 0
    for stage in stages:
        k = stage["index"]
        mark = stage_mark([v for v in slos if v.get("run") == label and v.get("stage") == k])
        if len(stages) > MAX_STAGE_LINES and mark in ("pass", ""):
            hidden += 1
            continue
        counts, ttft = stage["counts"], stage["metrics"]["ttft"]
        planned = stage_level(stage)
        if stage.get("concurrency") is None:
            drawn = stage.get("schedule_rate")
            planned += " planned" + (f" ({drawn:.2f} drawn)" if drawn is not None else "")
        verdict = f"; {MARKS[mark]} {mark}" if mark else ""
        lines.append(
            f"    {label + ' ' if label else ''}stage {k}: {planned}, "
            f"{stage['achieved_rate']:.2f} req/s achieved; "
            f"{counts['completed']}/{counts['issued']} ok, "
            f"ttft p99 {format_value(ttft['p99'], 'ms')}{verdict}"
        )
    if hidden:
        where = f"{label}: " if label else ""
        lines.append(f"    {where}{hidden} more stage(s) passed or were not judged")
    return lines


def _slo_line(v: Mapping[str, Any]) -> str:
    mark = MARKS.get(v["verdict"], " ")
    run = f" [{v['run']}]" if v.get("run") else ""
    where = verdict_where(v)
    run += f" [{where}]" if where else ""
    why = f"  ({v['reason']})" if v.get("reason") else ""
    return (
        f"{mark} {v['expr']}{run}: observed {format_value(v['observed'], v['unit'])}"
        f", target {format_value(v['target'], v['unit'])}, n={v.get('samples', 0)}{why}"
    )


def _notable(checks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    notable = (
        RegressionVerdict.REGRESSED,
        RegressionVerdict.IMPROVED,
        RegressionVerdict.INCONCLUSIVE,
    )
    return [c for c in checks if c["verdict"] in notable]


def _baseline_line(c: Mapping[str, Any]) -> str:
    mark = MARKS.get(c["verdict"], " ")
    if c["metric"] == "*":
        return f"{mark} baseline [{c['run']}]: {c['verdict']}: {c['reason']}"
    why = f"  ({c['reason']})" if c.get("reason") else ""
    p = f", p={c['p_value']:.3g}" if c.get("p_value") is not None else ""
    return (
        f"{mark} baseline {c['name']} [{c['run']}]: {c['verdict']}: "
        f"{format_value(c['baseline'], 'ms')} -> {format_value(c['current'], 'ms')} "
        f"({format_change(c['change'])}{p}){why}"
    )


def _brief(
    metrics: dict[str, Any], counts: dict[str, int], errors: dict[str, int] | None = None
) -> str:
    ttft = metrics["ttft"]
    tpot = metrics["tpot"]
    # Why requests failed, most frequent first (categories: docs/fault-matrix.md).
    why = ", ".join(f"{k} {n}" for k, n in sorted((errors or {}).items(), key=lambda kv: -kv[1]))
    return (
        f"{counts['completed']}/{counts['issued']} ok, "
        f"ttft p50 {format_value(ttft['p50'], 'ms')} p99 {format_value(ttft['p99'], 'ms')}, "
        f"tpot p50 {format_value(tpot['p50'], 'ms')}, "
        f"{metrics['request_throughput']:.2f} req/s, {metrics['output_throughput']:.1f} tok/s, "
        f"errors {metrics['error_rate'] * 100:.2f}%" + (f" ({why})" if why else "")
    )


def write_terminal_summary(
    terminalreporter: Any,
    data: SessionData,
    session_verdicts: Sequence[SloVerdict],
    written: Sequence[str],
    *,
    errors: Sequence[str] = (),
) -> None:
    """``errors``: extension hooks that failed (pytest_llmperf.hook_calls), shown last, in red."""
    lines = summary_lines(data, session_verdicts)
    if not lines and not written and not errors:
        return
    terminalreporter.section("llmperf")
    for line in lines:
        terminalreporter.write_line(line)
    for path in written:
        terminalreporter.write_line(f"llmperf report: {path}")
    for error in errors:
        terminalreporter.write_line(error, red=True)
