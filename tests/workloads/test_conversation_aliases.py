"""Issue 38: "session" is the pytest session only; a multi-turn user is a conversation.

The spellings from before (``sessions=True``, ``session_header=``, ``.session(i)``,
``session_id``, ``session_source``, ``SessionSource``, the module
``pytest_llmperf.workloads.sessions``, ...) keep working for one release as the
aliases docs/conversations.md lists ("Old spellings"): the first half of this module
checks each of them. The second half reads the package's source: outside the alias
definitions, no code names a conversation "session" any more.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.conversations import (
    ConversationScript,
    ConversationSource,
    conversations_of,
)

DATA = Path(__file__).parent / "data" / "traces"
PACKAGE = Path(__file__).resolve().parents[2] / "pytest_llmperf"


@pytest.fixture
def chats(tmp_path: Path) -> str:
    turns = [("user", "first question"), ("assistant", "one two"), ("user", "second one")]
    record = {"messages": [{"role": r, "content": c} for r, c in (*turns, ("assistant", "x"))]}
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return str(path)


# -- the old parameter names -----------------------------------------------------------


def test_sessions_and_session_header_are_taken_with_a_deprecation_warning(chats: str) -> None:
    new = build_workload(
        "conversation", path=chats, seed=3, conversations=True, conversation_header="X-S"
    )
    with pytest.warns(DeprecationWarning) as caught:
        old = build_workload(
            "conversation", path=chats, seed=3, sessions=True, session_header="X-S"
        )
    assert sorted(str(w.message).split(" (")[0] for w in caught) == [
        "workload 'conversation': session_header= is now conversation_header=",
        "workload 'conversation': sessions= is now conversations=",
    ]
    assert {w.filename for w in caught} == {__file__}  # pointed at the caller
    assert old.describe() == new.describe()  # the same JSON description, key for key
    old_source, new_source = conversations_of(old), conversations_of(new)
    assert old_source is not None and new_source is not None
    assert [old_source.conversation(i) for i in range(4)] == [
        new_source.conversation(i) for i in range(4)
    ]
    assert new_source.conversation(0).turn(0, []).headers == {"X-S": "s3-0"}


def test_the_trace_workload_takes_session_header_too() -> None:
    path = DATA / "sessions_sample.jsonl"
    with pytest.deprecated_call(match=r"session_header= is now conversation_header="):
        old = build_workload("trace", path=path, format="jsonl", session_header="X-S")
    new = build_workload("trace", path=path, format="jsonl", conversation_header="X-S")
    assert old.conversation_header == new.conversation_header == old.session_header == "X-S"
    source = conversations_of(old)
    assert source is not None
    assert source.conversation(0).turn(0, []).headers == {"X-S": "harbour"}


def test_both_spellings_of_one_parameter_is_a_usage_error() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"sessions= is the old name of conversations="):
        build_workload("conversation", sessions=True, conversations=True)


def test_a_misspelt_old_name_points_at_the_new_one() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"sesions= \(did you mean conversations\?\)"):
        build_workload("conversation", sesions=True)


# -- the old Python names --------------------------------------------------------------


def test_the_old_module_and_names_are_the_new_objects() -> None:
    from pytest_llmperf.workloads import conversation, conversations, request_paths, sessions

    assert sessions.SessionSource is conversations.SessionSource is ConversationSource
    assert sessions.SessionScript is conversations.SessionScript is ConversationScript
    assert sessions.TraceSessions is conversations.TraceConversations
    assert sessions.sessions_of is conversations.conversations_of
    assert sessions.session_header is conversations.conversation_header
    assert conversation.ConversationSessions is conversation.FileConversations
    assert request_paths.DressedSessions is request_paths.DressedConversations


def test_session_method_session_id_and_session_source_still_answer(chats: str) -> None:
    plain = build_workload("conversation", path=chats, conversations=True)
    dressed = build_workload("conversation", path=chats, conversations=True, greedy=True)
    trace = build_workload("trace", path=DATA / "sessions_sample.jsonl", format="jsonl")
    assert plain.session_source is plain.conversation_source
    assert dressed.session_source == dressed.conversation_source
    assert trace.trace.sessions == trace.trace.conversations == 2
    for workload in (plain, dressed, trace):
        source = conversations_of(workload)
        assert source is not None
        for i in range(3):
            script = source.conversation(i)
            assert source.session(i).conversation_id == script.conversation_id
            assert script.session_id == script.conversation_id


class _OldSpelledSource:
    """A source written against the old protocol: ``session(index)``, no ``conversation``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.count = inner.count
        self.timed = inner.timed

    def session(self, index: int) -> Any:
        return self.inner.conversation(index)

    def place(self, sample_index: int) -> tuple[int, int]:
        return self.inner.place(sample_index)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


