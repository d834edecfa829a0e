"""The simulator's ``data:`` chunks of chat and completions, shaped as servers send them.

vLLM's shapes exactly: a role-only first chat chunk, one chunk per token,
``finish_reason`` on the last token's chunk, a usage chunk with ``"choices": []``
when ``stream_options.include_usage`` is set, vLLM's per-request ``metrics`` on it
and on a non-streamed body, ``[DONE]`` at the end (:class:`ChunkWriter`). Chunks
are built from pre-rendered prefix/suffix strings around the JSON-encoded token,
because the server writes one per token and ``json.dumps`` of a whole dict per
token would dominate its CPU time.

Other servers' shapes use the same templates: :class:`ShapedChunks` renders a
:class:`~pytest_llmperf.apis.server_wire.DeltaPlan` (reasoning deltas first, empty
deltas where a token ends inside a multi-byte character, a separate finish chunk:
the simulator draws the plan, sim/deltas.py), and :class:`ToolCallChunks` a chat
answer that calls a tool, as vLLM streams one: the first ``delta.tool_calls``
delta carries the call's ``index``, ``id`` (``chatcmpl-tool-…``), ``type:
"function"`` and ``function: {"name", "arguments": ""}``; every later one only
``index`` and ``function.arguments``, a piece of the arguments JSON.
``finish_reason`` is ``tool_calls`` for ``tool_choice`` ``auto`` / ``required``
and ``stop`` for a named function (OpenAI's convention, which vLLM follows),
``length`` at the cap. Empty deltas do not apply to tool calls;
``separate_finish_chunk`` does. Both shapes give one ready-made chunk per token
(the header token alone), so both token paths of the server write them unchanged.
The server halves of :mod:`~pytest_llmperf.apis.chat` and
:mod:`~pytest_llmperf.apis.completions` frame their answers with these.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from pytest_llmperf.apis.filler_text import WORDS, WORDS_JSON, token_index
from pytest_llmperf.apis.names import Api
from pytest_llmperf.apis.served import AnswerPlan
from pytest_llmperf.apis.server_wire import (
    DeltaPlan,
    OutputPlan,
    Usage,
    WireError,
    plain_plan,
    priority_field,
    usage_body,
)

__all__ = [
    "DONE",
    "ChunkAnswer",
    "ChunkWriter",
    "ShapedChunks",
    "ToolCallChunks",
    "chat_tool_call",
    "openai_stream_fields",
    "split_text",
]

DONE = b"data: [DONE]\n\n"
_MARK = "\x00"
_WORDS_JSON = WORDS_JSON
_NWORDS = len(WORDS_JSON)


def openai_stream_fields(body: dict[str, Any]) -> tuple[bool, bool, int]:
    """``(stream, include_usage, priority)`` of a chat or completions body, after its
    ``n`` (only 1 is served)."""
    n = body.get("n", 1)
    if n != 1:
        raise WireError(400, "the simulator supports only n=1", "n")
    stream = bool(body.get("stream", False))
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise WireError(400, "stream_options must be an object", "stream_options")
    return stream, stream and bool(options.get("include_usage", False)), priority_field(body)


def split_text(
    plan: DeltaPlan | None, salt: int, n_out: int, pieces: tuple[bytes, ...] | None = None
) -> tuple[str | None, str]:
    """``(reasoning, answer)`` text of a whole response (non-streaming bodies); each
    token's text from ``pieces`` when given (outputs.py), else the filler words."""
    if plan is not None and plan.blank:  # every token decodes to nothing
        return None, ""
    if pieces is not None:
        words = [json.loads(b'"' + p + b'"') for p in pieces[:n_out]]
    else:
        words = [WORDS[token_index(j, salt)] for j in range(n_out)]
    if plan is None or not plan.n_reasoning:
        return None, "".join(words)
    return "".join(words[: plan.n_reasoning]), "".join(words[plan.n_reasoning :])


