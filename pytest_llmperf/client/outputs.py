"""A reply's output as the client received it: the answer's text and its tool calls.

Collected only for a request whose sample carries an
:class:`~pytest_llmperf.workloads.output_contract.OutputContract` that keeps its
output (a schema or tools to check it against, or greedy decoding to
fingerprint it): the request's per-event path
(:mod:`~pytest_llmperf.client.request`) hands each stream event here after its
API's parser has read it, so every other request pays nothing. The event is
read a second time, as JSON, for what the parsers on the hot path skip: the
text itself, a tool call's name and the pieces of its arguments.

What each API streams, read in vLLM's and llama.cpp's servers:

- chat: ``choices[0].delta.content``; ``delta.tool_calls`` as
  ``[{"index", "id", "type", "function": {"name", "arguments"}}]`` — the first
  delta of a call carries its ``id`` and name, later ones only ``index`` and a
  piece of ``arguments`` (a few servers send the arguments as a parsed object,
  whole); a non-streamed answer has ``message.content`` and ``message.tool_calls``.
  Completions: ``choices[0].text``.
- Responses: ``response.output_text.delta``; a call opens with
  ``response.output_item.added`` (``item.type`` ``function_call``, its ``name``),
  streams ``response.function_call_arguments.delta`` (``output_index``,
  ``item_id``, ``delta``) and closes with ``…arguments.done`` (``arguments``,
  whole: the server's last word wins); a whole response has its ``output`` items.
- Messages: ``text_delta``; a call is a ``content_block_start`` of type
  ``tool_use`` (its ``name``, ``input`` ``{}``) and ``input_json_delta`` pieces
  (``partial_json``) at the block's ``index``; a whole message has ``tool_use``
  blocks with ``input`` parsed.

Reasoning text is no part of the answer, but it is a token event's piece: the
marks (:meth:`CollectedOutput.marks`) have one value per token event, so a
position in them is a position in the stream.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.client.openai import load_event

__all__ = ["CollectedOutput", "ToolCall", "collects_output"]

_REASONING_DELTAS = frozenset(
    {"response.reasoning_text.delta", "response.reasoning_summary_text.delta"}
)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of a reply: the function's name and its arguments as the server
    sent them (JSON text, not parsed: parsing is the check's job)."""

    name: str
    arguments: str


class _Call:
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


class CollectedOutput:
    """The answer text and tool calls of one reply of ``api``, fed event by event
    (:meth:`feed`) or as one whole answer (:meth:`whole`).

    ``marks``: also keep one 2-byte checksum per token event (greedy outputs),
    ``crc32`` of the event's piece (its text, reasoning or arguments) & 0xFFFF,
    big-endian: two outputs of one prompt part at the first position where
    their marks differ.
    """

    __slots__ = ("_aliases", "_calls", "_marks", "_read", "_text")

    def __init__(self, api: str, *, marks: bool = False) -> None:
        self._read: Callable[[CollectedOutput, dict[str, Any]], str] = _READERS[api]
        self._text: list[str] = []
        self._calls: dict[Any, _Call] = {}
        self._aliases: dict[str, Any] = {}  # Responses: item id -> the call's key
        self._marks: bytearray | None = bytearray() if marks else None

    # -- feeding ----------------------------------------------------------------

    def feed(self, data: str, event: bool) -> None:
        """One stream event's ``data``, already read by its API's parser; ``event``: it
        was a token event (one mark)."""
        try:
            obj = load_event(data)
        except ValueError:  # [DONE]: the parser accepted it, and it carries nothing
            obj = None
        piece = self._read(self, obj) if obj is not None else ""
        if event:
            self.mark(piece)

    def whole(self, data: str) -> None:
        """A whole (non-streamed) answer: one token event, as the record counts it."""
        obj = load_event(data)
        self.mark(self._read(self, obj))

    def mark(self, piece: str) -> None:
        """One token event that carried ``piece`` (vLLM's blank last token: ``""``)."""
        if self._marks is not None:
            crc = zlib.crc32(piece.encode("utf-8", "surrogatepass")) & 0xFFFF
            self._marks += crc.to_bytes(2, "big")

    # -- what was collected ------------------------------------------------------

    @property
    def answer(self) -> str:
        """The answer's text (never reasoning text or tool-call arguments)."""
        return "".join(self._text)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The reply's tool calls, in the order they opened."""
        return tuple(call.built() for call in self._calls.values())

    def marks(self) -> str:
        """The marks as base64 ("" when not kept)."""
        return base64.b64encode(bytes(self._marks or b"")).decode("ascii")

    # -- for the readers -----------------------------------------------------------

    def _text_piece(self, text: Any) -> str:
        if text.__class__ is str and text:
            self._text.append(text)
            return str(text)
        return ""

    def _call(self, key: Any) -> _Call:
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = _Call()
        return call

    def _last_call(self) -> _Call:
        if not self._calls:
            return self._call(0)
        return next(reversed(self._calls.values()))


