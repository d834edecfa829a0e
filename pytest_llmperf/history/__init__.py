"""The history of every session's runs: a SQLite file or a PostgreSQL database.

``--llm-history=PATH|URL`` appends each session at its end
(:func:`~pytest_llmperf.history.session.append_history`), after checking it
when the session starts (:func:`~pytest_llmperf.history.check.check_history_target`);
:class:`~pytest_llmperf.history.store.HistoryStore` reads it back for the
history gate, the trend pages and ``python -m pytest_llmperf.history``
(docs/history.md).
"""

from __future__ import annotations

from pytest_llmperf.history.check import check_history_target
from pytest_llmperf.history.errors import HistoryError
from pytest_llmperf.history.records import (
    RunRecord,
    SeriesPoint,
    SessionInfo,
    SessionRecord,
    StoredRun,
    comparison_key,
)
from pytest_llmperf.history.schema import SCHEMA_VERSION
from pytest_llmperf.history.session import append_history, build_session_record
from pytest_llmperf.history.store import HistoryStore

__all__ = [
    "SCHEMA_VERSION",
    "HistoryError",
    "HistoryStore",
    "RunRecord",
    "SeriesPoint",
    "SessionInfo",
    "SessionRecord",
    "StoredRun",
    "append_history",
    "build_session_record",
    "check_history_target",
    "comparison_key",
]
