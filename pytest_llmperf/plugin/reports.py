"""The session's end: the session ruleset's verdicts, then every report (JSON, HTML,
Markdown and GitHub's step summary, baseline, JUnit's session case), then the history.

Each written path is kept in ``state.written`` for the terminal summary
(:mod:`.summary`); a report that cannot be written is a red line and exit status 3,
and loses no other report.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_llmperf.gate_states import JUNIT_CLASSNAME, junit_case
from pytest_llmperf.hook_calls import call_session_finished, call_update_json
from pytest_llmperf.options import InconclusivePolicy
from pytest_llmperf.plugin.export import export_session
from pytest_llmperf.plugin.history import append_history, html_trends, report_trends, trend_digest
from pytest_llmperf.plugin.junit_xml import junit_xml
from pytest_llmperf.plugin.servers import servers_at_end
from pytest_llmperf.plugin.session_info import report_endpoint, run_options
from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.plugin.stops import stopped_mid_session
from pytest_llmperf.reports.baseline import build_baseline, write_baseline
from pytest_llmperf.reports.html import write_html_report
from pytest_llmperf.reports.json_report import build_report, write_json_report
from pytest_llmperf.reports.junit import add_error_case, junit_properties
from pytest_llmperf.reports.markdown import (
    STEP_SUMMARY_ENV,
    append_step_summary,
    build_markdown,
    write_markdown,
)
from pytest_llmperf.slo.multiplicity import session_comparisons, session_summary
from pytest_llmperf.slo.regression import DEFAULT_ALPHA
from pytest_llmperf.slo.session import evaluate_session
from pytest_llmperf.slo.verdicts import Verdict

__all__ = ["ReportsHooks"]


class ReportsHooks:
    """``pytest_sessionfinish``: the session verdicts and every report."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        finish_session(self.state, session)


def finish_session(state: SessionState, session: pytest.Session) -> None:
    """Stop the started servers, judge the session ruleset, write every report."""
    config, opts, data = state.config, state.options, state.data
    # the servers the gate started, stopped now: the reports say how each ended
    servers = servers_at_end(state)
    if hasattr(config, "workerinput"):
        return  # an xdist worker: its reports travel to the controller, which aggregates
    if stopped_mid_session(state) and session.exitstatus == pytest.ExitCode.INTERRUPTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # xdist's way to stop: not ^C
    add_server = getattr(data, "add_server", None)
    for described in servers:
        if add_server is not None:
            add_server(described)
    groups = data.groups()
    # A session ruleset judges the runs of the tests that used llm_loadgen: none ran
    # (--collect-only, a selection of unit tests) is nothing to judge, not a failure;
    # some that measured nothing fail it (slo/session.py).
    if state.ruleset and data.tests and not config.option.collectonly:
        state.session_verdicts = evaluate_session(groups, state.ruleset, confidence=opts.confidence)
        failing = {Verdict.FAIL} | (
            {Verdict.INCONCLUSIVE} if opts.inconclusive == InconclusivePolicy.FAIL else set()
        )
        if any(v.verdict in failing for v in state.session_verdicts) and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        xml = junit_xml(config)
        if xml is not None:
            for name, value in junit_properties(state.session_verdicts, prefix="llm_session"):
                xml.add_global_property(name, value)
    endpoint = report_endpoint(state)
    baseline = state.baseline
    session_info = {
        "ruleset": state.ruleset.describe() if state.ruleset else None,
        "slos": [v.to_dict() for v in state.session_verdicts],
        "baseline": {
            "compared_with": baseline.path if baseline else None,
            "baseline_created_at": baseline.created_at if baseline else None,
            "baseline_endpoint": baseline.endpoint if baseline else None,
            "thresholds": state.thresholds.describe(),
            "saved_to": opts.baseline_save,
            **(state.comparability or {}),
        },
        "multiple_comparisons": _multiple_comparisons(state),
        "fingerprint": endpoint.get("fingerprint"),
        "options": run_options(opts),
        "exitstatus": int(session.exitstatus),
        "stopped": state.stop,  # a stop before load (gate_states.py), else None
        "worker_lost": list(state.worker_lost),
    }
    if add_server is None:  # session.servers: every server the session started
        session_info["servers"] = servers
    if opts.baseline_save:
        document = build_baseline(
            data,
            endpoint=endpoint,
            options=run_options(opts),
            fingerprint=endpoint.get("fingerprint"),
        )
        state.written.append(str(write_baseline(opts.baseline_save, document)))
    report, failure = call_update_json(
        config, lambda: build_report(data, endpoint=endpoint, session=session_info)
    )
    _junit_session_case(state, report["session"])
    step_summary = _step_summary(state, report)
    trends = None
    if opts.history and (opts.json or opts.html or opts.markdown or step_summary):
        # one query of the history for every report: the HTML draws its series, the
        # JSON carries their digest (``trends``), from which the Markdown is written
        trends = report_trends(opts.history, report)
        report["trends"] = trend_digest(trends)
    if opts.json:
        state.written.append(str(write_json_report(opts.json, report)))
    if opts.html:
        html = write_html_report(opts.html, report, data, html_trends(trends))
        state.written.append(str(html))
    if opts.markdown or step_summary:
        _write_markdown(state, report, step_summary)
    export_session(state, report)
    failures = [failure, call_session_finished(session, report)]
    state.hook_failures = [f for f in failures if f is not None]
    if (state.hook_failures or state.markdown_error) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    append_history(state, session)


