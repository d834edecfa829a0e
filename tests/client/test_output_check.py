"""The output check and the collector, without sockets: the rules' edges, the validator
cache, the message's bound, and the odd stream shapes some servers send."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from typing import Any

import pytest

from pytest_llmperf.client import RequestRecord, output_check
from pytest_llmperf.client.output_check import (
    DETAIL_LIMIT,
    InvalidKind,
    check_output,
    output_digest,
    settle_output,
)
from pytest_llmperf.client.outputs import CollectedOutput, ToolCall
from pytest_llmperf.workloads.output_contract import SAMPLE_TOOLS, OutputContract

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": [f"choice-{i}" for i in range(200)]}},
    "required": ["answer"],
}


def _output(*events: dict[str, Any] | str, api: str = "chat") -> CollectedOutput:
    out = CollectedOutput(api)
    for obj in events:
        out.feed(obj if isinstance(obj, str) else json.dumps(obj), True)
    return out


def test_the_validators_are_built_once_per_contract_and_go_with_it() -> None:
    contract = OutputContract(schema=SCHEMA, tools=SAMPLE_TOOLS)
    built = output_check._validators(contract)
    assert output_check._validators(contract) is built
    assert set(built.tools) == {"get_weather", "search", "create_event"}
    key = id(contract)
    del contract, built
    gc.collect()
    assert key not in output_check._CACHE


def test_the_validators_message_is_kept_within_its_bound() -> None:
    contract = OutputContract(schema=SCHEMA)
    out = _output({"choices": [{"index": 0, "delta": {"content": '{"answer": "nope"}'}}]})
    fault = check_output(contract, out)
    assert fault is not None and fault.kind is InvalidKind.SCHEMA
    assert fault.detail.startswith("at $.answer: 'nope' is not one of ['choice-0', ")
    record = RequestRecord(index=0, t_sched=0)
    settle_output(record, contract, out)
    assert record.invalid == "schema" and len(record.invalid_detail) <= DETAIL_LIMIT


def test_a_validator_that_fails_is_an_invalid_output_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_args: Any) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(output_check._Validators, "first_error", broken)
    record = RequestRecord(index=0, t_sched=0)
    out = _output({"choices": [{"index": 0, "delta": {"content": "{}"}}]})
    settle_output(record, OutputContract(schema=SCHEMA), out)
    assert record.output_checked and record.invalid == InvalidKind.SCHEMA
    assert (
        record.invalid_detail
        == "validator failed: RecursionError: maximum recursion depth exceeded"
    )


def test_a_call_when_tool_choice_is_none_is_unknown_tool() -> None:
    contract = OutputContract(tools=SAMPLE_TOOLS, tool_choice="none")
    call = {"index": 0, "id": "c1", "function": {"name": "search", "arguments": "{}"}}
    fault = check_output(
        contract, _output({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    )
    assert fault is not None and fault.kind is InvalidKind.UNKNOWN_TOOL
    assert fault.detail == "tool_choice is none; the output called search"


def test_with_a_schema_and_tools_a_text_answer_is_checked_against_the_schema() -> None:
    contract = OutputContract(schema=SCHEMA, tools=SAMPLE_TOOLS, tool_choice="auto")
    text = _output({"choices": [{"index": 0, "delta": {"content": '{"answer": "x"}'}}]})
    fault = check_output(contract, text)
    assert fault is not None and fault.kind is InvalidKind.SCHEMA
    empty = _output({"choices": [{"index": 0, "delta": {"content": ""}}]})
    fault = check_output(contract, empty)
    assert fault is not None and fault.kind is InvalidKind.NOT_JSON


def test_chat_calls_without_an_index_are_keyed_by_id_and_continued() -> None:
    first = {"id": "call_1", "function": {"name": "search", "arguments": '{"query": '}}
    more = {"function": {"arguments": '"x", "limit": 2}'}}
    out = _output(
        {"choices": [{"index": 0, "delta": {"tool_calls": [first]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [more]}}]},
    )
    assert out.tool_calls == (ToolCall("search", '{"query": "x", "limit": 2}'),)


def test_arguments_sent_as_a_parsed_object_are_taken_whole() -> None:
    call = {"index": 0, "function": {"name": "search", "arguments": {"query": "x", "limit": 2}}}
    out = _output({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    assert out.tool_calls == (ToolCall("search", '{"query": "x", "limit": 2}'),)


def test_responses_deltas_with_only_an_item_id_join_the_call_it_opened() -> None:
    item = {"type": "function_call", "id": "fc_1", "name": "search", "arguments": ""}
    out = _output(
        {"type": "response.output_item.added", "output_index": 1, "item": item},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"a"'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": ": 1}"},
        api="responses",
    )
    assert out.tool_calls == (ToolCall("search", '{"a": 1}'),)


def test_the_servers_done_arguments_are_its_last_word() -> None:
    item = {"type": "function_call", "id": "fc_1", "name": "search", "arguments": ""}
    out = _output(
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"a"'},
        {
            "type": "response.function_call_arguments.done",
            "output_index": 0,
            "arguments": '{"a": 2}',
        },
        "[DONE]",
        api="responses",
    )
    assert out.tool_calls == (ToolCall("search", '{"a": 2}'),)


def test_the_digest_is_of_the_answer_and_the_calls() -> None:
    text = _output({"choices": [{"index": 0, "delta": {"content": "a"}}]})
    other = _output({"choices": [{"index": 0, "delta": {"content": "b"}}]})
    assert output_digest(text) != output_digest(other)
    assert output_digest(text) == output_digest(
        _output({"choices": [{"index": 0, "message": {"content": "a"}}]})
    )


def test_importing_the_client_does_not_import_jsonschema() -> None:
    # ~60 ms at start-up that a run without checked outputs never pays
    code = "import sys, pytest_llmperf.client.request; print('jsonschema' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
