"""Multi-turn conversations: what a conversation-capable workload gives the load generator.

A *conversation* is one simulated user: a fixed sequence of turns, each sent
after the previous one's answer has arrived and a think time has passed. The
load generator (:mod:`pytest_llmperf.loadgen.issue.conversations`) depends only on the
protocols here, never on a particular workload:

- :class:`ConversationSource`: the conversations of a workload, by index (a seeded,
  endless sequence: ``conversation(i)`` is a pure function of the workload and
  ``i``); ``timed`` sources are a trace's, whose turns are its rows, each
  with its own planned time (:meth:`ConversationSource.place`);
- :class:`ConversationScript`: one conversation: how many turns, the think time before
  each, and :meth:`ConversationScript.turn`, the request of turn ``k`` given what
  the earlier turns got back (:class:`TurnResult`: the reply's text and the
  server's token counts), so turn ``k+1`` can quote the server's actual
  reply to turn ``k``.

:func:`conversations_of` finds a workload's source: its ``conversation_source``
attribute (``conversation`` with ``conversations=True``), else a trace whose rows
carry ``session_id`` (the trace files' own field name; :class:`TraceConversations`,
built here from the duck-typed ``workload.trace.rows`` so the trace workload needs
no change). Also here: the ``think_time`` and ``conversation_header`` parameters
(:func:`think_time`, :func:`conversation_header`), shared by every
conversation-capable workload, and :class:`ChatScript`, a chat conversation whose
history is the earlier user turns and the server's replies.

"session" means the pytest session only (issue 38). The spellings from before
(``session()``, ``session_id``, ``session_source``, ``session_header``,
``SessionScript``, ``SessionSource``, ``TraceSessions``, ``sessions_of``, the
module :mod:`pytest_llmperf.workloads.sessions`) are kept as documented aliases for
one release (docs/conversations.md, "Old spellings"): :func:`conversations_of`
also finds a ``session_source`` and adapts a source that has only ``session()``.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.base import Sample

__all__ = [
    "THINK_DISTRIBUTIONS",
    "ChatScript",
    "ConversationScript",
    "ConversationSource",
    "SessionScript",
    "SessionSource",
    "ThinkTime",
    "TraceConversations",
    "TraceSessions",
    "TurnResult",
    "UserTurn",
    "conversation_header",
    "conversations_of",
    "session_header",
    "sessions_of",
    "think_time",
]

THINK_DISTRIBUTIONS = ("fixed", "exponential", "uniform")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token: a header name
# headers the client always sends itself (a request may not repeat them)
_CLIENT_HEADERS = frozenset(
    h.lower()
    for h in (
        "Host",
        "Content-Length",
        "Transfer-Encoding",
        "Connection",
        "User-Agent",
        "Accept",
        "Accept-Encoding",
        "Content-Type",
        "Authorization",
    )
)


# -- parameters ------------------------------------------------------------------------


@dataclass(frozen=True)
class ThinkTime:
    """The pause between a reply's end and the conversation's next turn, in seconds.

    ``fixed``: always ``a``; ``exponential``: mean ``a``; ``uniform``: between
    ``a`` and ``b``. Draws come from the caller's seeded generator.
    """

    distribution: str = "fixed"
    a: float = 0.0
    b: float = 0.0

    @property
    def zero(self) -> bool:
        return self.distribution == "fixed" and self.a == 0.0

    def draw_ns(self, rng: random.Random) -> int:
        if self.distribution == "fixed":
            seconds = self.a
        elif self.distribution == "exponential":
            seconds = rng.expovariate(1.0 / self.a)
        else:
            seconds = rng.uniform(self.a, self.b)
        return round(seconds * 1e9)

    def describe(self) -> str:
        if self.distribution == "fixed":
            return f"{self.a:g} s"
        if self.distribution == "exponential":
            return f"exponential, mean {self.a:g} s"
        return f"uniform {self.a:g}-{self.b:g} s"


def _seconds(name: str, value: Any, *, positive: bool = False, within: Any = None) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        bound = "> 0" if positive else ">= 0"
        where = f" (in think_time={within!r})" if within is not None else ""
        raise LlmPerfUsageError(f"{name} must be a number of seconds {bound}, got {value!r}{where}")
    return float(value)


def think_time(value: Any) -> ThinkTime:
    """``think_time=``: seconds (fixed), or ``{"distribution": ..., ...}``; usage errors else.

    ``{"distribution": "fixed", "value": s}``, ``{"distribution": "exponential",
    "mean": s}`` (mean > 0), ``{"distribution": "uniform", "min": a, "max": b}``
    (0 <= a <= b).
    """
    if value is None:
        return ThinkTime()
    if not isinstance(value, Mapping):
        return ThinkTime("fixed", _seconds("think_time", value))
    keys = {"fixed": ("value",), "exponential": ("mean",), "uniform": ("min", "max")}
    dist = value.get("distribution")
    if dist not in keys:
        raise LlmPerfUsageError(
            f"think_time['distribution'] must be one of {', '.join(THINK_DISTRIBUTIONS)}, "
            f"got {dist!r} (in think_time={dict(value)!r})"
        )
    want = keys[dist]
    extra = sorted(set(map(str, value)) - {"distribution", *want})
    missing = [k for k in want if k not in value]
    if extra or missing:
        raise LlmPerfUsageError(
            f"think_time with distribution {dist!r} takes "
            f"{', '.join(repr(k) for k in want)}, got {dict(value)!r}"
        )
    whole = dict(value)
    if dist == "fixed":
        return ThinkTime("fixed", _seconds("think_time['value']", value["value"], within=whole))
    if dist == "exponential":
        mean = _seconds("think_time['mean']", value["mean"], positive=True, within=whole)
        return ThinkTime("exponential", mean)
    low = _seconds("think_time['min']", value["min"], within=whole)
    high = _seconds("think_time['max']", value["max"], within=whole)
    if low > high:
        raise LlmPerfUsageError(f"think_time needs min <= max, got {dict(value)!r}")
    return ThinkTime("uniform", low, high)


def conversation_header(value: Any) -> str | None:
    """``conversation_header=``: an HTTP header name (a token) the client does not send itself."""
    if value is None:
        return None
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise LlmPerfUsageError(
            "conversation_header must be an HTTP header name (letters, digits, -, _ ...), "
            f"got {value!r}"
        )
    if value.lower() in _CLIENT_HEADERS:
        raise LlmPerfUsageError(
            f"conversation_header={value!r} is a header the client sends itself; "
            "choose another name"
        )
    return value


def think_draws(think: ThinkTime, seed: int, index: int, gaps: int) -> tuple[int, ...]:
    """The think times (ns) of conversation ``index``: before turn 1, 2, ... (``gaps`` of them)."""
    if think.zero or gaps <= 0:
        return (0,) * max(0, gaps)
    rng = random.Random(f"{seed}:think:{index}")
    return tuple(think.draw_ns(rng) for _ in range(gaps))


# -- the protocols ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What one finished turn got back: the reply's text, the server's token counts."""

    reply: str
    prompt_tokens: int  # the server's usage.prompt_tokens, else the requested input
    output_tokens: int  # the server's usage.completion_tokens, else the token events


