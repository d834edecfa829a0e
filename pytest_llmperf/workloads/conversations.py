"""Multi-turn sessions: what a session-capable workload gives the load generator.

A *session* is one simulated user: a fixed sequence of turns, each sent
after the previous one's answer has arrived and a think time has passed. The
load generator (:mod:`pytest_llmperf.loadgen.issue.conversations`) depends only on the
protocols here, never on a particular workload:

- :class:`ConversationSource`: the sessions of a workload, by index (a seeded,
  endless sequence: ``session(i)`` is a pure function of the workload and
  ``i``); ``timed`` sources are a trace's, whose turns are its rows, each
  with its own planned time (:meth:`ConversationSource.place`);
- :class:`ConversationScript`: one session: how many turns, the think time before
  each, and :meth:`ConversationScript.turn`, the request of turn ``k`` given what
  the earlier turns got back (:class:`TurnResult`: the reply's text and the
  server's token counts), so turn ``k+1`` can quote the server's actual
  reply to turn ``k``.

:func:`conversations_of` finds a workload's source: its ``session_source``
attribute (``conversation`` with ``sessions=True``), else a trace whose rows
carry ``session_id`` (:class:`TraceConversations`, built here from the duck-typed
``workload.trace.rows`` so the trace workload needs no change). Also here:
the ``think_time`` and ``session_header`` parameters (:func:`think_time`,
:func:`session_header`), shared by every session-capable workload, and
:class:`ChatScript`, a chat session whose history is the earlier user turns
and the server's replies.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

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
    """The pause between a reply's end and the session's next turn, in seconds.

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


def session_header(value: Any) -> str | None:
    """``session_header=``: an HTTP header name (a token) the client does not send itself."""
    if value is None:
        return None
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise LlmPerfUsageError(
            f"session_header must be an HTTP header name (letters, digits, -, _ ...), got {value!r}"
        )
    if value.lower() in _CLIENT_HEADERS:
        raise LlmPerfUsageError(
            f"session_header={value!r} is a header the client sends itself; choose another name"
        )
    return value


def think_draws(think: ThinkTime, seed: int, index: int, gaps: int) -> tuple[int, ...]:
    """The think times (ns) of session ``index``: before turn 1, 2, ... (``gaps`` of them)."""
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
    """One session: ``turns`` requests, each after the previous one ended plus a think time.

    ``session_id`` is the value of the session header. ``tracks_turns`` is
    False for a one-request "session" (a trace row with no ``session_id``):
    its record is not a turn (``turn`` -1) and carries no header.
    ``replies``: later turns quote earlier replies (the client collects them).
    """

    @property
    def index(self) -> int: ...

    @property
    def session_id(self) -> str: ...

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
    """A workload's sessions, by index (``count`` distinct ones, then they repeat).

    ``timed``: the turns are rows of a trace with planned times;
    :meth:`place` maps a row (a plan's sample index) to its session and turn.
    """

    @property
    def count(self) -> int: ...

    @property
    def timed(self) -> bool: ...

    def session(self, index: int) -> ConversationScript: ...

    def place(self, sample_index: int) -> tuple[int, int]: ...

    def describe(self) -> dict[str, Any]: ...


def conversations_of(workload: object) -> ConversationSource | None:
    """``workload``'s sessions, or None (a workload of independent requests).

    A ``session_source`` attribute (not None) wins; else a trace workload
    (``workload.trace.rows``) with at least one row carrying a ``session_id``.
    """
    source = getattr(workload, "session_source", None)
    if source is not None:
        if not isinstance(source, ConversationSource):
            raise TypeError(f"{type(workload).__name__}.session_source is not a ConversationSource")
        return source
    rows = getattr(getattr(workload, "trace", None), "rows", None)
    if rows and any(getattr(r, "session_id", None) is not None for r in rows):
        return TraceConversations.of(workload)
    return None


# -- chat sessions ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserTurn:
    """A user message of a session and the length of the answer it asks for."""

    text: str
    tokens: int  # the text's tokens by the workload's tokenizer
    max_tokens: int


@dataclass(frozen=True)
class ChatScript:
    """A chat session: turn ``k`` sends ``prefix``, then each earlier user turn followed by
    the server's actual reply to it, then user turn ``k``.

    Turn 0's ``input_tokens`` is exact (``first_input_tokens``: content plus
    template). Later turns' is an estimate: the previous turn's prompt as the
    server counted it, plus its reply's output tokens, plus the new user
    turn's tokens, plus what the chat template adds for the two new messages
    (``added_framing[k]``).
    """

    index: int
    session_id: str
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


# -- trace sessions --------------------------------------------------------------------


@dataclass(frozen=True)
class TraceScript:
    """The rows of one trace session (or one row of none), sent as the trace gives them."""

    index: int
    session_id: str
    rows: tuple[int, ...]
    workload: Any
    think: tuple[int, ...]
    headers: Mapping[str, str] = field(default_factory=dict)
    tracks_turns: bool = True
    replies: bool = False

    @property
    def turns(self) -> int:
        return len(self.rows)

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

    Think time and session header come from the trace workload's
    ``think_time`` / ``session_header`` attributes when it has them (default:
    none, no header). Units past the last repeat the trace (``index % count``).
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
            header=session_header(getattr(workload, "session_header", None)),
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

    def session(self, index: int) -> TraceScript:
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

    def describe(self) -> dict[str, Any]:
        return {
            "sessions": sum(sid is not None for sid in self.unit_ids),
            "turns": "the rows of each session_id, in order; a turn goes at max(its trace "
            "time, the previous turn's end + think time)",
            "think_time": self.think.describe(),
            "session_header": self.header,
        }


# The names before issue 23 (docs/sessions.md), kept for workloads written against them.
SessionScript = ConversationScript
SessionSource = ConversationSource
TraceSessions = TraceConversations
sessions_of = conversations_of
