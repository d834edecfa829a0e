"""Structured outputs and tool calls over real sockets: what each API streams, valid JSON
against the request's schema, usage equal to the tokens streamed, finish at the cap."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest

from pytest_llmperf.sim import SimServer

pytestmark = pytest.mark.asyncio

FAST: dict[str, Any] = {"ttft_ms": 1, "itl_ms": 0.2}
SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 20},
        "count": {"type": "integer", "minimum": 1, "maximum": 9},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
    },
    "required": ["title", "count", "tags"],
}
PARAMS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": PARAMS}},
    {"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}},
]
MESSAGES = [{"role": "user", "content": "Plan a trip."}]


def chat(**extra: Any) -> dict[str, Any]:
    return {
        "messages": MESSAGES,
        "max_tokens": 200,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        **extra,
    }


def _ask(k: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Plan trip number {k}."}]


def structured(schema: dict[str, Any] = SCHEMA) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "o", "schema": schema, "strict": True}}


async def chunks(c: httpx.AsyncClient, payload: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    async with c.stream("POST", "/v1/chat/completions", json=payload) as resp:
        assert resp.status_code == 200, await resp.aread()
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                out.append(json.loads(line[6:]))
    return out


async def events(c: httpx.AsyncClient, path: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    async with c.stream("POST", path, json=payload) as resp:
        assert resp.status_code == 200, await resp.aread()
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
    return out


@pytest.mark.parametrize("profile", ["fixed", "tiny"])  # the general path and the fan-out
async def test_chat_json_schema_streams_valid_json(profile: str) -> None:
    kw = FAST if profile == "fixed" else {}
    async with SimServer(profile, **kw) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        got = await chunks(c, chat(response_format=structured(), ignore_eos=True))
    deltas = [ch["choices"][0] for ch in got if ch["choices"]][1:]  # after the role chunk
    text = "".join(d["delta"]["content"] for d in deltas)
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(text))
    assert [d["finish_reason"] for d in deltas][-1] == "stop"
    assert all(d["finish_reason"] is None for d in deltas[:-1])
    assert got[-1]["usage"]["completion_tokens"] == len(deltas)  # one token per chunk


async def test_json_cut_at_the_cap_finishes_length() -> None:
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        got = await chunks(c, chat(response_format=structured(), max_tokens=5))
    deltas = [ch["choices"][0] for ch in got if ch["choices"]][1:]
    assert len(deltas) == 5 and deltas[-1]["finish_reason"] == "length"
    with pytest.raises(ValueError):
        json.loads("".join(d["delta"]["content"] for d in deltas))


async def test_not_streamed_json_and_responses_text_format() -> None:
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        body = (
            await c.post(
                "/v1/chat/completions", json=chat(stream=False, response_format=structured())
            )
        ).json()
        fmt = {"format": {"type": "json_schema", "name": "o", "schema": SCHEMA, "strict": True}}
        resp = await events(c, "/v1/responses", {"input": "Plan.", "text": fmt, "stream": True})
        whole = (await c.post("/v1/responses", json={"input": "Plan.", "text": fmt})).json()
    validate = jsonschema.Draft202012Validator(SCHEMA).validate
    validate(json.loads(body["choices"][0]["message"]["content"]))
    assert body["choices"][0]["finish_reason"] == "stop"
    text = "".join(e["delta"] for e in resp if e["type"] == "response.output_text.delta")
    validate(json.loads(text))
    assert resp[-1]["response"]["status"] == "completed"
    validate(json.loads(whole["output"][0]["content"][0]["text"]))


async def test_chat_tool_call_deltas_as_vllm_sends_them() -> None:
    named = {"type": "function", "function": {"name": "get_weather"}}
    async with SimServer("tiny") as sim, httpx.AsyncClient(base_url=sim.url) as c:
        got = await chunks(c, chat(tools=CHAT_TOOLS, tool_choice=named))
        required = await chunks(c, chat(tools=CHAT_TOOLS, tool_choice="required"))
    deltas = [ch["choices"][0] for ch in got if ch["choices"]][1:]
    first = deltas[0]["delta"]["tool_calls"]
    assert len(first) == 1 and first[0]["index"] == 0 and first[0]["type"] == "function"
    assert first[0]["id"].startswith("chatcmpl-tool-")
    assert first[0]["function"] == {"name": "get_weather", "arguments": ""}
    for d in deltas[1:]:
        assert d["delta"] == {
            "tool_calls": [{"index": 0, "function": d["delta"]["tool_calls"][0]["function"]}]
        }
        assert set(d["delta"]["tool_calls"][0]["function"]) == {"arguments"}
    args = "".join(d["delta"]["tool_calls"][0]["function"]["arguments"] for d in deltas)
    jsonschema.Draft202012Validator(PARAMS).validate(json.loads(args))
    assert deltas[-1]["finish_reason"] == "stop"  # a named tool_choice: "stop", as OpenAI's
    assert got[-1]["usage"]["completion_tokens"] == len(deltas)  # the header is a token
    req = [ch["choices"][0] for ch in required if ch["choices"]][1:]
    assert req[-1]["finish_reason"] == "tool_calls"


async def test_auto_calls_in_about_half_the_answers_none_never() -> None:
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        auto = [
            (
                await c.post(
                    "/v1/chat/completions",
                    json=chat(stream=False, tools=CHAT_TOOLS, messages=_ask(k)),
                )
            ).json()
            for k in range(40)  # greedy: one prompt always gets the same answer
        ]
        none = (
            await c.post(
                "/v1/chat/completions",
                json=chat(stream=False, tools=CHAT_TOOLS, tool_choice="none"),
            )
        ).json()
    calls = [a for a in auto if a["choices"][0]["message"]["tool_calls"]]
    assert 8 <= len(calls) <= 32
    for a in calls:
        assert a["choices"][0]["finish_reason"] == "tool_calls"
        assert a["choices"][0]["message"]["content"] is None
        (call,) = a["choices"][0]["message"]["tool_calls"]
        params = PARAMS if call["function"]["name"] == "get_weather" else {"type": "object"}
        jsonschema.Draft202012Validator(params).validate(json.loads(call["function"]["arguments"]))
    assert none["choices"][0]["message"]["tool_calls"] == []


async def test_responses_function_call_item_and_argument_deltas() -> None:
    tools = [{"type": "function", "name": "get_weather", "parameters": PARAMS}]
    payload = {"input": "Weather?", "tools": tools, "tool_choice": "required", "stream": True}
    async with (
        SimServer("fixed", reasoning_tokens=2, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        got = await events(c, "/v1/responses", payload)
    names = [e["type"] for e in got]
    at = names.index("response.output_item.added", names.index("response.output_item.done"))
    item = got[at]["item"]
    assert item["type"] == "function_call" and item["name"] == "get_weather"
    assert item["arguments"] == "" and item["call_id"].startswith("call_")
    n_args = names.count("response.function_call_arguments.delta")
    assert names[at + 1 : at + 1 + n_args] == ["response.function_call_arguments.delta"] * n_args
    assert names[at + 1 + n_args :] == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    args = "".join(e["delta"] for e in got if e["type"] == "response.function_call_arguments.delta")
    assert all(e["item_id"] == item["id"] for e in got[at + 1 : at + 1 + n_args])
    jsonschema.Draft202012Validator(PARAMS).validate(json.loads(args))
    assert got[at + 1 + n_args]["arguments"] == args
    final = got[-1]["response"]
    assert final["output"][-1]["arguments"] == args
    assert final["usage"]["output_tokens"] == 2 + 1 + n_args  # reasoning, header, pieces
    assert [e["sequence_number"] for e in got] == list(range(len(got)))


async def test_messages_tool_use_block_with_input_json_deltas() -> None:
    tools = [{"name": "get_weather", "input_schema": PARAMS}]
    payload = {
        "messages": MESSAGES,
        "max_tokens": 100,
        "stream": True,
        "tools": tools,
        "tool_choice": {"type": "any"},
    }
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        got = await events(c, "/v1/messages", payload)
        whole = (await c.post("/v1/messages", json={**payload, "stream": False})).json()
    assert got[1]["type"] == "content_block_start"
    block = got[1]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "get_weather" and block["input"] == {}
    assert block["id"].startswith("toolu_")
    parts = [e["delta"] for e in got if e["type"] == "content_block_delta"]
    assert all(p["type"] == "input_json_delta" for p in parts)
    jsonschema.Draft202012Validator(PARAMS).validate(
        json.loads("".join(p["partial_json"] for p in parts))
    )
    assert [e["type"] for e in got[-3:]] == ["content_block_stop", "message_delta", "message_stop"]
    assert got[-2]["delta"]["stop_reason"] == "tool_use"
    assert got[-2]["usage"]["output_tokens"] == 1 + len(parts)
    assert whole["stop_reason"] == "tool_use"
    jsonschema.Draft202012Validator(PARAMS).validate(whole["content"][0]["input"])


@pytest.mark.parametrize(
    ("extra", "status", "words"),
    [
        ({"tool_choice": "required"}, 400, "`tools` must be set"),
        (
            {"tools": CHAT_TOOLS, "tool_choice": {"type": "function", "function": {"name": "x"}}},
            400,
            "'x'",
        ),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "o"}}}, 400, "schema"),
        (
            {"response_format": structured({"type": "integer", "minimum": 3, "maximum": 1})},
            400,
            "no number between 3.0 and 1.0",
        ),
        ({"seed": "one"}, 400, "seed"),
        ({"model": "nope"}, 404, "The model `nope` does not exist."),
    ],
)
async def test_refused_in_openai_shape(extra: dict[str, Any], status: int, words: str) -> None:
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        resp = await c.post("/v1/chat/completions", json=chat(**extra))
    assert resp.status_code == status
    error = resp.json()["error"]
    assert words in error["message"]
    assert set(error) == {"message", "type", "param", "code"}


async def test_json_survives_other_servers_shapes_and_multi_token_chunks() -> None:
    """Reasoning first, empty deltas, a separate finish chunk (strict-reasoning), and
    several tokens per chunk (a fault): the content still assembles to valid JSON and the
    tool call's header stays a delta of its own."""
    validate = jsonschema.Draft202012Validator(SCHEMA).validate
    body = chat(response_format=structured(), max_completion_tokens=200)
    del body["max_tokens"]
    async with (
        SimServer("strict-reasoning", ttft_ms=1, itl_ms=0.2, seed=3) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        for k in range(5):
            body["messages"] = _ask(k)
            got = await chunks(c, body)
            choices = [ch["choices"][0] for ch in got if ch["choices"]][1:]
            validate(json.loads("".join(d["delta"].get("content") or "" for d in choices)))
            assert choices[-1] == {
                "index": 0,
                "delta": {},
                "logprobs": None,
                "finish_reason": "stop",
            }
            assert got[-1]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 16}
    async with (
        SimServer("fixed", multi_token_rate=1.0, multi_token_max=4, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        got = await chunks(c, chat(tools=CHAT_TOOLS, tool_choice="required"))
        text = await chunks(c, chat(response_format=structured()))
    deltas = [ch["choices"][0]["delta"] for ch in got if ch["choices"]][1:]
    assert deltas[0]["tool_calls"][0]["function"]["arguments"] == ""
    args = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas)
    assert len(deltas) < got[-1]["usage"]["completion_tokens"]  # several tokens per chunk
    json.loads(args)
    validate(
        json.loads(
            "".join(ch["choices"][0]["delta"]["content"] for ch in text[1:] if ch["choices"])
        )
    )


async def test_responses_json_with_empty_deltas_dropped() -> None:
    fmt = {"format": {"type": "json_schema", "name": "o", "schema": SCHEMA}}
    async with (
        SimServer("tiny", empty_delta_rate=0.5, seed=2) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        got = await events(c, "/v1/responses", {"input": "x", "text": fmt, "stream": True})
    deltas = [e["delta"] for e in got if e["type"] == "response.output_text.delta"]
    assert all(deltas) and len(deltas) < got[-1]["response"]["usage"]["output_tokens"]
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads("".join(deltas)))


async def test_an_unconstrained_server_writes_the_shape_not_the_bounds() -> None:
    """``constrain_outputs: false`` (a server told not to constrain): the JSON parses and
    has the schema's properties, but a required string's ``maxLength: 0`` is broken."""
    strict = {"type": "object", "properties": {"x": {"type": "string", "maxLength": 0}}}
    strict["required"] = ["x"]
    validator = jsonschema.Draft202012Validator(strict)
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        body = chat(stream=False, response_format=structured(strict))
        honoured = (await c.post("/v1/chat/completions", json=body)).json()
    async with (
        SimServer("fixed", constrain_outputs=False, **FAST) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        loose = (await c.post("/v1/chat/completions", json=body)).json()
    assert json.loads(honoured["choices"][0]["message"]["content"]) == {"x": ""}
    value = json.loads(loose["choices"][0]["message"]["content"])
    assert list(value) == ["x"] and not validator.is_valid(value)