@runtime_checkable
class ConversationScript(Protocol):
    """One conversation: ``turns`` requests, each after the previous one ended plus a think
    time.

    ``conversation_id`` is the value of the conversation header. ``tracks_turns`` is
    False for a one-request "conversation" (a trace row with no ``session_id``):
    its record is not a turn (``turn`` -1) and carries no header.
    ``replies``: later turns quote earlier replies (the client collects them).
    """

    @property
    def index(self) -> int: ...

    @property
    def conversation_id(self) -> str: ...

    @property
    def turns(self) -> int: ...

    @property
    def tracks_turns(self) -> bool: ...

    @property
    def replies(self) -> bool: ...

    def think_ns(self, k: int) -> int:
        """The pause before turn ``k`` (``k >= 1``) after turn ``k - 1`` ended."""
        ...

    def turn(self, k: int, earlier: Sequence[TurnResult]) -> Sample:
        """The request of turn ``k``; ``earlier[j]`` is what turn ``j < k`` got back."""
        ...


@runtime_checkable
class ConversationSource(Protocol):
    """A workload's conversations, by index (``count`` distinct ones, then they repeat).

    ``timed``: the turns are rows of a trace with planned times;
    :meth:`place` maps a row (a plan's sample index) to its conversation and turn.
    A source written before issue 38 with ``session(index)`` instead of
    ``conversation(index)`` still works: :func:`conversations_of` adapts it.
    """

    @property
    def count(self) -> int: ...

    @property
    def timed(self) -> bool: ...

    def conversation(self, index: int) -> ConversationScript: ...

    if TYPE_CHECKING:  # the old spelling, for the type checker only (no runtime member, so
        # isinstance asks no source for it): until the load generator calls conversation()

        def session(self, index: int) -> ConversationScript: ...

    def place(self, sample_index: int) -> tuple[int, int]: ...

    def describe(self) -> dict[str, Any]: ...


