"""Reasoning deltas, empty deltas and a separate finish chunk, byte by byte on real sockets.

Both token paths are covered: ``fixed`` streams through the general path (one
coroutine per stream) and ``tiny`` through the engine's fan-out (ready-made
chunks written from the step); the same seed and request index must give the
same stream on both.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from pytest_llmperf.sim import SimServer
from pytest_llmperf.sim.text import token_text
from pytest_llmperf.tokens import count_tokens

pytestmark = pytest.mark.asyncio

PROMPT = "Think about the queue, then answer."
FAST = {"ttft_ms": 1, "itl_ms": 0.2}  # fixed profile; ignored knobs are harmless on tiny
PROFILES = [("fixed", FAST), ("tiny", {})]


def _chat(max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": PROMPT}],
        "max_completion_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


async def _raw_events(c: httpx.AsyncClient, path: str, body: dict[str, Any]) -> list[bytes]:
    """Every SSE event of one response as the exact bytes the server sent."""
    async with c.stream("POST", path, json=body) as resp:
        assert resp.status_code == 200, await resp.aread()
        raw = b"".join([chunk async for chunk in resp.aiter_raw()])
    events = raw.split(b"\n\n")
    assert events[-1] == b""
    return [e + b"\n\n" for e in events[:-1]]


def _chat_event(head: dict[str, Any], delta: str, finish: str | None) -> bytes:
    """A chat chunk as the simulator (and vLLM, modulo spacing) writes it."""
    fr = "null" if finish is None else f'"{finish}"'
    return (
        f'data: {{"id": "{head["id"]}", "object": "chat.completion.chunk", '
        f'"created": {head["created"]}, "model": "{head["model"]}", "choices": '
        f'[{{"index": 0, "delta": {delta}, "logprobs": null, "finish_reason": {fr}}}]}}\n\n'
    ).encode()


def _completion_event(head: dict[str, Any], text: str, finish: str | None) -> bytes:
    fr = "null" if finish is None else f'"{finish}"'
    return (
        f'data: {{"id": "{head["id"]}", "object": "text_completion", '
        f'"created": {head["created"]}, "model": "{head["model"]}", "choices": '
        f'[{{"index": 0, "text": {json.dumps(text)}, "logprobs": null, "finish_reason": {fr}, '
        f'"stop_reason": null}}]}}\n\n'
    ).encode()


def _deltas(events: list[bytes]) -> list[tuple[str, str, str | None]]:
    """(field, text, finish_reason) of every chat chunk after the role chunk, before usage."""
    out = []
    for e in events[1:]:
        if e == b"data: [DONE]\n\n":
            break
        chunk = json.loads(e[len(b"data: ") :])
        if not chunk["choices"]:
            continue
        choice = chunk["choices"][0]
        ((field, text),) = choice["delta"].items() if choice["delta"] else (("", ""),)
        out.append((field, text, choice["finish_reason"]))
    return out


@pytest.mark.parametrize(("profile", "kw"), PROFILES)
async def test_reasoning_then_content_byte_by_byte(profile: str, kw: dict[str, Any]) -> None:
    async with (
        SimServer(profile, reasoning_tokens=3, **kw) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await _raw_events(c, "/v1/chat/completions", _chat(5))
    head = json.loads(events[0][len(b"data: ") :])
    words = [token_text(k, 0) for k in range(5)]  # request 0: salt 0
    expected = [
        _chat_event(head, '{"role": "assistant", "content": ""}', None),
        *(_chat_event(head, f'{{"reasoning_content": {json.dumps(w)}}}', None) for w in words[:3]),
        _chat_event(head, f'{{"content": {json.dumps(words[3])}}}', None),
        _chat_event(head, f'{{"content": {json.dumps(words[4])}}}', "length"),
    ]
    assert events[: len(expected)] == expected
    usage = json.loads(events[-2][len(b"data: ") :])
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 5
    assert usage["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 5
    assert events[-1] == b"data: [DONE]\n\n" and len(events) == len(expected) + 2


@pytest.mark.parametrize(("profile", "kw"), PROFILES)
async def test_reasoning_field_named_reasoning(profile: str, kw: dict[str, Any]) -> None:
    async with (
        SimServer(profile, reasoning_tokens=2, reasoning_field="reasoning", **kw) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await _raw_events(c, "/v1/chat/completions", _chat(4))
    fields = [f for f, _, _ in _deltas(events)]
    assert fields == ["reasoning", "reasoning", "content", "content"]


async def test_answer_shorter_than_reasoning_is_all_reasoning() -> None:
    async with (
        SimServer("fixed", reasoning_tokens=10, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await _raw_events(c, "/v1/chat/completions", _chat(4))
    deltas = _deltas(events)
    assert [f for f, _, _ in deltas] == ["reasoning_content"] * 4
    assert deltas[-1][2] == "length"
    usage = json.loads(events[-2][len(b"data: ") :])["usage"]
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 4}


@pytest.mark.parametrize(("profile", "kw"), PROFILES)
async def test_completions_stream_reasoning_as_text(profile: str, kw: dict[str, Any]) -> None:
    # vLLM's completions API has no reasoning field: the reasoning is text, and usage
    # has no completion_tokens_details
    async with (
        SimServer(profile, reasoning_tokens=3, **kw) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        body = {
            "prompt": PROMPT,
            "max_tokens": 5,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        events = await _raw_events(c, "/v1/completions", body)
    head = json.loads(events[0][len(b"data: ") :])
    words = [token_text(k, 0) for k in range(5)]
    expected = [_completion_event(head, w, None) for w in words[:4]]
    expected.append(_completion_event(head, words[4], "length"))
    assert events[:5] == expected
    usage = json.loads(events[5][len(b"data: ") :])["usage"]
    assert usage["completion_tokens"] == 5 and "completion_tokens_details" not in usage


@pytest.mark.parametrize(("profile", "kw"), PROFILES)
async def test_empty_deltas_keep_their_slot_and_carry_text(
    profile: str, kw: dict[str, Any]
) -> None:
    n = 60
    async with (
        SimServer(profile, empty_delta_rate=0.4, seed=5, **kw) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await _raw_events(c, "/v1/chat/completions", _chat(n))
    deltas = _deltas(events)
    assert len(deltas) == n  # one chunk per token, empty or not
    texts = [t for _, t, _ in deltas]
    empties = [t == "" for t in texts]
    assert 5 < sum(empties) < 40
    assert {f for f, _, _ in deltas} == {"content"} and deltas[-1][2] == "length"
    # an empty delta's word arrives with the next non-empty delta
    words = [token_text(k, 0) for k in range(n)]
    pending = ""
    for k, text in enumerate(texts):
        pending += words[k]
        if text:
            assert text == pending
            pending = ""
    full = "".join(texts)
    assert full == "".join(words)[: len(full)]
    usage = json.loads(events[-2][len(b"data: ") :])["usage"]
    assert usage["completion_tokens"] == n and "completion_tokens_details" not in usage
    # byte shape of an empty chunk
    head = json.loads(events[0][len(b"data: ") :])
    k = empties.index(True)
    assert events[1 + k] == _chat_event(head, '{"content": ""}', None)


async def test_empty_delta_seeding() -> None:
    """Same seed: the same chunks are empty, on both token paths; another seed: others."""

    async def pattern(profile: str, seed: int, **kw: Any) -> list[bool]:
        async with (
            SimServer(profile, empty_delta_rate=0.3, seed=seed, **kw) as sim,
            httpx.AsyncClient(base_url=sim.url) as c,
        ):
            events = await _raw_events(c, "/v1/chat/completions", _chat(80))
        return [t == "" for _, t, _ in _deltas(events)]

    a = await pattern("fixed", 1, **FAST)
    assert a == await pattern("fixed", 1, **FAST)
    assert a == await pattern("tiny", 1)
    assert a != await pattern("fixed", 2, **FAST)


@pytest.mark.parametrize(("profile", "kw"), PROFILES)
async def test_separate_finish_chunk(profile: str, kw: dict[str, Any]) -> None:
    async with (
        SimServer(profile, separate_finish_chunk=True, **kw) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await _raw_events(c, "/v1/chat/completions", _chat(3))
        cevents = await _raw_events(
            c, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2, "stream": True}
        )
    head = json.loads(events[0][len(b"data: ") :])
    words = [token_text(k, 0) for k in range(3)]
    assert events[1:5] == [
        *(_chat_event(head, f'{{"content": {json.dumps(w)}}}', None) for w in words),
        _chat_event(head, "{}", "length"),
    ]
    usage = json.loads(events[5][len(b"data: ") :])["usage"]
    assert usage["completion_tokens"] == 3
    chead = json.loads(cevents[0][len(b"data: ") :])
    cwords = [token_text(k, 13) for k in range(2)]  # the second request: salt 13
    assert cevents == [
        *(_completion_event(chead, w, None) for w in cwords),
        _completion_event(chead, "", "length"),  # llama.cpp's empty text with the finish
        b"data: [DONE]\n\n",
    ]


async def test_without_include_usage_no_usage_is_sent() -> None:
    async with (
        SimServer("strict-reasoning", **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        body = _chat(20)
        del body["stream_options"]
        events = await _raw_events(c, "/v1/chat/completions", body)
    assert all(b'"usage"' not in e for e in events)
    assert events[-1] == b"data: [DONE]\n\n"
    assert len(_deltas(events)) == 21  # 20 tokens and the separate finish chunk


async def test_multi_token_fault_chunks_stay_within_one_part() -> None:
    async with (
        SimServer(
            "fixed",
            reasoning_tokens=5,
            empty_delta_rate=0.3,
            multi_token_rate=0.7,
            multi_token_max=4,
            **FAST,
        ) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await _raw_events(c, "/v1/chat/completions", _chat(30))
    deltas = _deltas(events)
    assert len(deltas) < 30  # some chunks carry several tokens
    reasoning = "".join(t for f, t, _ in deltas if f == "reasoning_content")
    content = "".join(t for f, t, _ in deltas if f == "content")
    words = [token_text(k, 0) for k in range(30)]
    assert reasoning == "".join(words[:5])
    assert "".join(words[5:]).startswith(content)
    usage = json.loads(events[-2][len(b"data: ") :])["usage"]
    assert usage["completion_tokens"] == 30
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 5}


@pytest.mark.parametrize(("profile", "kw"), PROFILES)
async def test_non_streaming_reasoning_body(profile: str, kw: dict[str, Any]) -> None:
    async with (
        SimServer(profile, reasoning_tokens=2, empty_delta_rate=0.5, **kw) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 5}
        full = (await c.post("/v1/chat/completions", json=body)).json()
    message = full["choices"][0]["message"]
    words = [token_text(k, 0) for k in range(5)]
    assert message == {
        "role": "assistant",
        "reasoning_content": "".join(words[:2]),
        "content": "".join(words[2:]),
        "tool_calls": [],
    }
    assert full["usage"]["completion_tokens"] == 5 == count_tokens("".join(words))
    assert full["usage"]["completion_tokens_details"] == {"reasoning_tokens": 2}
