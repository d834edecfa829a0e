"""The typed event streams of the Responses and Messages APIs, shaped as vLLM sends them.

Chat streams one ``data:`` chunk per token; these two APIs stream named SSE events
(``event: TYPE`` then ``data: JSON``), most of which carry no token:

- Responses (``POST /v1/responses``, vLLM's ``responses/serving.py`` and
  ``streaming_events.py``): ``response.created``, ``response.in_progress``; per
  output part ``response.output_item.added`` and ``response.content_part.added``,
  then one ``response.reasoning_text.delta`` / ``response.output_text.delta`` per
  token, then ``response.reasoning_text.done`` / ``response.output_text.done``,
  ``response.content_part.done``, ``response.output_item.done``; at the end
  ``response.completed`` carrying the whole response and its ``usage``. Every event
  has a ``sequence_number`` (0, 1, …). At the ``max_output_tokens`` cap vLLM still
  ends with ``response.completed``, whose response has ``status: "incomplete"`` and
  ``incomplete_details: {"reason": "max_output_tokens"}``; OpenAI's own API sends a
  ``response.incomplete`` event instead (profile key ``responses_incomplete_event``).
- Messages (``POST /v1/messages``, vLLM's ``anthropic/serving.py``): ``message_start``
  (usage ``input_tokens``), per block ``content_block_start``, one
  ``content_block_delta`` per token (``thinking_delta`` for reasoning — closed by a
  ``signature_delta`` — then ``text_delta``), ``content_block_stop``; then
  ``message_delta`` with ``stop_reason`` (``max_tokens`` at the cap, ``end_turn``
  otherwise) and the usage, and ``message_stop``.

Both adapters in vLLM drop an empty delta (a token ending inside a multi-byte
character): with ``empty_delta_rate`` the token still takes its time slot but sends
no event, and its text comes with the next delta — fewer events than
``output_tokens``, as on vLLM. An output part opens with its first non-empty delta.

Like :class:`~pytest_llmperf.sim.deltas.ShapedChunks`, each class renders the bytes
for tokens ``i … i+size-1`` in order (``chunk``; ``b""`` when nothing is sent), so
both token paths of the server — the engine's fan-out (sink.py) and the general
path with its faults — write them unchanged; the per-token delta is one
concatenation of pre-rendered bytes around the pre-encoded word.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from .apis import anthropic_error_body
from .deltas import DeltaPlan
from .outputs import ToolCall
from .text import WORDS_JSON

__all__ = ["MessagesEvents", "ResponsesEvents", "anthropic_usage", "responses_usage"]

_WORDS_JSON = WORDS_JSON
_NWORDS = len(WORDS_JSON)


def _sse(event: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"


def _unescape(escaped: bytes) -> str:
    """Text from JSON-escaped bytes (no quotes), as the pre-encoded words carry it."""
    text: str = json.loads(b'"' + escaped + b'"')
    return text


def responses_usage(
    prompt_tokens: int, output_tokens: int, cached_tokens: int, reasoning_tokens: int | None
) -> dict[str, Any]:
    """The Responses API's ``usage`` (vLLM's ``ResponseUsage``)."""
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens or 0},
        "total_tokens": prompt_tokens + output_tokens,
    }


def anthropic_usage(prompt_tokens: int, output_tokens: int, cached_tokens: int) -> dict[str, Any]:
    """Anthropic's ``usage``: ``input_tokens`` leaves out the cache hits, which are
    ``cache_read_input_tokens`` (vLLM's ``_build_anthropic_usage``)."""
    return {
        "input_tokens": max(0, prompt_tokens - cached_tokens),
        "output_tokens": output_tokens,
        "cache_read_input_tokens": cached_tokens,
    }


class _TokenText:
    """The text each token sends, honouring a plan's empty deltas; in token order.

    ``pieces`` (outputs.py) give each token's text when it is not the filler words
    (JSON, a tool call's arguments, a changed output); ``tool`` is the tool call whose
    header takes token ``tool.at`` (it opens the call's item or block, no delta)."""

    def __init__(
        self,
        plan: DeltaPlan | None,
        salt: int,
        n: int,
        pieces: tuple[bytes, ...] | None = None,
        tool: ToolCall | None = None,
    ) -> None:
        self.n = n
        self.n_reasoning = plan.n_reasoning if plan is not None else 0
        self.empty = plan.empty if plan is not None and any(plan.empty) else None
        self.salt = salt
        self.pending = b""  # JSON-escaped text held back by empty deltas (no quotes)
        self.pieces = pieces
        self.tool = tool
        self.tool_at = tool.at if tool is not None else -1

    def clip(self, i: int, size: int) -> int:
        """``size`` cut so that tokens ``i … i+size-1`` stay in one part (a tool call's
        header token alone)."""
        r = self.n_reasoning
        if i < r:
            return min(size, r - i)
        return 1 if i == self.tool_at else size

    def _text(self, i: int, size: int) -> bytes:
        """The JSON-escaped text tokens ``i … i+size-1`` send (empty: send nothing)."""
        empty = self.empty
        salt = self.salt
        pieces = self.pieces
        if empty is None and size == 1:
            if pieces is not None:
                return pieces[i]
            return _WORDS_JSON[(salt + i * 7) % _NWORDS][1:-1]  # text.token_index, inlined
        pending = self.pending
        out = b""
        for k in range(i, i + size):
            if pieces is not None:
                pending += pieces[k]
            else:
                pending += _WORDS_JSON[(salt + k * 7) % _NWORDS][1:-1]
            if empty is None or not empty[k]:
                out += pending
                pending = b""
        self.pending = pending
        return out


class ResponsesEvents(_TokenText):
    """The SSE events (and the non-streamed body) of one Responses API answer."""

    def __init__(
        self,
        model: str,
        plan: DeltaPlan | None,
        salt: int,
        n: int,
        finish: str,
        *,
        max_output_tokens: int | None,
        incomplete_event: bool = False,
        pieces: tuple[bytes, ...] | None = None,
        tool: ToolCall | None = None,
    ) -> None:
        super().__init__(plan, salt, n, pieces, tool)
        self.model = model
        self.finish = finish
        self.max_output_tokens = max_output_tokens
        self.incomplete_event = incomplete_event
        self.id = "resp_" + uuid.uuid4().hex
        self.created = int(time.time())
        self.seq = 0
        self.output_index = 0
        self.items: list[dict[str, Any]] = []  # finished output items, in order
        self.kind: str | None = None  # the open part: "reasoning" | "text" | "function_call"
        self.item_id = ""
        self.acc = b""  # JSON-escaped text of the open part
        self.head = b""  # the open part's delta event up to its text
        self.mid = b""  # … from after its text up to the sequence number

    def _event(self, payload: dict[str, Any]) -> bytes:
        payload["sequence_number"] = self.seq
        self.seq += 1
        return _sse(str(payload["type"]), payload)

    def _response(
        self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "incomplete_details": (
                {"reason": "max_output_tokens"} if status == "incomplete" else None
            ),
            "error": None,
            "instructions": None,
            "max_output_tokens": self.max_output_tokens,
            "parallel_tool_calls": True,
            "temperature": None,
            "tool_choice": "auto",
            "tools": [],
            "top_p": None,
            "usage": usage,
        }

    def opening(self) -> bytes:
        """``response.created`` and ``response.in_progress``, written at once."""
        initial = self._response("in_progress", [], None)
        return self._event({"type": "response.created", "response": initial}) + self._event(
            {"type": "response.in_progress", "response": initial}
        )

    def _open_call(self) -> bytes:
        """A function call's ``response.output_item.added`` (arguments "")."""
        tool = self.tool
        assert tool is not None
        self.kind = "function_call"
        self.acc = b""
        self.item_id = "fc_" + uuid.uuid4().hex
        where = {"item_id": self.item_id, "output_index": self.output_index}
        delta_type = "response.function_call_arguments.delta"
        head = json.dumps({"type": delta_type, **where})[:-1] + ', "delta": "'
        self.head = b"event: " + delta_type.encode() + b"\ndata: " + head.encode()
        self.mid = b'", "sequence_number": '
        item = self._call_item("", "in_progress")
        return self._event(
            {"type": "response.output_item.added", "output_index": self.output_index, "item": item}
        )

    def _call_item(self, arguments: str, status: str) -> dict[str, Any]:
        tool = self.tool
        assert tool is not None
        return {
            "id": self.item_id,
            "type": "function_call",
            "call_id": "call_" + tool.call_id,
            "name": tool.name,
            "arguments": arguments,
            "status": status,
        }

    def _close_call(self) -> bytes:
        """``response.function_call_arguments.done`` and ``response.output_item.done``."""
        assert self.tool is not None
        args = _unescape(self.acc)
        item = self._call_item(args, "completed")
        out = self._event(
            {
                "type": "response.function_call_arguments.done",
                "item_id": self.item_id,
                "output_index": self.output_index,
                "name": self.tool.name,
                "arguments": args,
            }
        ) + self._event(
            {"type": "response.output_item.done", "output_index": self.output_index, "item": item}
        )
        self.items.append(item)
        self.output_index += 1
        self.kind = None
        return out

    def _open(self, kind: str) -> bytes:
        if kind == "function_call":
            return self._open_call()
        self.kind = kind
        self.acc = b""
        prefix, item_type = ("rs_", "reasoning") if kind == "reasoning" else ("msg_", "message")
        self.item_id = prefix + uuid.uuid4().hex
        item: dict[str, Any]
        if kind == "reasoning":
            item = {"id": self.item_id, "type": "reasoning", "summary": [], "status": "in_progress"}
            part: dict[str, Any] = {"type": "reasoning_text", "text": ""}
            delta_type = "response.reasoning_text.delta"
            logprobs = ""
        else:
            item = {
                "id": self.item_id,
                "type": item_type,
                "role": "assistant",
                "content": [],
                "status": "in_progress",
            }
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            delta_type = "response.output_text.delta"
            logprobs = ', "logprobs": []'
        where = {"item_id": self.item_id, "output_index": self.output_index, "content_index": 0}
        head = json.dumps({"type": delta_type, **where})[:-1] + ', "delta": "'
        self.head = b"event: " + delta_type.encode() + b"\ndata: " + head.encode()
        self.mid = ('"' + logprobs + ', "sequence_number": ').encode()
        return self._event(
            {"type": "response.output_item.added", "output_index": self.output_index, "item": item}
        ) + self._event({"type": "response.content_part.added", **where, "part": part})

    def _close(self) -> bytes:
        if self.kind is None:
            return b""
        if self.kind == "function_call":
            return self._close_call()
        text = _unescape(self.acc)
        where = {"item_id": self.item_id, "output_index": self.output_index, "content_index": 0}
        if self.kind == "reasoning":
            part: dict[str, Any] = {"type": "reasoning_text", "text": text}
            done = {"type": "response.reasoning_text.done", **where, "text": text}
            item: dict[str, Any] = {
                "id": self.item_id,
                "type": "reasoning",
                "summary": [],
                "content": [part],
                "status": "completed",
            }
        else:
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": None}
            done = {"type": "response.output_text.done", **where, "text": text, "logprobs": []}
            item = {
                "id": self.item_id,
                "type": "message",
                "role": "assistant",
                "content": [part],
                "status": "completed",
            }
        out = (
            self._event(done)
            + self._event({"type": "response.content_part.done", **where, "part": part})
            + self._event(
                {
                    "type": "response.output_item.done",
                    "output_index": self.output_index,
                    "item": item,
                }
            )
        )
        self.items.append(item)
        self.output_index += 1
        self.kind = None
        return out

    def chunk(self, i: int, size: int = 1) -> bytes:
        """The events for tokens ``i … i+size-1``: the delta, after the events that open
        its part (and close the previous one); ``b""`` for an empty delta. A tool
        call's header token opens its ``function_call`` item (no delta)."""
        if i == self.tool_at:
            return self._close() + self._open("function_call")
        text = self._text(i, size)
        if not text:
            return b""
        if i < self.n_reasoning:
            kind = "reasoning"
        else:
            kind = "text" if self.tool is None else "function_call"
        out = b""
        if kind != self.kind:
            out = self._close() + self._open(kind)
        self.acc += text
        seq = self.seq
        self.seq = seq + 1
        return out + self.head + text + self.mid + b"%d}\n\n" % seq

    def closing(
        self,
        prompt_tokens: int,
        cached_tokens: int,
        reasoning_tokens: int | None,
        metrics: dict[str, float] | None,
    ) -> bytes:
        """The events that close the open part, then ``response.completed`` (or
        ``response.incomplete``) with the whole response and its usage."""
        out = self._close()
        body = self._final(self.items, prompt_tokens, cached_tokens, reasoning_tokens, metrics)
        event = "response.completed"
        if body["status"] == "incomplete" and self.incomplete_event:
            event = "response.incomplete"
        return out + self._event({"type": event, "response": body})

    def failed(self, message: str) -> bytes:
        """``response.failed``: the response with ``status: "failed"`` and its error."""
        body = self._response("failed", self.items, None)
        body["error"] = {"code": "server_error", "message": message}
        return self._close() + self._event({"type": "response.failed", "response": body})

    def _final(
        self,
        output: list[dict[str, Any]],
        prompt_tokens: int,
        cached_tokens: int,
        reasoning_tokens: int | None,
        metrics: dict[str, float] | None,
    ) -> dict[str, Any]:
        status = "incomplete" if self.finish == "length" else "completed"
        usage = responses_usage(prompt_tokens, self.n, cached_tokens, reasoning_tokens)
        body = self._response(status, output, usage)
        if metrics is not None:
            body["metrics"] = metrics
        return body

    def full_body(
        self,
        reasoning: str | None,
        text: str,
        prompt_tokens: int,
        cached_tokens: int,
        reasoning_tokens: int | None,
        metrics: dict[str, float] | None,
    ) -> dict[str, Any]:
        """The non-streamed answer (``stream`` false): the response object (a tool call's
        ``function_call`` item, arguments ``text``, in place of the message)."""
        output: list[dict[str, Any]] = []
        if reasoning:
            output.append(
                {
                    "id": "rs_" + uuid.uuid4().hex,
                    "type": "reasoning",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": reasoning}],
                    "status": "completed",
                }
            )
        if self.tool is not None:
            self.item_id = "fc_" + uuid.uuid4().hex
            output.append(self._call_item(text, "completed"))
        elif text:
            output.append(
                {
                    "id": "msg_" + uuid.uuid4().hex,
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": text, "annotations": [], "logprobs": None}
                    ],
                    "status": "completed",
                }
            )
        return self._final(output, prompt_tokens, cached_tokens, reasoning_tokens, metrics)