def conversations_of(workload: object) -> ConversationSource | None:
    """``workload``'s conversations, or None (a workload of independent requests).

    A ``conversation_source`` attribute (not None; ``session_source``, its name before
    issue 38, is read too) wins; else a trace workload (``workload.trace.rows``) with
    at least one row carrying a ``session_id``. A source with only the old method
    ``session(index)`` comes back wrapped (:class:`_OldSpelledSource`).
    """
    attribute = "conversation_source"
    source = getattr(workload, attribute, None)
    if source is None:
        attribute = "session_source"
        source = getattr(workload, attribute, None)
    if source is not None:
        if not isinstance(source, ConversationSource) and isinstance(source, _OldSource):
            source = _OldSpelledSource(source)
        if not isinstance(source, ConversationSource):
            raise TypeError(f"{type(workload).__name__}.{attribute} is not a ConversationSource")
        return source
    rows = getattr(getattr(workload, "trace", None), "rows", None)
    if rows and any(getattr(r, "session_id", None) is not None for r in rows):
        return TraceConversations.of(workload)
    return None


@runtime_checkable
class _OldSource(Protocol):
    """A :class:`ConversationSource` as spelled before issue 38: ``session(index)``."""

    @property
    def count(self) -> int: ...

    @property
    def timed(self) -> bool: ...

    def session(self, index: int) -> Any: ...

    def place(self, sample_index: int) -> tuple[int, int]: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class _OldSpelledSource:
    """A source written against the old spelling, seen through the new one (and the old one:
    the load generator may still call ``session``). Its scripts pass unchanged: a script's
    ``session_id`` is read by no one but the script itself."""

    inner: _OldSource

    @property
    def count(self) -> int:
        return self.inner.count

    @property
    def timed(self) -> bool:
        return self.inner.timed

    def conversation(self, index: int) -> ConversationScript:
        script: ConversationScript = self.inner.session(index)
        return script

    session = conversation  # the old spelling, kept for one release

    def place(self, sample_index: int) -> tuple[int, int]:
        return self.inner.place(sample_index)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


# -- chat conversations ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserTurn:
    """A user message of a conversation and the length of the answer it asks for."""

    text: str
    tokens: int  # the text's tokens by the workload's tokenizer
    max_tokens: int


@dataclass(frozen=True)
class ChatScript:
    """A chat conversation: turn ``k`` sends ``prefix``, then each earlier user turn followed by
    the server's actual reply to it, then user turn ``k``.

    Turn 0's ``input_tokens`` is exact (``first_input_tokens``: content plus
    template). Later turns' is an estimate: the previous turn's prompt as the
    server counted it, plus its reply's output tokens, plus the new user
    turn's tokens, plus what the chat template adds for the two new messages
    (``added_framing[k]``).
    """

    index: int
    conversation_id: str
    prefix: tuple[Mapping[str, str], ...]
    user_turns: tuple[UserTurn, ...]
    first_input_tokens: int
    added_framing: tuple[int, ...]  # per turn; [0] unused
    think: tuple[int, ...]  # ns before turn 1, 2, ...
    category: str = ""
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    tracks_turns: bool = True
    replies: bool = True

    @property
    def turns(self) -> int:
        return len(self.user_turns)

    @property
    def session_id(self) -> str:
        """:attr:`conversation_id` by its name before issue 38 (kept for one release)."""
        return self.conversation_id

    def think_ns(self, k: int) -> int:
        return self.think[k - 1] if k >= 1 else 0

    def turn(self, k: int, earlier: Sequence[TurnResult]) -> Sample:
        history = list(self.prefix)
        for j in range(k):
            history.append({"role": "user", "content": self.user_turns[j].text})
            history.append({"role": "assistant", "content": earlier[j].reply})
        user = self.user_turns[k]
        if k == 0:
            input_tokens = self.first_input_tokens
        else:
            last = earlier[k - 1]
            input_tokens = (
                last.prompt_tokens + last.output_tokens + user.tokens + self.added_framing[k]
            )
        return Sample(
            index=self.index,
            prompt=user.text,
            input_tokens=input_tokens,
            max_tokens=user.max_tokens,
            history=tuple(history),
            category=self.category,
            extra_body=self.extra_body,
            headers=self.headers,
        )


