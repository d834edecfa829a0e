"""A reply's output as it is pieced together from its events: the answer's text and its
tool calls, written by each format's output reader (``read_output``).

The readers (:func:`pytest_llmperf.apis.chunks.read_output`, and those of the
Responses and Messages modules) read one event's JSON object and put its piece here;
the client's collector (:class:`~pytest_llmperf.client.outputs.CollectedOutput`)
feeds them the events of a request whose output is checked or fingerprinted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CallParts", "OutputParts", "ToolCall", "name_call"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of a reply: the function's name and its arguments as the server
    sent them (JSON text, not parsed: parsing is the check's job)."""

    name: str
    arguments: str


class CallParts:
    """A tool call being streamed: its name, the pieces of its arguments so far, and
    the whole arguments where the server said them at once."""

    __slots__ = ("final", "name", "pieces", "start")

    def __init__(self) -> None:
        self.name = ""
        self.pieces: list[str] = []
        self.final: str | None = None  # Responses' ``…arguments.done``; a whole answer's
        self.start = ""  # Messages: the ``input`` its block opened with (``{}``)

    def built(self) -> ToolCall:
        if self.final is not None:
            return ToolCall(self.name, self.final)
        return ToolCall(self.name, "".join(self.pieces) or self.start)


class OutputParts:
    """The answer text and the tool calls of one reply, so far."""

    __slots__ = ("aliases", "calls", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[Any, CallParts] = {}
        self.aliases: dict[str, Any] = {}  # Responses: item id -> the call's key

    @property
    def answer(self) -> str:
        """The answer's text (never reasoning text or tool-call arguments)."""
        return "".join(self.text)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The reply's tool calls, in the order they opened."""
        return tuple(call.built() for call in self.calls.values())

    def text_piece(self, text: Any) -> str:
        """A piece of the answer's text (nothing unless a non-empty string)."""
        if text.__class__ is str and text:
            self.text.append(text)
            return str(text)
        return ""

    def argument_piece(self, piece: Any, key: Callable[[], Any]) -> str:
        """A piece of a streamed call's arguments, for the call ``key()`` names (asked only
        for a non-empty piece): nothing unless a string; an empty one is a token event's
        empty piece."""
        if piece.__class__ is not str:
            return ""
        if piece:
            self.target(key()).pieces.append(piece)
        return str(piece)

    def call(self, key: Any) -> CallParts:
        """The call ``key`` names (opened now if new)."""
        call = self.calls.get(key)
        if call is None:
            call = self.calls[key] = CallParts()
        return call

    def last_call(self) -> CallParts:
        """The call opened last (or a first one)."""
        if not self.calls:
            return self.call(0)
        return next(reversed(self.calls.values()))

    def target(self, key: Any, *, opening: bool = False) -> CallParts:
        """The call ``key`` names; without a key, a new call (``opening``) or the last one."""
        if key is not None:
            return self.call(key)
        return self.call(len(self.calls)) if opening else self.last_call()


def name_call(call: CallParts, name: Any) -> None:
    """Give ``call`` its function's ``name``, the first one said."""
    if name.__class__ is str and name and not call.name:
        call.name = name
