"""Outputs checked over loopback sockets, in each API's streamed shapes (vLLM's, llama.cpp's).

A server streams structured JSON, chat ``tool_calls`` deltas, Responses
``function_call`` items or Messages ``tool_use`` blocks; the client collects
the answer and the calls and checks them once the stream ended well. An
invalid output is a *completed* request with ``record.invalid`` and the
validator's message; a failed request is not checked at all.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest
from api_server import ApiServer, Reply, event, serve

from pytest_llmperf.apis import Api as ApiKind
from pytest_llmperf.client import Endpoint, RequestRecord, send_request
from pytest_llmperf.client.output_check import InvalidKind
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.workloads import Sample
from pytest_llmperf.workloads.output_contract import SAMPLE_TOOLS, OutputContract

pytestmark = pytest.mark.asyncio

SAMPLE = Sample(index=0, prompt="Plan my week.", input_tokens=4, max_tokens=64)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "days": {"type": "integer", "minimum": 1},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
STRUCTURED = OutputContract(schema=SCHEMA, schema_name="trip")
NAMED = OutputContract(
    tools=SAMPLE_TOOLS, tool_choice={"type": "function", "function": {"name": "search"}}
)
REQUIRED = OutputContract(tools=SAMPLE_TOOLS, tool_choice="required")
AUTO = OutputContract(tools=SAMPLE_TOOLS, tool_choice="auto")
GOOD_ARGS = ['{"query": "har', 'bours", ', '"limit": 5}']
BAD_ARGS = ['{"query": "harbours", ', '"limit": 99}']  # maximum 20


# -- each API's stream, as vLLM sends it ---------------------------------------------------


def _chat(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return event({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _chat_end(finish: str, tokens: int) -> list[bytes]:
    usage = {"prompt_tokens": 4, "completion_tokens": tokens, "total_tokens": tokens + 4}
    return [_chat({}, finish), event({"id": "c", "choices": [], "usage": usage}), event("[DONE]")]


def chat_text(pieces: list[str], finish: str = "stop") -> Reply:
    steps = [_chat({"role": "assistant", "content": ""})]
    steps += [_chat({"content": piece}) for piece in pieces]
    return Reply([(0.0, s) for s in steps + _chat_end(finish, len(pieces))])


def chat_calls(calls: list[tuple[str, list[str]]], call_id: str = "chatcmpl-tool-1") -> Reply:
    """vLLM's tool-call deltas: the first of a call has its id, type and name (and empty
    arguments), the rest its index and a piece of the arguments."""
    steps = [_chat({"role": "assistant", "content": ""})]
    for index, (name, pieces) in enumerate(calls):
        opening = {"index": index, "id": f"{call_id}-{index}", "type": "function"}
        opening["function"] = {"name": name, "arguments": ""}
        steps.append(_chat({"tool_calls": [opening]}))
        for piece in pieces:
            steps.append(
                _chat({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    tokens = sum(len(p) for _, p in calls)
    return Reply([(0.0, s) for s in steps + _chat_end("tool_calls", tokens)])


def _responses_completed(tokens: int) -> bytes:
    response: dict[str, Any] = {"id": "resp_1", "object": "response", "status": "completed"}
    response["usage"] = {"input_tokens": 4, "output_tokens": tokens}
    return event({"type": "response.completed", "response": response})


def responses_text(pieces: list[str]) -> Reply:
    steps = [event({"type": "response.created", "response": {"id": "resp_1"}})]
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    steps.append(event({"type": "response.output_item.added", "output_index": 0, "item": message}))
    for piece in pieces:
        delta = {"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": piece}
        steps.append(event({"type": "response.output_text.delta", **delta}))
    steps.append(_responses_completed(len(pieces)))
    return Reply([(0.0, s) for s in steps])


def responses_call(name: str, pieces: list[str]) -> Reply:
    """vLLM's function call: an output item added with its name, argument deltas by
    ``item_id`` and ``output_index``, the whole arguments at ``…arguments.done``."""
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name}
    item |= {"arguments": "", "status": "in_progress"}
    steps = [event({"type": "response.created", "response": {"id": "resp_1"}})]
    steps.append(event({"type": "response.output_item.added", "output_index": 0, "item": item}))
    for piece in pieces:
        delta = {"item_id": "fc_1", "output_index": 0, "delta": piece}
        steps.append(event({"type": "response.function_call_arguments.delta", **delta}))
    whole = "".join(pieces)
    done = {"item_id": "fc_1", "output_index": 0, "arguments": whole}
    steps.append(event({"type": "response.function_call_arguments.done", **done}))
    item |= {"arguments": whole, "status": "completed"}
    steps.append(event({"type": "response.output_item.done", "output_index": 0, "item": item}))
    steps.append(_responses_completed(len(pieces)))
    return Reply([(0.0, s) for s in steps])


def messages_call(name: str, pieces: list[str], text: str = "") -> Reply:
    """vLLM's Messages stream of a tool call: a text block (when any), then a
    ``tool_use`` block opened with its name and ``input: {}``, its arguments as
    ``input_json_delta`` pieces."""
    start: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    start["usage"] = {"input_tokens": 4, "output_tokens": 0}
    steps = [event({"type": "message_start", "message": start})]
    index = 0
    if text:
        block: dict[str, Any] = {"type": "text", "text": ""}
        steps.append(event({"type": "content_block_start", "index": 0, "content_block": block}))
        delta = {"type": "text_delta", "text": text}
        steps.append(event({"type": "content_block_delta", "index": 0, "delta": delta}))
        steps.append(event({"type": "content_block_stop", "index": 0}))
        index = 1
    if name:
        block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}
        steps.append(event({"type": "content_block_start", "index": index, "content_block": block}))
        for piece in pieces:
            delta = {"type": "input_json_delta", "partial_json": piece}
            steps.append(event({"type": "content_block_delta", "index": index, "delta": delta}))
        steps.append(event({"type": "content_block_stop", "index": index}))
    stop = "tool_use" if name else "end_turn"
    usage = {"input_tokens": 4, "output_tokens": len(pieces) + bool(text)}
    steps.append(event({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": usage}))
    steps.append(event({"type": "message_stop"}))
    return Reply([(0.0, s) for s in steps])


async def send(reply: Reply, api: ApiKind, contract: OutputContract | None) -> RequestRecord:
    sample = dataclasses.replace(SAMPLE, contract=contract)
    with serve(ApiServer(lambda _p, _b: reply)) as srv:
        endpoint = Endpoint(srv.url + "/v1", model="m", api=api)
        record = RequestRecord(index=0, t_sched=time.monotonic_ns())
        async with StreamClient(endpoint) as http:
            return await send_request(http, endpoint, sample, record)


def _verdict(record: RequestRecord) -> tuple[bool, bool, str]:
    assert record.error is None, record.error_detail  # invalid or not, it completed
    return record.ok, record.output_checked, str(record.invalid)


# -- structured outputs -----------------------------------------------------------------


async def test_a_streamed_json_answer_valid_against_the_schema_is_valid() -> None:
    record = await send(chat_text(['{"city": "Lis', 'bon", ', '"days": 3}']), "chat", STRUCTURED)
    assert _verdict(record) == (True, True, "")
    assert record.invalid_detail == "" and record.token_events == 3


async def test_json_that_breaks_the_schema_is_invalid_with_the_validators_path_and_message() -> (
    None
):
    record = await send(chat_text(['{"city": "Lisbon", "days": 0}']), "chat", STRUCTURED)
    assert _verdict(record) == (True, True, InvalidKind.SCHEMA)
    assert record.invalid_detail == "at $.days: 0 is less than the minimum of 1"


async def test_a_json_answer_cut_at_the_cap_is_not_json_and_still_completed() -> None:
    record = await send(chat_text(['{"city": "Lis', "bon"], finish="length"), "chat", STRUCTURED)
    assert _verdict(record) == (True, True, InvalidKind.NOT_JSON)
    assert record.invalid_detail.startswith("the answer is not JSON: Unterminated string")
    assert record.finish_reason == "length"


async def test_a_free_text_answer_to_a_schema_is_not_json() -> None:
    record = await send(chat_text(["Sure! ", "Lisbon."]), "chat", STRUCTURED)
    assert _verdict(record) == (True, True, InvalidKind.NOT_JSON)
    assert "'Sure! Lisbon.'" in record.invalid_detail


async def test_the_responses_api_checks_its_output_text() -> None:
    good = await send(responses_text(['{"city": "Porto",', ' "days": 2}']), "responses", STRUCTURED)
    assert _verdict(good) == (True, True, "")
    long_city = await send(
        responses_text(['{"city": "Vila Nova de Gaia", "days": 2}']), "responses", STRUCTURED
    )
    assert _verdict(long_city) == (True, True, InvalidKind.SCHEMA)
    assert long_city.invalid_detail == "at $.city: 'Vila Nova de Gaia' is too long"


# -- tool calls -------------------------------------------------------------------------


async def test_chat_tool_call_deltas_are_joined_per_index_and_validated() -> None:
    record = await send(chat_calls([("search", GOOD_ARGS)]), "chat", NAMED)
    assert _verdict(record) == (True, True, "")
    assert record.finish_reason == "tool_calls" and record.has_output


async def test_tool_arguments_that_break_the_functions_parameters_are_invalid() -> None:
    record = await send(chat_calls([("search", BAD_ARGS)]), "chat", NAMED)
    assert _verdict(record) == (True, True, InvalidKind.TOOL_ARGUMENTS)
    assert (
        record.invalid_detail == "search arguments at $.limit: 99 is greater than the maximum of 20"
    )


async def test_arguments_that_are_not_json_are_invalid() -> None:
    record = await send(chat_calls([("search", ['{"query": "harb'])]), "chat", REQUIRED)
    assert _verdict(record) == (True, True, InvalidKind.TOOL_ARGUMENTS)
    assert record.invalid_detail.startswith("search arguments are not JSON: Unterminated string")


async def test_every_call_of_a_parallel_reply_is_checked() -> None:
    weather = ['{"city": "Lisbon", "unit": "kelvin"}']  # not in the enum
    record = await send(chat_calls([("search", GOOD_ARGS), ("get_weather", weather)]), "chat", AUTO)
    assert _verdict(record) == (True, True, InvalidKind.TOOL_ARGUMENTS)
    assert record.invalid_detail.startswith(
        "get_weather arguments at $.unit: 'kelvin' is not one of"
    )


async def test_a_call_of_a_function_not_offered_is_unknown_tool() -> None:
    record = await send(chat_calls([("delete_everything", ["{}"])]), "chat", REQUIRED)
    assert _verdict(record) == (True, True, InvalidKind.UNKNOWN_TOOL)
    assert record.invalid_detail == (
        "the output called delete_everything, not a tool given (get_weather, search, create_event)"
    )


async def test_a_call_of_another_tool_than_the_named_one_is_no_tool_call_of_it() -> None:
    args = ['{"city": "Lisbon", "unit": "celsius"}']
    record = await send(chat_calls([("get_weather", args)]), "chat", NAMED)
    assert _verdict(record) == (True, True, InvalidKind.NO_TOOL_CALL)
    assert record.invalid_detail == "tool_choice names search; the output called get_weather"


@pytest.mark.parametrize(
    ("contract", "kind"),
    [(REQUIRED, InvalidKind.NO_TOOL_CALL), (NAMED, InvalidKind.NO_TOOL_CALL), (AUTO, "")],
)
async def test_a_text_answer_is_valid_only_where_the_model_may_choose(
    contract: OutputContract, kind: str
) -> None:
    record = await send(chat_text(["It is ", "sunny."]), "chat", contract)
    assert _verdict(record) == (True, True, kind)
    if kind:
        assert record.invalid_detail.endswith("called no tool (answered in text: 'It is sunny.')")


@pytest.mark.parametrize(
    ("contract", "kind"),
    [
        (STRUCTURED, InvalidKind.NOT_JSON),
        (REQUIRED, InvalidKind.NO_TOOL_CALL),
        (NAMED, InvalidKind.NO_TOOL_CALL),
        (AUTO, ""),
    ],
)
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_blank_reply_is_checked_as_the_empty_output_it_is(
    contract: OutputContract, kind: str, api: ApiKind
) -> None:
    """Generated but blank (empty deltas, a usage counting them; or only the usage): a
    completed request, counted blank, whose output is empty: not JSON for a schema, no
    call where one is required; allowed where the model may answer without a call."""
    if api == "chat":
        reply = chat_text(["", "", ""])
    else:  # vLLM's adapter drops the empty deltas: the usage alone says 3
        reply = responses_text([])
        reply.steps = [*reply.steps[:-1], (0.0, _responses_completed(3))]
    record = await send(reply, api, contract)
    assert _verdict(record) == (True, True, kind)
    assert record.blank and record.token_events == (3 if api == "chat" else 0)
    if kind == InvalidKind.NOT_JSON:
        assert record.invalid_detail == "the answer is empty (no JSON)"


async def test_a_responses_function_call_is_collected_from_its_item_and_deltas() -> None:
    record = await send(responses_call("search", GOOD_ARGS), "responses", NAMED)
    assert _verdict(record) == (True, True, "")
    bad = await send(responses_call("search", BAD_ARGS), "responses", NAMED)
    assert _verdict(bad) == (True, True, InvalidKind.TOOL_ARGUMENTS)
    assert "$.limit" in bad.invalid_detail


async def test_a_messages_tool_use_block_is_collected_from_its_start_and_input_json() -> None:
    record = await send(messages_call("search", GOOD_ARGS, text="Let me look."), "messages", AUTO)
    assert _verdict(record) == (True, True, "")
    bad = await send(messages_call("search", BAD_ARGS), "messages", REQUIRED)
    assert _verdict(bad) == (True, True, InvalidKind.TOOL_ARGUMENTS)
    none = await send(messages_call("", [], text="No tools today."), "messages", REQUIRED)
    assert _verdict(none) == (True, True, InvalidKind.NO_TOOL_CALL)


async def test_a_tool_use_block_without_input_pieces_is_its_opening_input() -> None:
    # vLLM's Messages stream drops argument deltas that come without the call's id: the
    # block's opening input ({}) is then all the client got, and it is checked as such
    record = await send(messages_call("search", [], text="Searching."), "messages", REQUIRED)
    assert _verdict(record) == (True, True, InvalidKind.TOOL_ARGUMENTS)
    assert record.invalid_detail == "search arguments at $: 'query' is a required property"


# -- whole (non-streamed) answers -----------------------------------------------------------


def _whole(obj: dict[str, Any]) -> Reply:
    return Reply([(0.0, json.dumps(obj).encode())], content_type="application/json", whole=True)


async def test_a_whole_chat_answer_with_tool_calls_is_checked() -> None:
    call: dict[str, Any] = {"id": "call_9", "type": "function"}
    call["function"] = {"name": "search", "arguments": '{"query": "x", "limit": 0}'}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    answer = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    record = await send(_whole(answer), "chat", NAMED)
    assert _verdict(record) == (True, True, InvalidKind.TOOL_ARGUMENTS)
    assert record.invalid_detail == "search arguments at $.limit: 0 is less than the minimum of 1"


async def test_a_whole_responses_object_and_a_whole_message_are_checked() -> None:
    item = {"type": "function_call", "id": "fc_1", "name": "search"}
    item["arguments"] = '{"query": "x", "limit": 3}'
    response = {"id": "r", "object": "response", "status": "completed", "output": [item]}
    assert _verdict(await send(_whole(response), "responses", NAMED)) == (True, True, "")
    block = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "x"}}
    message = {"id": "m", "type": "message", "role": "assistant", "content": [block]}
    message["stop_reason"] = "tool_use"
    record = await send(_whole(message), "messages", NAMED)
    assert _verdict(record) == (True, True, InvalidKind.TOOL_ARGUMENTS)
    assert record.invalid_detail == "search arguments at $: 'limit' is a required property"


async def test_a_whole_json_answer_is_checked_against_the_schema() -> None:
    message = {"role": "assistant", "content": '{"city": "Faro", "days": 1}'}
    answer = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    assert _verdict(await send(_whole(answer), "chat", STRUCTURED)) == (True, True, "")


# -- what is not checked ---------------------------------------------------------------


async def test_a_failed_request_is_not_checked() -> None:
    reply = chat_text(['{"city": "Lis'])
    reply.steps = list(reply.steps)[:2]
    reply.cut = True
    record = await send(reply, "chat", STRUCTURED)
    assert record.error is not None
    assert not record.output_checked and record.invalid == ""


async def test_a_request_without_a_contract_checks_and_keeps_nothing() -> None:
    record = await send(chat_text(["not", " json"]), "chat", None)
    assert record.ok and not record.output_checked
    assert (record.invalid, record.output_digest, record.output_marks, record.model) == (
        "",
        "",
        "",
        "",
    )
