"""``--llm-history`` at the session's end: the trends the reports show, read once, and the
session appended after every other output is written."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmperf.plugin.session_info import report_endpoint, run_options
from pytest_llmperf.plugin.state import SessionState

__all__ = ["append_history", "html_trends", "report_trends", "trend_digest"]


def append_history(state: SessionState, session: pytest.Session) -> None:
    """Append the session (a failure is a red line and exit status 3, like a failing
    hook, and loses nothing)."""
    opts = state.options
    if not opts.history or state.config.option.collectonly:
        return
    from pytest_llmperf.history.session import history_at_session_end

    state.history = history_at_session_end(
        opts.history,
        state.data.measured_tests(),
        endpoint=report_endpoint(state),
        options=run_options(opts),
        started_at=state.started_at,
        tag=opts.history_tag,
        rootdir=state.config.rootpath,
        fingerprint=report_endpoint(state).get("fingerprint"),
        stopped=state.stop,
    )
    if state.history.error and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def report_trends(target: str, report: Any) -> Any:
    """The report's trend sections, the statistics the HTML draws and the Markdown
    summary shows (never raises)."""
    from pytest_llmperf.history.markdown import TREND_SERIES
    from pytest_llmperf.history.trends import report_trends as trends_of

    return trends_of(target, report, series=TREND_SERIES)


def trend_digest(trends: Any) -> dict[str, Any]:
    """The JSON report's ``trends``: every series' last values and change points."""
    from pytest_llmperf.history.markdown import trend_digest as digest_of

    digest: dict[str, Any] = digest_of(trends)
    return digest


def html_trends(trends: Any) -> Any:
    """The HTML report's trends: the sections with the series it draws (its charts as
    before the Markdown summary's statistics joined the query)."""
    if trends is None:
        return None
    import dataclasses

    from pytest_llmperf.history.trends import REPORT_SERIES

    sections = {}
    for nodeid, runs in trends.sections.items():
        kept = []
        for section in runs:
            pairs = [
                (s, svg)
                for s, svg in zip(section.series, section.charts, strict=True)
                if (s.metric, s.stat) in REPORT_SERIES
            ]
            if pairs:
                kept.append(
                    dataclasses.replace(
                        section, series=[p[0] for p in pairs], charts=[p[1] for p in pairs]
                    )
                )
        if kept:
            sections[nodeid] = kept
    if trends.sections and not sections:
        note = "no stored run comparable with this session's runs yet"
        return dataclasses.replace(trends, sections={}, note=note)
    return dataclasses.replace(trends, sections=sections)
