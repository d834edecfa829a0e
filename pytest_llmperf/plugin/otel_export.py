"""``--llm-otel``: the session's report exported over OTLP (library: pytest_llmperf.export)."""

from __future__ import annotations

from typing import Any

from pytest_llmperf.plugin.state import SessionState

__all__ = ["export_to_otel"]


def export_to_otel(state: SessionState, report: dict[str, Any]) -> list[str]:
    """Export; the terminal lines that say where it went (or why not)."""
    return [f"llmperf: --llm-otel={state.options.otel}: not built yet"]
