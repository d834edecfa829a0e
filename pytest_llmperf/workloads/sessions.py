"""Before issue 23 the multi-turn protocols lived here; they are
:mod:`pytest_llmperf.workloads.conversations` now. Kept so that workloads written
against ``pytest_llmperf.workloads.sessions`` (docs/sessions.md) still import."""

from pytest_llmperf.workloads.conversations import (
    ChatScript,
    ConversationScript,
    ConversationSource,
    SessionScript,
    SessionSource,
    TraceConversations,
    TraceSessions,
    TurnResult,
    conversations_of,
    session_header,
    sessions_of,
    think_time,
)

__all__ = [
    "ChatScript",
    "ConversationScript",
    "ConversationSource",
    "SessionScript",
    "SessionSource",
    "TraceConversations",
    "TraceSessions",
    "TurnResult",
    "conversations_of",
    "session_header",
    "sessions_of",
    "think_time",
]
