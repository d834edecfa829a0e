"""The Responses API (``POST /v1/responses``) over real sockets: typed events in vLLM's
order, usage equal to the tokens asked for, the end at the cap, errors in OpenAI's shape."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from pytest_llmperf.sim import SimServer
from pytest_llmperf.tokens import count_tokens

pytestmark = pytest.mark.asyncio

FAST = {"ttft_ms": 2, "itl_ms": 0.5}
PROMPT = "Summarise the plot of a long novel, please."


def body(**extra: Any) -> dict[str, Any]:
    b: dict[str, Any] = {
        "input": [{"role": "user", "content": [{"type": "input_text", "text": PROMPT}]}],
        "max_output_tokens": 9,
        "stream": True,
        "temperature": 0,
        "ignore_eos": True,
    }
    b.update(extra)
    return b


async def stream_events(
    c: httpx.AsyncClient, payload: dict[str, Any], path: str = "/v1/responses"
) -> list[tuple[str, dict[str, Any]]]:
    """``(event name, data)`` of every SSE event, in order; the ``event:`` line must
    name the data's ``type``."""
    out: list[tuple[str, dict[str, Any]]] = []
    name = None
    async with c.stream("POST", path, json=payload) as resp:
        assert resp.status_code == 200, await resp.aread()
        assert resp.headers["content-type"].startswith("text/event-stream")
        async for line in resp.aiter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                assert line != "data: [DONE]"
                data = json.loads(line[len("data: ") :])
                assert name == data["type"]
                out.append((name, data))
                name = None
    return out


LIFECYCLE_TEXT = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
]
CLOSE_TEXT = [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


@pytest.mark.parametrize("profile", ["fixed", "tiny"])
async def test_stream_events_in_order_with_usage_at_the_cap(profile: str) -> None:
    overrides = FAST if profile == "fixed" else {}
    async with SimServer(profile, **overrides) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        events = await stream_events(c, body())
    names = [n for n, _ in events]
    assert names == LIFECYCLE_TEXT + ["response.output_text.delta"] * 9 + CLOSE_TEXT
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    deltas = [d["delta"] for n, d in events if n == "response.output_text.delta"]
    text = "".join(deltas)
    assert count_tokens(text) == 9
    item_id = events[2][1]["item"]["id"]
    assert all(d["item_id"] == item_id for n, d in events if n.endswith(".delta"))
    assert events[-4][1]["text"] == text
    final = events[-1][1]["response"]
    # vLLM ends at max_output_tokens with response.completed, status incomplete
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["output"][0]["content"][0]["text"] == text
    usage = final["usage"]
    assert usage["output_tokens"] == 9
    assert usage["input_tokens"] == count_tokens(PROMPT)
    assert usage["total_tokens"] == usage["input_tokens"] + 9
    assert usage["input_tokens_details"] == {"cached_tokens": 0}
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}
    assert events[0][1]["response"]["status"] == "in_progress"


