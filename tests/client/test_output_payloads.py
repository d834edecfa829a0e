"""What a sample's model and output contract add to each API's request body.

A sample without either sends the body it always sent; with a contract, chat
asks for ``response_format`` json_schema, ``tools`` and ``tool_choice``, the
Responses API for ``text.format`` and flat tools, the Messages API for its own
tool shapes; greedy decoding is ``temperature`` 0, ``top_p`` 1 and (where the API
has one) the workload's ``seed``. A checked output goes without ``ignore_eos``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest
from api_server import ApiServer, Reply, event, serve

from pytest_llmperf.apis.registry import build_payload
from pytest_llmperf.client import Endpoint, RequestRecord, send_request
from pytest_llmperf.client.request import request_model
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.workloads import Sample
from pytest_llmperf.workloads.output_contract import SAMPLE_TOOLS, OutputContract

SAMPLE = Sample(index=3, prompt="Plan my week.", input_tokens=4, max_tokens=32)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
STRUCTURED = OutputContract(schema=SCHEMA, schema_name="trip")
TOOLS = OutputContract(
    tools=SAMPLE_TOOLS, tool_choice={"type": "function", "function": {"name": "search"}}
)
GREEDY = OutputContract(greedy=True, greedy_seed=1234)


def _with(contract: OutputContract | None = None, model: str | None = None) -> Sample:
    return dataclasses.replace(SAMPLE, contract=contract, model=model)


@pytest.mark.parametrize("api", ["chat", "completions", "responses", "messages"])
def test_a_sample_without_model_or_contract_sends_what_it_always_sent(api: str) -> None:
    plain = build_payload(api, "m", SAMPLE)
    assert plain == build_payload(api, "m", _with())
    for key in ("response_format", "text", "tools", "tool_choice", "top_p", "seed"):
        assert key not in plain
    assert plain["ignore_eos"] is True and plain["model"] == "m"


def test_the_model_is_the_drawn_adapter_or_the_endpoints_model() -> None:
    assert request_model(_with(model="sim-lora-1"), "base") == "sim-lora-1"
    assert request_model(_with(model=""), "base") == "base"  # the base model, by its name
    assert request_model(SAMPLE, "base") == "base"


def test_chat_asks_for_a_strict_json_schema_and_stops_at_the_grammars_end() -> None:
    body = build_payload("chat", "m", _with(STRUCTURED))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "trip", "schema": SCHEMA, "strict": True},
    }
    assert "ignore_eos" not in body  # vLLM's grammar rejects tokens past the JSON's end
    assert body["max_tokens"] == 32 and body["stream"] is True
    json.dumps(body)  # the body goes out as JSON


def test_chat_sends_the_tools_as_given_and_the_normalised_tool_choice() -> None:
    body = build_payload("chat", "m", _with(TOOLS))
    assert body["tools"] == list(SAMPLE_TOOLS)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "search"}}
    assert "ignore_eos" not in body and "response_format" not in body
    auto = build_payload("chat", "m", _with(OutputContract(tools=SAMPLE_TOOLS)))
    assert "tool_choice" not in auto  # not given: the server's default
    required = OutputContract(tools=SAMPLE_TOOLS, tool_choice="required")
    assert build_payload("chat", "m", _with(required))["tool_choice"] == "required"


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_greedy_on_chat_and_completions_is_temperature_0_top_p_1_and_the_seed(api: str) -> None:
    body = build_payload(api, "m", _with(GREEDY))
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.0, 1.0, 1234)
    assert body["ignore_eos"] is True  # greedy alone: fixed lengths compare run to run


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_greedy_on_the_typed_apis_has_no_seed(api: str) -> None:
    body = build_payload(api, "m", _with(GREEDY))
    assert (body["temperature"], body["top_p"]) == (0.0, 1.0)
    assert "seed" not in body


def test_responses_asks_for_text_format_and_flat_function_tools() -> None:
    body = build_payload("responses", "m", _with(STRUCTURED))
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "trip", "schema": SCHEMA, "strict": True}
    }
    assert "ignore_eos" not in body
    body = build_payload("responses", "m", _with(TOOLS))
    first = SAMPLE_TOOLS[0]["function"]
    assert body["tools"][0] == {
        "type": "function",
        "name": first["name"],
        "description": first["description"],
        "parameters": first["parameters"],
    }
    assert body["tool_choice"] == {"type": "function", "name": "search"}
    for mode in ("auto", "required", "none"):
        contract = OutputContract(tools=SAMPLE_TOOLS, tool_choice=mode)
        assert build_payload("responses", "m", _with(contract))["tool_choice"] == mode


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ({"type": "function", "function": {"name": "search"}}, {"type": "tool", "name": "search"}),
        (None, None),
    ],
)
def test_messages_sends_tools_with_input_schema_and_its_own_tool_choice(
    choice: Any, sent: Any
) -> None:
    body = build_payload(
        "messages", "m", _with(OutputContract(tools=SAMPLE_TOOLS, tool_choice=choice))
    )
    first = SAMPLE_TOOLS[0]["function"]
    assert body["tools"][0] == {
        "name": first["name"],
        "description": first["description"],
        "input_schema": first["parameters"],
    }
    assert body.get("tool_choice") == sent
    assert "ignore_eos" not in body


def test_the_users_own_fields_still_win_over_the_contracts() -> None:
    sample = dataclasses.replace(_with(GREEDY), extra_body={"top_p": 0.5})
    assert build_payload("chat", "m", sample)["top_p"] == 0.5


@pytest.mark.asyncio
async def test_the_request_names_the_drawn_model_and_the_record_keeps_it() -> None:
    def reply(_path: str, body: dict[str, Any]) -> Reply:
        chunk = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
        return Reply([(0.0, event(chunk)), (0.0, event("[DONE]"))])

    records = []
    with serve(ApiServer(reply)) as srv:
        endpoint = Endpoint(srv.url + "/v1", model="base", api="chat")
        async with StreamClient(endpoint) as http:
            for model in ("sim-lora-1", "", None):
                record = RequestRecord(index=0, t_sched=time.monotonic_ns())
                records.append(await send_request(http, endpoint, _with(model=model), record))
        sent = [body["model"] for body in srv.bodies]
    assert all(r.ok for r in records), [r.error_detail for r in records]
    assert sent == ["sim-lora-1", "base", "base"]
    assert [r.model for r in records] == ["sim-lora-1", "base", ""]  # "" = no choice made
    assert not any(r.output_checked or r.output_digest for r in records)
