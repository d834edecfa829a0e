"""``RequestRecord.reply``: the answer's text, collected for a later session turn.

The issuer sets ``record.reply = []`` before the send; every event's answer text
(chat ``content``, completions ``text``; never reasoning) is appended in order,
and a whole (non-streamed) answer's text too. With ``reply`` None nothing is
collected.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import pytest
from scripted_server import Script, ScriptedServer, chat_chunk, sse
from strict_server import StrictServer, serve

from pytest_llmperf.apis.chunks import answer_text, parse_chunk
from pytest_llmperf.client import Endpoint, RequestRecord, send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.workloads import Sample

pytestmark = pytest.mark.asyncio

SAMPLE = Sample(index=0, prompt="Tell me about harbours.", input_tokens=5, max_tokens=8)


@dataclass
class ClosingServer(StrictServer):
    """A :class:`StrictServer` that closes its side of each connection when done with it."""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await super().handle(reader, writer)
        finally:
            writer.close()


async def _send(url: str, api: str = "chat", *, reply: bool = True) -> RequestRecord:
    endpoint = Endpoint.from_env(url, api_key_env=None, model="m", api=api)  # type: ignore[arg-type]
    record = RequestRecord(index=0, t_sched=time.monotonic_ns())
    if reply:
        record.reply = []
    async with StreamClient(endpoint) as http:
        return await send_request(http, endpoint, SAMPLE, record)


def _strict_answer(server: StrictServer, *, api: str) -> str:
    """What the strict server streams as answer text (see strict_server.py)."""
    pieces = [] if api == "chat" else [f"think{i} " for i in range(server.reasoning)]
    for k in range(server.answer):
        empty = server.empty_every and k % server.empty_every == server.empty_every - 1
        pieces.append("" if empty else f"word{k} ")
    return "".join(pieces)


@pytest.mark.parametrize("api", ["chat", "completions"])
async def test_reply_is_the_answer_text_the_server_streamed(api: str) -> None:
    server = ClosingServer(reasoning=3, answer=10, allowed_extra=frozenset({"ignore_eos"}))
    with serve(server):
        record = await _send(server.url, api)
    assert record.ok, record.error_detail
    assert record.reply is not None
    # chat: the reasoning_content deltas are left out; completions stream them as text
    assert "".join(record.reply) == _strict_answer(server, api=api)
    assert "" not in record.reply  # empty deltas add nothing
    assert record.token_events == server.tokens  # the measurement is the same as without


async def test_no_reply_is_collected_unless_asked() -> None:
    server = ClosingServer(allowed_extra=frozenset({"ignore_eos"}))
    with serve(server):
        record = await _send(server.url, reply=False)
    assert record.ok and record.reply is None


async def test_reply_from_several_events_in_one_read_and_a_finish_on_the_last() -> None:
    steps = [
        (0, chat_chunk("", role="assistant")),
        (0.01, chat_chunk("Hello") + chat_chunk(", ") + chat_chunk("wörld")),
        (0.01, chat_chunk("!", finish="stop") + sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
    assert record.ok, record.error_detail
    assert record.reply == ["Hello", ", ", "wörld", "!"]


async def test_reply_leaves_out_reasoning_and_tool_calls_in_the_same_delta() -> None:
    def chunk(delta: dict[str, object]) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        return sse({"id": "x", "object": "chat.completion.chunk", "choices": [choice]})

    call = [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f"}}]
    steps = [
        (0, chunk({"role": "assistant", "content": ""})),
        (0, chunk({"reasoning": "hmm "})),
        (0, chunk({"reasoning_content": "so ", "content": "Yes"})),
        (0, chunk({"tool_calls": call})),
        (0, chunk({"content": " indeed"})),
        (0, chat_chunk("", finish="stop") + sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
    assert record.ok, record.error_detail
    assert record.reply == ["Yes", " indeed"]


@pytest.mark.parametrize(
    ("api", "answer", "text"),
    [
        (
            "chat",
            {
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "reasoning_content": "thinking first",
                            "content": "The whole answer.",
                        },
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 4},
            },
            "The whole answer.",
        ),
        (
            "completions",
            {
                "choices": [{"index": 0, "text": "A whole completion.", "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 4},
            },
            "A whole completion.",
        ),
    ],
)
async def test_reply_of_a_server_that_answers_whole(
    api: str, answer: dict[str, object], text: str
) -> None:
    script = Script([(0.01, json.dumps(answer).encode())], content_type="application/json")
    async with ScriptedServer(script) as srv:
        record = await _send(srv.url, api)
    assert record.ok, record.error_detail
    assert record.reply == [text]


@pytest.mark.parametrize(
    ("payload", "text"),
    [
        ('{"choices":[{"index":0,"delta":{"content":"a"}}]}', "a"),
        ('  {"choices":[{"index":0,"delta":{"content":"b"}}]}', "b"),
        ('{"choices":[{"index":0,"delta":{"reasoning_content":"r"}}]}', ""),
        ('{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{}]}}]}', ""),
        ('{"choices":[{"index":0,"text":"c"}]}', "c"),
        ('{"choices":[{"index":0,"message":{"content":"d"}}]}', "d"),
        ('{"choices":[]}', ""),
        ('{"choices":["odd"]}', ""),
        ("[1]", ""),
    ],
)
async def test_answer_text_agrees_with_parse_chunk(payload: str, text: str) -> None:
    assert answer_text(payload) == text
    if text and not payload.startswith(("[", '{"choices":[]')):
        assert parse_chunk(payload).answer