async def test_without_a_cap_it_completes_with_default_max_tokens() -> None:
    async with (
        SimServer("fixed", default_max_tokens=5, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await stream_events(c, body(max_output_tokens=None, input="Hi there."))
    final = events[-1][1]["response"]
    assert final["status"] == "completed"
    assert final["incomplete_details"] is None
    assert final["usage"]["output_tokens"] == 5
    assert final["usage"]["input_tokens"] == count_tokens("Hi there.") == 3


async def test_openai_style_incomplete_event() -> None:
    async with (
        SimServer("fixed", responses_incomplete_event=True, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await stream_events(c, body(max_output_tokens=3))
    assert events[-1][0] == "response.incomplete"
    assert events[-1][1]["response"]["usage"]["output_tokens"] == 3


async def test_reasoning_deltas_come_first_and_are_counted() -> None:
    async with (
        SimServer("fixed", reasoning_tokens=4, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await stream_events(c, body(max_output_tokens=10))
    names = [n for n, _ in events]
    assert names == (
        LIFECYCLE_TEXT
        + ["response.reasoning_text.delta"] * 4
        + [
            "response.reasoning_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
        ]
        + ["response.output_text.delta"] * 6
        + CLOSE_TEXT
    )
    final = events[-1][1]["response"]
    assert [item["type"] for item in final["output"]] == ["reasoning", "message"]
    assert final["usage"]["output_tokens"] == 10
    assert final["usage"]["output_tokens_details"] == {"reasoning_tokens": 4}
    reasoning = "".join(d["delta"] for n, d in events if n == "response.reasoning_text.delta")
    assert final["output"][0]["content"][0]["text"] == reasoning


@pytest.mark.parametrize("profile", ["fixed", "tiny"])
async def test_empty_deltas_are_dropped_as_vllm_does(profile: str) -> None:
    """vLLM's Responses adapter sends no event for a token that ends inside a character:
    fewer deltas than output tokens, the text intact, usage still the tokens."""
    overrides = FAST if profile == "fixed" else {}
    async with (
        SimServer(profile, empty_delta_rate=0.4, seed=3, **overrides) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await stream_events(c, body(max_output_tokens=40))
    deltas = [d["delta"] for n, d in events if n == "response.output_text.delta"]
    assert 0 < len(deltas) < 40
    assert all(deltas)
    final = events[-1][1]["response"]
    assert final["usage"]["output_tokens"] == 40
    assert final["output"][0]["content"][0]["text"] == "".join(deltas)
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))


async def test_instructions_and_history_count_as_prompt_tokens() -> None:
    payload = body(
        instructions="Be brief.",
        input=[
            {"role": "user", "content": "First question?"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "An answer."}]},
            {"type": "message", "role": "user", "content": "Second one."},
        ],
        stream=False,
    )
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        resp = await c.post("/v1/responses", json=payload)
    assert resp.status_code == 200
    answer = resp.json()
    expected = sum(map(count_tokens, ["Be brief.", "First question?", "An answer.", "Second one."]))
    assert answer["usage"]["input_tokens"] == expected
    assert answer["object"] == "response"
    assert answer["status"] == "incomplete"
    text = answer["output"][0]["content"][0]["text"]
    assert count_tokens(text) == answer["usage"]["output_tokens"] == 9


async def test_errors_in_openai_shape() -> None:
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        unknown = await c.post("/v1/responses", json=body(model="nope"))
        no_input = await c.post("/v1/responses", json=body(input=[]))
        bad_cap = await c.post("/v1/responses", json=body(max_output_tokens=0))
        too_long = await c.post("/v1/responses", json=body(max_output_tokens=10**6))
    assert unknown.status_code == 404
    assert unknown.json()["error"]["param"] == "model"
    assert no_input.status_code == 400
    assert no_input.json()["error"]["param"] == "input"
    assert bad_cap.status_code == 400
    assert bad_cap.json()["error"]["param"] == "max_output_tokens"
    assert too_long.status_code == 400
    err = too_long.json()["error"]
    assert err["param"] == "max_output_tokens"
    assert "in the input" in err["message"]


async def test_strict_profile_refuses_an_unknown_field_as_openai_responses() -> None:
    async with (
        SimServer("fixed", strict_fields=True, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        refused = await c.post("/v1/responses", json=body())
        payload = body(stream=False)
        del payload["ignore_eos"]
        ok = await c.post("/v1/responses", json=payload)
    assert refused.status_code == 400
    assert refused.json() == {
        "error": {
            "message": "Unknown parameter: 'ignore_eos'.",
            "type": "invalid_request_error",
            "param": "ignore_eos",
            "code": "unknown_parameter",
        }
    }
    assert ok.status_code == 200


async def test_injected_errors_as_status_or_as_failed_event() -> None:
    async with (
        SimServer("fixed", error_rate=1.0, error_codes=[503], **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        resp = await c.post("/v1/responses", json=body())
    assert resp.status_code == 503
    assert resp.headers["Retry-After"] == "1"
    assert resp.json()["error"]["message"] == "Service unavailable (simulated)."
    async with (
        SimServer("fixed", error_rate=1.0, error_codes=[500], stream_error_events=True) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        events = await stream_events(c, body())
    assert [n for n, _ in events] == ["response.created", "response.in_progress", "response.failed"]
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"]["message"] == "Internal server error (simulated)."


async def test_cut_stream_ends_without_a_terminal_event() -> None:
    async with (
        SimServer("fixed", cut_rate=1.0, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        names: list[str] = []
        with pytest.raises(httpx.RemoteProtocolError):
            async with c.stream("POST", "/v1/responses", json=body(max_output_tokens=20)) as r:
                async for line in r.aiter_lines():
                    if line.startswith("event: "):
                        names.append(line[7:])
    assert "response.output_text.delta" in names
    assert "response.completed" not in names