# -- trace conversations ---------------------------------------------------------------


@dataclass(frozen=True)
class TraceScript:
    """The rows of one trace conversation (or one row of none), sent as the trace gives them."""

    index: int
    conversation_id: str
    rows: tuple[int, ...]
    workload: Any
    think: tuple[int, ...]
    headers: Mapping[str, str] = field(default_factory=dict)
    tracks_turns: bool = True
    replies: bool = False

    @property
    def turns(self) -> int:
        return len(self.rows)

    @property
    def session_id(self) -> str:
        """:attr:`conversation_id` by its name before issue 38 (kept for one release)."""
        return self.conversation_id

    def think_ns(self, k: int) -> int:
        return self.think[k - 1] if k >= 1 else 0

    def turn(self, k: int, earlier: Sequence[TurnResult]) -> Sample:
        sample: Sample = self.workload.sample(self.rows[k])
        if self.headers:
            sample = replace(sample, headers={**sample.headers, **self.headers})
        return sample


@dataclass(frozen=True)
class TraceConversations:
    """A trace's rows grouped into units: the rows of each ``session_id`` (its turns, in
    order) and every other row alone, numbered in order of their first row.

    Think time and conversation header come from the trace workload's
    ``think_time`` / ``conversation_header`` attributes when it has them
    (``session_header`` too, its name before issue 38; default: none, no header).
    Units past the last repeat the trace (``index % count``).
    """

    workload: Any
    units: tuple[tuple[int, ...], ...]
    unit_ids: tuple[str | None, ...]  # the trace's session_id, None for a row alone
    placement: tuple[tuple[int, int], ...]  # per row: (unit, turn)
    think: ThinkTime = ThinkTime()
    header: str | None = None
    seed: int = 0

    @classmethod
    def of(cls, workload: Any) -> TraceConversations:
        rows = workload.trace.rows
        units: list[list[int]] = []
        ids: list[str | None] = []
        by_id: dict[str, int] = {}
        placement: list[tuple[int, int]] = []
        for i, row in enumerate(rows):
            sid = row.session_id
            if sid is None:
                placement.append((len(units), 0))
                units.append([i])
                ids.append(None)
                continue
            sid = str(sid)
            u = by_id.get(sid)
            if u is None:
                u = by_id[sid] = len(units)
                units.append([])
                ids.append(sid)
            placement.append((u, len(units[u])))
            units[u].append(i)
        return cls(
            workload=workload,
            units=tuple(map(tuple, units)),
            unit_ids=tuple(ids),
            placement=tuple(placement),
            think=think_time(getattr(workload, "think_time", None)),
            header=conversation_header(_header_of(workload)),
            seed=int(getattr(workload, "seed", 0)),
        )

    @property
    def count(self) -> int:
        return len(self.units)

    @property
    def timed(self) -> bool:
        return True

    def place(self, sample_index: int) -> tuple[int, int]:
        return self.placement[sample_index % len(self.placement)]

    def conversation(self, index: int) -> TraceScript:
        rounds, u = divmod(index, len(self.units))
        rows = self.units[u]
        sid = self.unit_ids[u]
        if sid is None:
            return TraceScript(index, "", rows, self.workload, (), tracks_turns=False)
        shown = sid if not rounds else f"{sid}~{rounds}"
        return TraceScript(
            index,
            shown,
            rows,
            self.workload,
            think_draws(self.think, self.seed, index, len(rows) - 1),
            headers={self.header: shown} if self.header else {},
        )

    session = conversation  # the old spelling, kept for one release

    def describe(self) -> dict[str, Any]:
        # The keys are the JSON report's (workload description): unchanged by issue 38.
        return {
            "sessions": sum(sid is not None for sid in self.unit_ids),
            "turns": "the rows of each session_id, in order; a turn goes at max(its trace "
            "time, the previous turn's end + think time)",
            "think_time": self.think.describe(),
            "session_header": self.header,
        }


def _header_of(workload: Any) -> Any:
    """A trace workload's conversation header, under its new name or its old one."""
    header = getattr(workload, "conversation_header", None)
    return header if header is not None else getattr(workload, "session_header", None)


# The spellings before issues 23 and 38 (docs/conversations.md, "Old spellings"), kept
# for one release for workloads written against them.
SessionScript = ConversationScript
SessionSource = ConversationSource
TraceSessions = TraceConversations
sessions_of = conversations_of
session_header = conversation_header