def _junit_session_case(state: SessionState, session: dict[str, Any]) -> None:
    """A session that stopped before load, or was interrupted, adds one test case with
    an ``<error>`` to the JUnit file (``--junitxml``): without it the file reads
    ``tests="0" failures="0"``, green to a dashboard, though nothing was judged."""
    case = junit_case(session)
    if case is not None and not session.get("stopped") and not _measuring(state):
        return  # an interrupted session of plain tests: not ours to mark
    xml = junit_xml(state.config)
    if case is not None and xml is not None:
        add_error_case(xml, JUNIT_CLASSNAME, *case)


def _multiple_comparisons(state: SessionState) -> dict[str, Any] | None:
    """The session's baseline and A/B comparisons under Holm and BH (None: none made)."""
    checks, tests = session_comparisons(
        (t.nodeid, t.baseline, t.runs) for t in state.data.tests.values()
    )
    if not checks:
        return None
    state.multiple_comparisons = session_summary(
        checks, alpha=DEFAULT_ALPHA, tests=tests or state.measuring_tests
    )
    return state.multiple_comparisons


def _step_summary(state: SessionState, report: dict[str, Any]) -> str | None:
    """``$GITHUB_STEP_SUMMARY``'s file when the summary goes there: it is set, not
    ``--llm-markdown=off``, and the session measured something or judged session-wide
    targets (a session of plain tests in a job adds nothing to its summary)."""
    path = os.environ.get(STEP_SUMMARY_ENV, "").strip()
    if not path or not state.options.step_summary or state.config.option.collectonly:
        return None
    session = report.get("session") or {}
    measured = report.get("tests") or session.get("slos") or session.get("stopped")
    return path if measured or (session.get("interrupted") and _measuring(state)) else None


def _measuring(state: SessionState) -> bool:
    """The session measured, or had tests that could (an interrupt may come first)."""
    return bool(state.data.tests or state.measuring_tests)


def _write_markdown(state: SessionState, report: dict[str, Any], step_summary: str | None) -> None:
    """``--llm-markdown=PATH``: the summary, written; and appended to the step summary.
    A failure is a red line in the terminal summary and exit status 3, and loses no
    other report."""
    markdown_path = state.options.markdown
    where = markdown_path or ""
    try:
        markdown = build_markdown(report)
        if markdown_path:
            state.written.append(str(write_markdown(markdown_path, markdown)))
        if step_summary:
            where = f"${STEP_SUMMARY_ENV} ({step_summary})"
            target = append_step_summary(step_summary, markdown)
            state.written.append(f"{target} (${STEP_SUMMARY_ENV}, appended)")
    except Exception as exc:  # never cost the session its other reports and history
        why = f"{exc.strerror}" if isinstance(exc, OSError) and exc.strerror else repr(exc)
        state.markdown_error = (
            f"llmperf: the Markdown summary was not written{' to ' + where if where else ''}: {why}"
        )