class ChunkWriter:
    """Renders the SSE frames (and the non-streaming body) of one response."""

    def __init__(self, api: str, model: str, reasoning_field: str = "reasoning_content") -> None:
        self.api = api
        self.model = model
        self.reasoning_field = reasoning_field
        self.created = int(time.time())
        if api == Api.CHAT:
            self.id = "chatcmpl-" + uuid.uuid4().hex
            head = {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": model,
            }
        else:
            self.id = "cmpl-" + uuid.uuid4().hex
            head = {
                "id": self.id,
                "object": "text_completion",
                "created": self.created,
                "model": model,
            }
        self._head = head
        head_json = json.dumps(head)[:-1]  # without the closing brace
        if api == Api.CHAT:
            choice = head_json + ', "choices": [{"index": 0, "delta": {'
            self._prefix = choice + '"content": '
            self._rprefix = choice + json.dumps(reasoning_field) + ": "
            self._mid = '}, "logprobs": null, "finish_reason": '
            self._suffix = "}]}\n\n"
            self._finish_prefix = choice  # closed by _mid: an empty delta
        else:
            # the completions API has no reasoning field: reasoning is text (as vLLM sends it)
            self._prefix = self._rprefix = head_json + ', "choices": [{"index": 0, "text": '
            self._mid = ', "logprobs": null, "finish_reason": '
            self._suffix = ', "stop_reason": null}]}\n\n'
            self._finish_prefix = self._prefix + '""'  # llama.cpp's empty text with the finish

    def role_chunk(self) -> bytes:
        """vLLM's first chat chunk: role only, empty content."""
        body = dict(self._head)
        body["choices"] = [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
        ]
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    def token_chunk(
        self, text: str, finish_reason: str | None = None, reasoning: bool = False
    ) -> bytes:
        """One content chunk (a reasoning chunk with ``reasoning``; in the completions
        API both are ``text``); ``finish_reason`` set on the last token's chunk."""
        fr = "null" if finish_reason is None else f'"{finish_reason}"'
        prefix = self._rprefix if reasoning else self._prefix
        return ("data: " + prefix + json.dumps(text) + self._mid + fr + self._suffix).encode()

    def token_template(
        self, finish_reason: str, reasoning: bool = False
    ) -> tuple[bytes, bytes, bytes]:
        """``(head, tail, last_tail)``: ``head + json(text) + tail`` is
        ``token_chunk(text, reasoning=reasoning)`` as bytes, and with ``last_tail`` it is
        ``token_chunk(text, finish_reason, reasoning)``. Lets a writer build each chunk
        with one concatenation of ready-made bytes."""
        head = ("data: " + (self._rprefix if reasoning else self._prefix)).encode()
        tail = (self._mid + "null" + self._suffix).encode()
        last_tail = (self._mid + f'"{finish_reason}"' + self._suffix).encode()
        return head, tail, last_tail

    def delta_chunk(self, members: str, finish_reason: str | None = None) -> bytes:
        """A chat chunk whose ``delta`` object has the JSON ``members`` (no braces):
        the shape of deltas other than text, such as tool calls (ToolCallChunks)."""
        fr = "null" if finish_reason is None else f'"{finish_reason}"'
        return ("data: " + self._finish_prefix + members + self._mid + fr + self._suffix).encode()

    def finish_chunk(self, finish_reason: str) -> bytes:
        """``finish_reason`` on a chunk of its own after the last token: an empty delta
        (chat, as OpenAI, SGLang and TGI send it) or an empty text (completions, as
        llama.cpp does)."""
        return (
            "data: " + self._finish_prefix + self._mid + f'"{finish_reason}"' + self._suffix
        ).encode()

    def usage_chunk(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int,
        reasoning_tokens: int | None = None,
        metrics: dict[str, float] | None = None,
    ) -> bytes:
        """Final chunk with ``choices: []`` and the usage (include_usage), and vLLM's
        per-request ``metrics`` when given."""
        body = dict(self._head)
        body["choices"] = []
        body["usage"] = usage_body(
            prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens
        )
        if metrics is not None:
            body["metrics"] = metrics
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    def full_body(
        self,
        text: str,
        finish_reason: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int,
        reasoning: str | None = None,
        reasoning_tokens: int | None = None,
        metrics: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        """The non-streaming response body; ``reasoning`` (chat) goes in the message's
        reasoning field beside the answer ``text``, as vLLM's reasoning parsers put it
        (``content`` is null when the answer is empty); vLLM's per-request ``metrics``
        when given."""
        body = dict(self._head)
        if self.api == Api.CHAT:
            body["object"] = "chat.completion"
            message: dict[str, Any] = {"role": "assistant", "content": text, "tool_calls": []}
            if reasoning is not None:
                message = {
                    "role": "assistant",
                    self.reasoning_field: reasoning,
                    "content": text or None,
                    "tool_calls": [],
                }
            body["choices"] = [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                    "stop_reason": None,
                }
            ]
        else:
            body["choices"] = [
                {
                    "index": 0,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                    "stop_reason": None,
                }
            ]
        body["usage"] = usage_body(
            prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens
        )
        if metrics is not None:
            body["metrics"] = metrics
        return body


