"""``--llm-mlflow``: the session's runs logged to MLflow (library: pytest_llmperf.export)."""

from __future__ import annotations

from typing import Any

from pytest_llmperf.plugin.state import SessionState

__all__ = ["export_to_mlflow"]


def export_to_mlflow(state: SessionState, report: dict[str, Any]) -> list[str]:
    """Log; the terminal lines that say where it went (or why not)."""
    return [f"llmperf: --llm-mlflow={state.options.mlflow}: not built yet"]
