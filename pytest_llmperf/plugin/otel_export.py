"""``--llm-otel``: the session's report exported over OTLP (library: pytest_llmperf.export).

The export reads every run's event log for exact per-request values (and the request
spans of ``--llm-otel-spans``), so while ``--llm-otel`` is on and ``--llm-events`` is not
given the runs keep their event logs in ``llmperf-otel-events/`` under pytest's
basetemp (:func:`events_dir`): one queue put per finished request on the load's side,
the SQLite writes on the recorder's thread, nothing per token.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.export.otel_session import export_report
from pytest_llmperf.plugin.state import SessionState

__all__ = ["events_dir", "export_to_otel"]

EVENTS_SUBDIR = "llmperf-otel-events"


def events_dir(request: pytest.FixtureRequest, state: SessionState) -> str | None:
    """Where the runs keep their event logs: ``--llm-events``, else (with ``--llm-otel``)
    a folder under pytest's basetemp, else nowhere."""
    if state.options.events or not state.options.otel:
        return state.options.events
    factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    folder = factory.getbasetemp() / EVENTS_SUBDIR
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


def export_to_otel(state: SessionState, report: dict[str, Any]) -> list[str]:
    """Export; the terminal lines that say where it went (or why not)."""
    options = state.options
    assert options.otel is not None
    states = {nodeid: list(entry.states) for nodeid, entry in state.data.tests.items()}
    key = os.environ.get(options.api_key_env, "")
    try:
        return export_report(
            report,
            options.otel,
            states=states,
            spans_ratio=options.otel_spans,
            base_dir=Path(state.config.invocation_params.dir),
            secrets=[key] if key else [],
        )
    except LlmPerfUsageError as exc:
        return [f"llmperf otel: not exported: {exc}"]
    except Exception as exc:  # an export never changes the gate's outcome
        return [f"llmperf otel: not exported: {type(exc).__name__}: {exc}"]