class ShapedChunks:
    """The SSE bytes of one shaped response, token by token, in order.

    ``chunk(i, size)`` is the event(s) for tokens ``i … i+size-1`` (one token on
    the fast path; several when the multi-token fault groups them). It keeps the
    text held back by empty chunks, so it must be called in token order; a chunk
    never spans the reasoning/answer boundary (:meth:`clip`). The last token's
    bytes carry the ``finish_reason``, or are followed by a separate finish
    event with an empty delta.
    """

    __slots__ = (
        "empty",
        "finish_event",
        "head",
        "last_tail",
        "n",
        "n_reasoning",
        "pending",
        "pieces",
        "rhead",
        "salt",
        "tail",
    )

    def __init__(
        self,
        w: ChunkWriter,
        plan: DeltaPlan,
        salt: int,
        finish_reason: str,
        pieces: tuple[bytes, ...] | None = None,
    ) -> None:
        self.head, self.tail, self.last_tail = w.token_template(finish_reason)
        self.rhead = (
            w.token_template(finish_reason, reasoning=True)[0] if plan.n_reasoning else self.head
        )
        self.finish_event = w.finish_chunk(finish_reason) if plan.separate_finish else None
        self.n = plan.n
        self.n_reasoning = plan.n_reasoning
        self.empty = plan.empty
        self.salt = salt
        self.pending = b""  # JSON-escaped text held back by empty chunks (no quotes)
        self.pieces = pieces  # each token's JSON-escaped text (outputs.py); None: the words

    def clip(self, i: int, size: int) -> int:
        """``size`` cut so that a chunk starting at token ``i`` stays in one part."""
        r = self.n_reasoning
        return min(size, r - i) if i < r else size

    def chunk(self, i: int, size: int = 1) -> bytes:
        """The bytes to write for tokens ``i … i+size-1``."""
        pieces = self.pieces
        if size == 1:
            if pieces is None:
                word = _WORDS_JSON[(self.salt + i * 7) % _NWORDS]  # text.token_index, inlined
            else:
                word = b'"' + pieces[i] + b'"'
            if self.empty[i]:
                self.pending += word[1:-1]
                payload = b'""'
            elif self.pending:
                payload = b'"' + self.pending + word[1:]
                self.pending = b""
            else:
                payload = word
        else:
            out = b""
            pending = self.pending
            empty = self.empty
            for k in range(i, i + size):
                if pieces is None:
                    pending += _WORDS_JSON[(self.salt + k * 7) % _NWORDS][1:-1]
                else:
                    pending += pieces[k]
                if not empty[k]:
                    out += pending
                    pending = b""
            self.pending = pending
            payload = b'"' + out + b'"'
        end = i + size
        head = self.rhead if i < self.n_reasoning else self.head
        if end < self.n:
            return head + payload + self.tail
        if self.finish_event is None:
            return head + payload + self.last_tail
        return head + payload + self.tail + self.finish_event


