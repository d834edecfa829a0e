"""The terminal summary's llmperf section: what was measured and judged, what was
written, and in red what went wrong (a hook that raised, a report not written, the
history, a stop said here rather than by pytest)."""

from __future__ import annotations

from typing import Any

from pytest_llmperf.gate_states import stop_words
from pytest_llmperf.options import SummaryDetail
from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.reports.terminal import write_terminal_summary
from pytest_llmperf.slo.multiplicity import multiple_comparisons_line

__all__ = ["SummaryHooks"]


class SummaryHooks:
    """``pytest_terminal_summary``: the llmperf section."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        state = self.state
        write_terminal_summary(
            terminalreporter,
            state.data,
            state.session_verdicts,
            state.written,
            errors=[f.message() for f in state.hook_failures]
            + ([state.markdown_error] if state.markdown_error else [])
            + ([state.history.error] if state.history and state.history.error else [])
            + (
                [f"pytest-llmperf: {stop_words(state.stop)}"]
                if state.stop_said_here and state.stop
                else []
            ),
            stopped=state.stopped,
            brief=_brief_summary(state),
        )
        if state.history and state.history.note:
            terminalreporter.write_line(state.history.note)
        for line in state.export_lines:
            terminalreporter.write_line(line)
        if state.multiple_comparisons:
            terminalreporter.write_line(multiple_comparisons_line(state.multiple_comparisons))


def _brief_summary(state: SessionState) -> bool:
    """``--llm-summary``: brief, or auto under ``-q``."""
    detail = state.options.summary
    if detail is SummaryDetail.AUTO:
        return bool(state.config.get_verbosity() < 0)
    return detail is SummaryDetail.BRIEF
