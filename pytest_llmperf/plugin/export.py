"""The session's exports into the stacks teams already run: OpenTelemetry (``--llm-otel``)
and MLflow (``--llm-mlflow``), from the finished report, after every file is written
(nothing of it on the hot path).

An export that fails says so in one terminal line naming where it went and why; it
never changes the gate's exit status (the verdict is the gate's, the export a copy).
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.plugin.mlflow_export import export_to_mlflow
from pytest_llmperf.plugin.otel_export import export_to_otel
from pytest_llmperf.plugin.state import SessionState

__all__ = ["export_session"]


def export_session(state: SessionState, report: dict[str, Any]) -> None:
    """Each export the options ask for; its lines kept for the terminal summary."""
    if state.options.otel:
        state.export_lines.extend(export_to_otel(state, report))
    if state.options.mlflow:
        state.export_lines.extend(export_to_mlflow(state, report))