def chat_tool_call(call_id: str, name: str, arguments: str) -> dict[str, object]:
    """A whole tool call in a non-streamed chat message (``message.tool_calls[k]``)."""
    return {
        "id": "chatcmpl-tool-" + call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


class ToolCallChunks:
    """The SSE bytes of a chat answer that calls a tool, token by token, in order."""

    __slots__ = (
        "arg_head",
        "arg_last",
        "arg_tail",
        "at",
        "finish_event",
        "header",
        "header_last",
        "n",
        "pieces",
        "rhead",
        "rlast",
        "rtail",
    )

    def __init__(
        self, w: ChunkWriter, plan: DeltaPlan | None, out: OutputPlan, finish_reason: str
    ) -> None:
        tool = out.tool
        assert tool is not None and out.pieces is not None
        self.n = out.n
        self.at = tool.at
        self.pieces = out.pieces
        separate = plan is not None and plan.separate_finish
        self.finish_event = w.finish_chunk(finish_reason) if separate else None
        last = None if separate else finish_reason
        self.rhead, self.rtail, rlast = w.token_template(finish_reason, reasoning=True)
        self.rlast = self.rtail if separate else rlast
        call = {
            "index": 0,
            "id": "chatcmpl-tool-" + tool.call_id,
            "type": "function",
            "function": {"name": tool.name, "arguments": ""},
        }
        members = '"tool_calls": ' + json.dumps([call])
        self.header = w.delta_chunk(members)
        self.header_last = w.delta_chunk(members, last)
        piece = '"tool_calls": [{"index": 0, "function": {"arguments": "' + _MARK + '"}}]'
        self.arg_head, self.arg_tail = w.delta_chunk(piece).split(_MARK.encode())
        self.arg_last = w.delta_chunk(piece, last).split(_MARK.encode())[1]

    def clip(self, i: int, size: int) -> int:
        """``size`` cut so that a chunk starting at token ``i`` stays in one part, the
        header alone."""
        at = self.at
        if i < at:
            return min(size, at - i)
        return 1 if i == at else size

    def chunk(self, i: int, size: int = 1) -> bytes:
        """The bytes to write for tokens ``i … i+size-1``."""
        end = i + size
        last = end >= self.n
        if i == self.at:
            out = self.header_last if last else self.header
        else:
            text = b"".join(self.pieces[i:end])
            if i < self.at:
                out = self.rhead + b'"' + text + b'"' + (self.rlast if last else self.rtail)
            else:
                out = self.arg_head + text + (self.arg_last if last else self.arg_tail)
        if last and self.finish_event is not None:
            out += self.finish_event
        return out


class ChunkAnswer:
    """One chat or completions answer: ``data:`` chunks (:class:`ChunkWriter`), shaped as
    other servers send them (:class:`ShapedChunks`) or as a tool call
    (:class:`ToolCallChunks`); the usage chunk (``include_usage``) and ``[DONE]`` at the
    end. ``role_first``: the stream opens with chat's role-only chunk."""

    def __init__(self, api: str, plan: AnswerPlan, *, role_first: bool) -> None:
        self.out = out = plan.out
        deltas = plan.deltas
        self.role_first = role_first
        w = self.writer = ChunkWriter(api, plan.parsed.model, plan.settings.reasoning_field)
        self.shaped: ShapedChunks | ToolCallChunks | None = None
        if out.tool is not None:
            self.shaped = ToolCallChunks(w, deltas, out, out.finish)
        elif deltas is not None or out.pieces is not None:
            shape = deltas if deltas is not None else plain_plan(out.n)
            self.shaped = ShapedChunks(w, shape, out.salt, out.finish, out.pieces)

    def opening(self) -> bytes:
        return self.writer.role_chunk() if self.role_first else b""

    def closing(self, usage: Usage, include_usage: bool) -> tuple[bytes, ...]:
        if not include_usage:
            return (DONE,)
        chunk = self.writer.usage_chunk(
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_tokens,
            usage.reasoning_tokens,
            usage.metrics,
        )
        return chunk, DONE

    def full_body(self, reasoning: str | None, text: str, usage: Usage) -> dict[str, Any]:
        out = self.out
        body = self.writer.full_body(
            text,
            out.finish,
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_tokens,
            reasoning,
            usage.reasoning_tokens,
            usage.metrics,
        )
        if out.tool is not None:  # the call in place of the answer text (vLLM's message)
            message = body["choices"][0]["message"]
            message["content"] = None
            message["tool_calls"] = [chat_tool_call(out.tool.call_id, out.tool.name, text)]
        return body
