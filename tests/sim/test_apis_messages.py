"""Anthropic's Messages API (``POST /v1/messages``) over real sockets: events in order,
usage in ``message_start`` and ``message_delta``, errors in Anthropic's shape."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from pytest_llmperf.sim import SimServer
from pytest_llmperf.tokens import count_tokens

pytestmark = pytest.mark.asyncio

FAST = {"ttft_ms": 2, "itl_ms": 0.5}
PROMPT = "Write a haiku about caches and queues."
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def body(**extra: Any) -> dict[str, Any]:
    b: dict[str, Any] = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
        "max_tokens": 8,
        "stream": True,
        "temperature": 0,
        "ignore_eos": True,
    }
    b.update(extra)
    return b


async def stream_events(
    c: httpx.AsyncClient, payload: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """``(event name, data)`` of every SSE event; the ``event:`` line names the type."""
    out: list[tuple[str, dict[str, Any]]] = []
    name = None
    async with c.stream("POST", "/v1/messages", json=payload, headers=HEADERS) as resp:
        assert resp.status_code == 200, await resp.aread()
        assert resp.headers["content-type"].startswith("text/event-stream")
        async for line in resp.aiter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
                assert name == data["type"]
                out.append((name, data))
                name = None
    return out


def deltas(events: list[tuple[str, dict[str, Any]]], kind: str) -> list[str]:
    field = {"text_delta": "text", "thinking_delta": "thinking"}[kind]
    return [
        d["delta"][field]
        for n, d in events
        if n == "content_block_delta" and d["delta"]["type"] == kind
    ]


@pytest.mark.parametrize("profile", ["fixed", "tiny"])
async def test_stream_events_in_order_with_usage(profile: str) -> None:
    overrides = FAST if profile == "fixed" else {}
    async with SimServer(profile, **overrides) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        events = await stream_events(c, body(system="Be terse."))
    names = [n for n, _ in events]
    assert names == (
        ["message_start", "content_block_start"]
        + ["content_block_delta"] * 8
        + ["content_block_stop", "message_delta", "message_stop"]
    )
    start = events[0][1]["message"]
    n_prompt = count_tokens("Be terse.") + count_tokens(PROMPT)
    assert start["role"] == "assistant" and start["type"] == "message"
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"] == {"input_tokens": n_prompt, "output_tokens": 0}
    assert events[1][1]["content_block"] == {"type": "text", "text": ""}
    assert {d["index"] for n, d in events if n.startswith("content_block")} == {0}
    text = "".join(deltas(events, "text_delta"))
    assert count_tokens(text) == 8
    end = events[-2][1]
    assert end["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    assert end["usage"] == {
        "input_tokens": n_prompt,
        "output_tokens": 8,
        "cache_read_input_tokens": 0,
    }


async def test_thinking_block_first_closed_by_its_signature() -> None:
    async with (
        SimServer("fixed", reasoning_tokens=3, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await stream_events(c, body(max_tokens=7))
    names = [n for n, _ in events]
    assert names == (
        ["message_start", "content_block_start"]
        + ["content_block_delta"] * 4  # three thinking deltas and the signature
        + ["content_block_stop", "content_block_start"]
        + ["content_block_delta"] * 4
        + ["content_block_stop", "message_delta", "message_stop"]
    )
    assert events[1][1]["content_block"] == {"type": "thinking", "thinking": ""}
    assert len(deltas(events, "thinking_delta")) == 3
    assert events[5][1]["delta"]["type"] == "signature_delta"
    assert events[7][1] == {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "text", "text": ""},
    }
    assert len(deltas(events, "text_delta")) == 4
    assert events[-2][1]["usage"]["output_tokens"] == 7


async def test_empty_deltas_are_dropped_as_vllm_does() -> None:
    async with (
        SimServer("tiny", empty_delta_rate=0.4, seed=5) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await stream_events(c, body(max_tokens=30))
    texts = deltas(events, "text_delta")
    assert 0 < len(texts) < 30 and all(texts)
    assert events[-2][1]["usage"]["output_tokens"] == 30


async def test_prefix_cache_hits_are_cache_read_tokens() -> None:
    """The engine's prefix cache: a repeated prompt's hit is ``cache_read_input_tokens``
    and ``input_tokens`` the rest, so their sum stays the prompt."""
    long_prompt = " ".join(f"word{i}" for i in range(200))
    payload = body(messages=[{"role": "user", "content": long_prompt}])
    async with SimServer("tiny") as sim, httpx.AsyncClient(base_url=sim.url) as c:
        await stream_events(c, payload)
        events = await stream_events(c, payload)
    usage = events[-2][1]["usage"]
    assert usage["cache_read_input_tokens"] > 0
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] == 200


async def test_not_streamed() -> None:
    async with (
        SimServer("fixed", reasoning_tokens=2, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        resp = await c.post("/v1/messages", json=body(stream=False, max_tokens=5), headers=HEADERS)
    assert resp.status_code == 200
    answer = resp.json()
    assert answer["type"] == "message" and answer["role"] == "assistant"
    assert [b["type"] for b in answer["content"]] == ["thinking", "text"]
    assert answer["stop_reason"] == "max_tokens"
    assert answer["usage"]["output_tokens"] == 5
    assert answer["usage"]["input_tokens"] == count_tokens(PROMPT)


async def test_errors_in_anthropic_shape() -> None:
    no_cap = body()
    del no_cap["max_tokens"]
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        missing = await c.post("/v1/messages", json=no_cap, headers=HEADERS)
        unknown = await c.post("/v1/messages", json=body(model="claude-9"), headers=HEADERS)
        bad_role = await c.post(
            "/v1/messages", json=body(messages=[{"role": "robot", "content": "x"}]), headers=HEADERS
        )
        not_json = await c.post("/v1/messages", content=b"{", headers=HEADERS)
    assert missing.status_code == 400
    assert missing.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
    }
    assert unknown.status_code == 404
    assert unknown.json()["type"] == "error"
    assert unknown.json()["error"]["type"] == "not_found_error"
    assert "claude-9" in unknown.json()["error"]["message"]
    assert bad_role.status_code == 400
    assert "robot" in bad_role.json()["error"]["message"]
    assert not_json.status_code == 400
    assert not_json.json()["error"]["type"] == "invalid_request_error"


async def test_strict_profile_refuses_an_unknown_field_as_anthropic() -> None:
    async with (
        SimServer("fixed", strict_fields=True, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        refused = await c.post("/v1/messages", json=body(), headers=HEADERS)
        payload = body(stream=False)
        del payload["ignore_eos"]
        ok = await c.post("/v1/messages", json=payload, headers=HEADERS)
    assert refused.status_code == 400
    assert refused.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "ignore_eos: Extra inputs are not permitted",
        },
    }
    assert ok.status_code == 200


async def test_injected_errors_as_status_or_as_error_event() -> None:
    async with (
        SimServer("fixed", error_rate=1.0, error_codes=[429], **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        resp = await c.post("/v1/messages", json=body(), headers=HEADERS)
    assert resp.status_code == 429
    assert resp.headers["Retry-After"] == "1"
    assert resp.json() == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Too many requests (simulated)."},
    }
    async with (
        SimServer("fixed", error_rate=1.0, error_codes=[503], stream_error_events=True) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await stream_events(c, body())
    assert [n for n, _ in events] == ["message_start", "error"]
    assert events[-1][1] == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Service unavailable (simulated)."},
    }
