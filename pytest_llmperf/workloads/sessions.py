"""The old home of the multi-turn names, kept for one release as an alias module.

Before issue 23 the multi-turn protocols lived here; they are
:mod:`pytest_llmperf.workloads.conversations` now, and since issue 38 "session" names
the pytest session only (docs/conversations.md, "Old spellings"). Kept so that
workloads written against ``pytest_llmperf.workloads.sessions`` still import; new
code imports :mod:`~pytest_llmperf.workloads.conversations`.
"""

from pytest_llmperf.workloads.conversations import (
    ChatScript,
    ConversationScript,
    ConversationSource,
    SessionScript,
    SessionSource,
    TraceConversations,
    TraceSessions,
    TurnResult,
    conversation_header,
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
    "conversation_header",
    "conversations_of",
    "session_header",
    "sessions_of",
    "think_time",
]
