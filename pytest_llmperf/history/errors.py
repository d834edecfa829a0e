"""The history store's one error: a target that cannot be used, named with what is wrong."""

from __future__ import annotations

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["HistoryError"]


class HistoryError(LlmPerfUsageError):
    """A history target that is not usable: a foreign or corrupt file, a newer schema
    version, an unreachable server, a missing driver. ``where`` names the file or the
    URL (without credentials)."""