def test_an_old_spelled_source_under_session_source_is_found_and_adapted(chats: str) -> None:
    built = conversations_of(build_workload("conversation", path=chats, conversations=True))

    class OldWorkload:
        session_source = _OldSpelledSource(built)

    source = conversations_of(OldWorkload())
    assert isinstance(source, ConversationSource)
    assert built is not None and source.count == built.count and not source.timed
    assert source.conversation(2) == built.conversation(2)
    assert source.session(2) == built.conversation(2)


def test_a_session_source_that_is_no_source_is_still_a_type_error() -> None:
    class Broken:
        session_source = object()

    with pytest.raises(TypeError, match=r"Broken.session_source is not a ConversationSource"):
        conversations_of(Broken())


# -- the package's own source ----------------------------------------------------------

# Names that meant a conversation, anywhere in the package.
OLD_NAMES = frozenset(
    {
        "SessionScript",
        "SessionSource",
        "TraceSessions",
        "sessions_of",
        "session_header",
        "ConversationSessions",
        "DressedSessions",
        "session_source",
    }
)
# "session(s)" as a name of its own (a method, attribute, parameter or keyword) in the
# parts of the package where it can only mean a conversation: elsewhere (plugin, reports,
# slo, history) a session is pytest's.
CONVERSATION_ONLY = ("workloads", "specs", "loadgen", "client")
# The alias module, and the adapter that reads a source spelled the old way.
ALIAS_MODULES = frozenset({"workloads/sessions.py"})
ALIAS_CLASSES = frozenset({"_OldSource", "_OldSpelledSource"})
# The load generator calls source.session(i) until its own rename (issue 38, runchain);
# once it calls conversation(i), these files may go from here.
PENDING = frozenset({"loadgen/issue/conversations.py"})


def _is_alias(node: ast.AST) -> bool:
    """``old = new`` (an alias assignment), or a def whose whole body (past its docstring)
    is ``...`` or ``return self.<something>``: the old name answering with the new one."""
    if isinstance(node, ast.Assign):
        return isinstance(node.value, ast.Name)
    if isinstance(node, ast.FunctionDef):
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        if len(body) != 1:
            return False
        (only,) = body
        if isinstance(only, ast.Expr) and isinstance(only.value, ast.Constant):
            return only.value.value is Ellipsis
        return (
            isinstance(only, ast.Return)
            and isinstance(only.value, ast.Attribute)
            and isinstance(only.value.value, ast.Name)
            and only.value.value.id == "self"
        )
    return False


def _names(node: ast.AST) -> list[str]:
    """The identifiers ``node`` itself introduces or uses (not its children's)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword) and node.arg:
        return [node.arg]
    if isinstance(node, ast.ImportFrom):
        return [a.asname or a.name for a in node.names]
    return []


def _offences(path: Path) -> list[str]:
    rel = path.relative_to(PACKAGE).as_posix()
    conversation_only = rel.split("/")[0] in CONVERSATION_ONLY
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.ClassDef) and node.name in ALIAS_CLASSES:
            return
        if _is_alias(node):
            return
        for name in _names(node):
            if name in OLD_NAMES or (conversation_only and name in ("session", "sessions")):
                found.append(f"{rel}:{getattr(node, 'lineno', '?')}: {name}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def test_the_package_names_no_conversation_session_outside_the_aliases() -> None:
    offences = [
        offence
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() not in ALIAS_MODULES | PENDING
        for offence in _offences(path)
    ]
    assert offences == [], "\n".join(offences)


def test_the_source_check_sees_an_old_name() -> None:
    """The check above is not vacuous: it flags the old spellings where they are used."""
    tree = ast.parse("source.session(1)\nbuild(sessions=True)\nx = sessions_of(w).count\n")
    seen = {name for node in ast.walk(tree) for name in _names(node)}
    assert {"session", "sessions", "sessions_of"} <= seen
    assert _is_alias(ast.parse("sessions_of = conversations_of").body[0])
    assert not _is_alias(ast.parse("def session(self, i):\n    return make(i)\n").body[0])