def collects_output(api: str) -> bool:
    """Whether replies of ``api`` can be collected (not embeddings: they generate none)."""
    return api in _READERS


# -- per API ------------------------------------------------------------------------


def _chat(out: CollectedOutput, obj: dict[str, Any]) -> str:
    """A chat or completions chunk, or a whole chat/completions answer."""
    choices = obj.get("choices")
    if choices.__class__ is not list or not choices or choices[0].__class__ is not dict:
        return ""
    choice: dict[str, Any] = choices[0]
    part = choice.get("delta")
    whole = False
    if part.__class__ is not dict:
        text = choice.get("text")  # completions
        if text.__class__ is str:
            return out._text_piece(text)
        part = choice.get("message")  # a non-streamed chat answer
        if part.__class__ is not dict:
            return ""
        whole = True
    piece = out._text_piece(part.get("content"))
    reasoning = part.get("reasoning_content")
    if reasoning.__class__ is not str:
        reasoning = part.get("reasoning")
    if reasoning.__class__ is str:
        piece = reasoning + piece
    calls = part.get("tool_calls")
    if calls.__class__ is list:
        for position, call in enumerate(calls):
            if call.__class__ is dict:
                piece += _chat_call(out, call, position, whole)
    return piece


def _chat_call(out: CollectedOutput, call: dict[str, Any], position: int, whole: bool) -> str:
    """One entry of ``tool_calls``: keyed by its ``index`` (streams), else its ``id``, else
    its position (a whole answer) or the call being streamed (a stream without either)."""
    index, ident = call.get("index"), call.get("id")
    if index.__class__ is int:
        target = out._call(index)
    elif ident.__class__ is str and ident:
        target = out._call(ident)
    elif whole:
        target = out._call(position)
    else:
        target = out._last_call()
    function = call.get("function")
    if function.__class__ is not dict:
        return ""
    name = function.get("name")
    if name.__class__ is str and name and not target.name:
        target.name = name
    arguments = function.get("arguments")
    if arguments.__class__ is str:
        if whole:
            target.final = arguments
        elif arguments:
            target.pieces.append(arguments)
        return str(arguments)
    if arguments is not None:  # a parsed object, sent whole
        target.final = json.dumps(arguments, ensure_ascii=False)
        return target.final
    return ""


def _responses(out: CollectedOutput, obj: dict[str, Any]) -> str:
    """A Responses stream event, or a whole response object."""
    kind = obj.get("type")
    if kind == "response.output_text.delta":
        return out._text_piece(obj.get("delta"))
    if kind == "response.function_call_arguments.delta":
        delta = obj.get("delta")
        if delta.__class__ is not str:
            return ""
        if delta:
            _target(out, _item_key(out, obj)).pieces.append(delta)
        return str(delta)
    if kind in _REASONING_DELTAS or kind == "response.custom_tool_call_input.delta":
        delta = obj.get("delta")
        return str(delta) if delta.__class__ is str else ""
    if kind == "response.output_item.added" or kind == "response.output_item.done":
        item = obj.get("item")
        if item.__class__ is dict and item.get("type") == "function_call":
            key = _item_key(out, obj, item.get("id"))
            call = _target(out, key, opening=kind == "response.output_item.added")
            _name(call, item.get("name"))
            arguments = item.get("arguments")
            if kind == "response.output_item.done" and arguments.__class__ is str:
                call.final = arguments
        return ""
    if kind == "response.function_call_arguments.done":
        arguments = obj.get("arguments")
        if arguments.__class__ is str:
            _target(out, _item_key(out, obj)).final = arguments
        return ""
    if kind is None and obj.get("object") == "response":
        return _whole_response(out, obj)
    return ""