class MessagesEvents(_TokenText):
    """The SSE events (and the non-streamed body) of one Messages API answer."""

    def __init__(
        self,
        model: str,
        plan: DeltaPlan | None,
        salt: int,
        n: int,
        finish: str,
        pieces: tuple[bytes, ...] | None = None,
        tool: ToolCall | None = None,
    ) -> None:
        super().__init__(plan, salt, n, pieces, tool)
        self.model = model
        self.finish = finish
        self.id = "msg_" + uuid.uuid4().hex
        self.index = -1  # the open block's index
        self.kind: str | None = None  # the open block: "thinking" | "text" | "tool_use"
        self.head = b""

    def opening(self, prompt_tokens: int) -> bytes:
        """``message_start``: the message with no content and ``usage.input_tokens``
        (the prompt; cache hits are known once it is scheduled, and reported in
        ``message_delta``)."""
        return _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": self.id,
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": self.model,
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": prompt_tokens, "output_tokens": 0},
                },
            },
        )

    def _stop(self) -> bytes:
        if self.kind is None:
            return b""
        out = b""
        if self.kind == "thinking":  # vLLM closes a thinking block with its signature
            out = _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": self.index,
                    "delta": {"type": "signature_delta", "signature": uuid.uuid4().hex},
                },
            )
        self.kind = None
        return out + _sse("content_block_stop", {"type": "content_block_stop", "index": self.index})

    @property
    def stop_reason(self) -> str:
        """``max_tokens`` at the cap, ``tool_use`` for a whole tool call, else ``end_turn``."""
        if self.finish == "length":
            return "max_tokens"
        return "tool_use" if self.tool is not None else "end_turn"

    def _start_tool(self) -> bytes:
        """A ``tool_use`` block's ``content_block_start`` (input ``{}``)."""
        tool = self.tool
        assert tool is not None
        self.kind = "tool_use"
        self.index += 1
        self.head = (
            b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": %d, '
            b'"delta": {"type": "input_json_delta", "partial_json": "' % self.index
        )
        block = {"type": "tool_use", "id": "toolu_" + tool.call_id, "name": tool.name, "input": {}}
        return _sse(
            "content_block_start",
            {"type": "content_block_start", "index": self.index, "content_block": block},
        )

    def _start(self, kind: str) -> bytes:
        if kind == "tool_use":
            return self._start_tool()
        self.kind = kind
        self.index += 1
        field = "thinking" if kind == "thinking" else "text"
        delta_type = "thinking_delta" if kind == "thinking" else "text_delta"
        self.head = (
            b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": %d, '
            b'"delta": {"type": "%b", "%b": "' % (self.index, delta_type.encode(), field.encode())
        )
        return _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": self.index,
                "content_block": {"type": kind, field: ""},
            },
        )

    def chunk(self, i: int, size: int = 1) -> bytes:
        """The events for tokens ``i … i+size-1``: one ``content_block_delta``, after
        the events that start its block (and stop the previous one); ``b""`` for an
        empty delta. A tool call's header token starts its ``tool_use`` block (no delta)."""
        if i == self.tool_at:
            return self._stop() + self._start("tool_use")
        text = self._text(i, size)
        if not text:
            return b""
        kind = "thinking" if i < self.n_reasoning else "text" if self.tool is None else "tool_use"
        out = b""
        if kind != self.kind:
            out = self._stop() + self._start(kind)
        return out + self.head + text + b'"}}\n\n'

    def closing(self, prompt_tokens: int, cached_tokens: int) -> bytes:
        """``content_block_stop`` of the open block, ``message_delta`` (stop reason and
        the usage, cumulative as Anthropic's), ``message_stop``."""
        return (
            self._stop()
            + _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
                    "usage": anthropic_usage(prompt_tokens, self.n, cached_tokens),
                },
            )
            + _sse("message_stop", {"type": "message_stop"})
        )

    @staticmethod
    def error(status: int, message: str) -> bytes:
        """An ``error`` event (``{"type": "error", "error": {"type", "message"}}``)."""
        return _sse("error", anthropic_error_body(status, message))

    def full_body(
        self, reasoning: str | None, text: str, prompt_tokens: int, cached_tokens: int
    ) -> dict[str, Any]:
        """The non-streamed answer (``stream`` false): the message."""
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append(
                {"type": "thinking", "thinking": reasoning, "signature": uuid.uuid4().hex}
            )
        if self.tool is not None:
            try:
                given = json.loads(text)
            except ValueError:  # cut at the cap: what was generated is not whole JSON
                given = {}
            content.append(
                {
                    "type": "tool_use",
                    "id": "toolu_" + self.tool.call_id,
                    "name": self.tool.name,
                    "input": given if isinstance(given, dict) else {},
                }
            )
        elif text or not content:  # an empty answer is one empty text block (vLLM)
            content.append({"type": "text", "text": text})
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": anthropic_usage(prompt_tokens, self.n, cached_tokens),
        }
