"""A strict, reasoning, empty-delta streaming server on 127.0.0.1 that records its send times.

It behaves as the servers the client must be correct on: it refuses request
fields outside the OpenAI API (as the OpenAI API does, with 400, or as
FastAPI/pydantic servers such as ``transformers serve`` do, with 422 and a
``detail`` list), optionally refuses ``max_tokens`` on chat in favour of
``max_completion_tokens``, and streams like vLLM with a reasoning parser: a
role-only chunk with ``"content": ""``, ``reasoning_content`` deltas, answer
deltas of which some are ``""`` (a token ending inside a UTF-8 character),
``finish_reason`` on an empty delta, a usage chunk, ``[DONE]``.

It runs in a thread of the test's process, so its ``time.monotonic_ns()``
readings (taken right after each event is handed to the socket) are on the
client's clock: they are the truth the client's ``ttft``/``ttfo`` are held to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from loopback import read_request, serve

__all__ = ["OPENAI_CHAT_FIELDS", "ServedRequest", "StrictServer", "serve"]

OPENAI_CHAT_FIELDS = frozenset(
    [
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "n",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "user",
        "seed",
        "tools",
        "tool_choice",
        "response_format",
        "parallel_tool_calls",
        "reasoning_effort",
    ]
)
OPENAI_COMPLETION_FIELDS = frozenset(
    [
        "model",
        "prompt",
        "max_tokens",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "n",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "echo",
        "best_of",
        "suffix",
        "user",
        "seed",
    ]
)
MODEL = "strict-model"


@dataclass
class ServedRequest:
    """One streamed answer as the server sent it (monotonic ns on the test's clock)."""

    received_ns: int
    first_event_ns: int = 0  # the first token event (reasoning or empty included)
    first_answer_ns: int = 0  # the first non-empty answer content
    # the same two events, stamped just *before* their bytes are handed to the socket: the
    # client cannot read an event before this instant (causality, whatever the scheduler)
    first_event_write_ns: int = 0
    first_answer_write_ns: int = 0
    last_event_write_ns: int = 0  # the last token event, stamped the same way
    events: int = 0
    body: dict[str, Any] = field(default_factory=dict)


@dataclass
class StrictServer:
    """``reasoning`` reasoning tokens, then ``answer`` answer tokens (every ``empty_every``-th
    one ``""``), ``gap_s`` apart; ``style`` is ``openai`` (400) or ``pydantic`` (422)."""

    reasoning: int = 3
    answer: int = 9
    empty_every: int = 3
    gap_s: float = 0.002
    style: str = "openai"
    refuse_max_tokens: bool = False
    allowed_extra: frozenset[str] = frozenset()
    usage_only: bool = False  # stream no token event, only the usage that counts them
    finish_on_last: bool = False  # vLLM: finish_reason rides on the last token's chunk
    reset_after_500: bool = False  # uvicorn: a 500 for /models, then the socket is reset
    served: list[ServedRequest] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tokens(self) -> int:
        return self.reasoning + self.answer

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                request = await read_request(reader)
                method, path, raw = request.method, request.path, request.body
                received = request.received_ns
                if method == "GET" and self.reset_after_500:
                    writer.write(
                        b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\n"
                        b"content-length: 21\r\n\r\nInternal Server Error"
                    )
                    await writer.drain()
                    await asyncio.sleep(0.05)  # the client may send its next request: reset
                    writer.transport.abort()
                    return
                if method == "GET":
                    models = {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
                    await _whole(writer, 200, models)
                    continue
                body = json.loads(raw)
                refusal = self._refusal(body, chat=path.endswith("/chat/completions"))
                if refusal is not None:
                    self.refusals.append(json.dumps(refusal[1]))
                    await _whole(writer, *refusal)
                    continue
                await self._stream(writer, body, received, chat=path.endswith("/chat/completions"))

    def _refusal(self, body: dict[str, Any], *, chat: bool) -> tuple[int, Any] | None:
        allowed = (OPENAI_CHAT_FIELDS if chat else OPENAI_COMPLETION_FIELDS) | self.allowed_extra
        unknown = sorted(set(body) - allowed)
        if chat and self.refuse_max_tokens and "max_tokens" in body:
            message = (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead."
            )
            return 400, {"error": {"message": message, "type": "invalid_request_error"}}
        if not unknown:
            return None
        if self.style == "pydantic":
            detail = [
                {
                    "type": "extra_forbidden",
                    "loc": ["body", name],
                    "msg": "Extra inputs are not permitted",
                    "input": body[name],
                }
                for name in unknown
            ]
            return 422, {"detail": detail}
        message = f"Unrecognized request argument supplied: {unknown[0]}"
        return 400, {"error": {"message": message, "type": "invalid_request_error"}}

    async def _stream(
        self, writer: asyncio.StreamWriter, body: dict[str, Any], received: int, *, chat: bool
    ) -> None:
        served = ServedRequest(received, body=body)
        self.served.append(served)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        if chat:
            await _event(writer, _choice({"role": "assistant", "content": ""}))
        for i in range(0 if self.usage_only else self.tokens):
            await asyncio.sleep(self.gap_s)
            if i < self.reasoning:
                text, key, answer = f"think{i} ", "reasoning_content", False
            else:
                k = i - self.reasoning
                empty = self.empty_every and k % self.empty_every == self.empty_every - 1
                text, key, answer = ("" if empty else f"word{k} "), "content", not empty
            finish = "length" if self.finish_on_last and i == self.tokens - 1 else None
            payload = _choice({key: text}, finish) if chat else _text(text, finish)
            before = time.monotonic_ns()
            await _event(writer, payload)
            now = time.monotonic_ns()
            served.events += 1
            served.first_event_ns = served.first_event_ns or now
            served.first_event_write_ns = served.first_event_write_ns or before
            served.last_event_write_ns = before
            if answer and not served.first_answer_ns:
                served.first_answer_ns = now
                served.first_answer_write_ns = before
        if not self.finish_on_last:
            last = _choice({}, finish="length") if chat else _text("", finish="length")
            await _event(writer, last)
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": 5,
                "completion_tokens": self.tokens,
                "total_tokens": 5 + self.tokens,
                "completion_tokens_details": {"reasoning_tokens": self.reasoning},
            }
            await _event(writer, {"id": "x", "choices": [], "usage": usage})
        await _event(writer, "[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "x", "object": "chat.completion.chunk", "model": MODEL, "choices": [choice]}


def _text(text: str, finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "finish_reason": finish}
    return {"id": "x", "object": "text_completion", "model": MODEL, "choices": [choice]}


async def _event(writer: asyncio.StreamWriter, payload: Any) -> None:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    event = f"data: {data}\n\n".encode()
    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
    await writer.drain()


async def _whole(writer: asyncio.StreamWriter, status: int, obj: Any) -> None:
    body = json.dumps(obj).encode()
    writer.write(
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