def _item_key(out: CollectedOutput, obj: dict[str, Any], item_id: Any = None) -> Any:
    """A Responses call's key: its ``output_index``, or what its item id was seen with."""
    ident = item_id if item_id.__class__ is str else obj.get("item_id")
    index = obj.get("output_index")
    if index.__class__ is int:
        if ident.__class__ is str:
            out._aliases[ident] = index
        return index
    if ident.__class__ is str:
        return out._aliases.get(ident, ident)
    return None


def _target(out: CollectedOutput, key: Any, *, opening: bool = False) -> _Call:
    """The call ``key`` names; without a key, a new call (``opening``) or the last one."""
    if key is not None:
        return out._call(key)
    return out._call(len(out._calls)) if opening else out._last_call()


def _whole_response(out: CollectedOutput, response: dict[str, Any]) -> str:
    pieces: list[str] = []
    items = response.get("output")
    for position, item in enumerate(items if items.__class__ is list else ()):
        if item.__class__ is not dict:
            continue
        kind = item.get("type")
        if kind == "message":
            parts = item.get("content")
            for part in parts if parts.__class__ is list else ():
                if part.__class__ is dict:
                    pieces.append(out._text_piece(part.get("text")))
        elif kind == "function_call":
            call = out._call(position)
            _name(call, item.get("name"))
            arguments = item.get("arguments")
            if arguments.__class__ is str:
                call.final = arguments
                pieces.append(arguments)
    return "".join(pieces)


def _messages(out: CollectedOutput, obj: dict[str, Any]) -> str:
    """A Messages stream event, or a whole message."""
    kind = obj.get("type")
    if kind == "content_block_delta":
        delta = obj.get("delta")
        if delta.__class__ is not dict:
            return ""
        dtype = delta.get("type")
        if dtype == "text_delta":
            return out._text_piece(delta.get("text"))
        if dtype == "input_json_delta":
            partial = delta.get("partial_json")
            if partial.__class__ is not str:
                return ""
            if partial:
                _target(out, _block_key(obj)).pieces.append(partial)
            return str(partial)
        if dtype == "thinking_delta":
            thinking = delta.get("thinking")
            return str(thinking) if thinking.__class__ is str else ""
        return ""
    if kind == "content_block_start":
        block = obj.get("content_block")
        if block.__class__ is dict and block.get("type") == "tool_use":
            call = _target(out, _block_key(obj), opening=True)
            _name(call, block.get("name"))
            start = block.get("input")
            if start is not None:
                call.start = json.dumps(start, ensure_ascii=False)
        return ""
    if kind == "message":
        pieces: list[str] = []
        blocks = obj.get("content")
        for position, block in enumerate(blocks if blocks.__class__ is list else ()):
            if block.__class__ is not dict:
                continue
            if block.get("type") == "text":
                pieces.append(out._text_piece(block.get("text")))
            elif block.get("type") == "tool_use":
                call = out._call(position)
                _name(call, block.get("name"))
                call.final = json.dumps(block.get("input", {}), ensure_ascii=False)
                pieces.append(call.final)
        return "".join(pieces)
    return ""


def _block_key(obj: dict[str, Any]) -> Any:
    index = obj.get("index")
    return index if index.__class__ is int else None


def _name(call: _Call, name: Any) -> None:
    if name.__class__ is str and name and not call.name:
        call.name = name


_READERS: dict[str, Callable[[CollectedOutput, dict[str, Any]], str]] = {
    "chat": _chat,
    "completions": _chat,
    "responses": _responses,
    "messages": _messages,
}
