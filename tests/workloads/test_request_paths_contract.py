"""``structured=, tools=, tool_choice=, greedy=`` parsed into an :class:`OutputContract`."""

from __future__ import annotations

import json
import pickle
import weakref
from pathlib import Path
from typing import Any

import pytest
from jsonschema.validators import validator_for

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.output_contract import (
    SAMPLE_TOOLS,
    OutputContract,
    ToolChoiceMode,
    parse_output_contract,
)

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def parse(**params: Any) -> OutputContract | None:
    return parse_output_contract(workload="synthetic", seed=7, **params)


def contract(**params: Any) -> OutputContract:
    out = parse(**params)
    assert out is not None
    return out


def test_nothing_asked_is_no_contract() -> None:
    assert parse() is None
    assert parse(greedy=False) is None


def test_a_schema_dict_is_kept_and_named_output() -> None:
    c = contract(structured=SCHEMA)
    assert c.schema == SCHEMA and c.schema is not SCHEMA  # a copy: the marker's dict may change
    assert c.schema_name == "output"
    assert c.checks_output and c.keeps_output and not c.greedy
    assert c.tools == () and c.tool_choice is None
    assert c.describe() == {"structured": "output"}


def test_a_schema_file_is_read_and_named_by_its_stem(tmp_path: Path) -> None:
    path = tmp_path / "person card.v2.json"
    path.write_text(json.dumps(SCHEMA), encoding="utf-8")
    for given in (path, str(path)):
        c = contract(structured=given)
        assert c.schema == SCHEMA
        assert c.schema_name == "person_card_v2"  # letters, digits, _ and - only


def test_a_long_stem_is_cut_to_64_characters(tmp_path: Path) -> None:
    path = tmp_path / ("s" * 80 + ".json")
    path.write_text(json.dumps(SCHEMA), encoding="utf-8")
    assert contract(structured=path).schema_name == "s" * 64


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (42, r"structured must be a JSON Schema \(a dict\) or the path of a \.json file.*42"),
        ([SCHEMA], r"structured must be a JSON Schema"),
        (
            {"type": "objekt"},
            r"structured=.* is not a valid JSON Schema: 'objekt' is not valid .*\(at type\)",
        ),
        (
            {"type": "object", "properties": {"a": {"maxLength": -1}}},
            r"structured=.* is not a valid JSON Schema: -1 is less than the minimum of 0 "
            r"\(at properties/a/maxLength\)",
        ),
        ("no/such/schema.json", r"structured='no/such/schema.json': cannot read it"),
        ("schema.yaml", r"structured='schema.yaml' is not a \.json file"),
    ],
)
def test_bad_schemas_are_usage_errors_naming_the_workload(value: Any, named: str) -> None:
    with pytest.raises(LlmPerfUsageError, match=r"^workload 'synthetic': " + named):
        parse(structured=value)


def test_a_schema_file_that_is_not_a_schema_object_is_refused(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json", encoding="utf-8")
    with pytest.raises(LlmPerfUsageError, match=r"bad\.json' is not JSON"):
        parse(structured=bad_json)
    a_list = tmp_path / "list.json"
    a_list.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(LlmPerfUsageError, match=r"list\.json' holds a list, not a JSON Schema"):
        parse(structured=a_list)


def test_the_sample_tools_are_three_checkable_functions() -> None:
    c = contract(tools="sample")
    assert c.tool_names == ("get_weather", "search", "create_event")
    assert list(c.tools) == list(SAMPLE_TOOLS) and c.tools[0] is not SAMPLE_TOOLS[0]
    weather = c.tool_schema("get_weather")
    assert weather is not None
    assert weather["properties"]["unit"]["enum"] == ["celsius", "fahrenheit"]
    search = c.tool_schema("search")
    assert search is not None and search["properties"]["limit"]["type"] == "integer"
    event = c.tool_schema("create_event")
    assert event is not None
    assert event["properties"]["start"] == {"type": "string", "format": "date-time"}
    assert event["properties"]["attendees"]["type"] == "array"
    for tool in SAMPLE_TOOLS:
        params = tool["function"]["parameters"]
        assert sorted(params["required"]) == sorted(params["properties"])
        assert params["additionalProperties"] is False
        validator_for(params).check_schema(params)
    # the schemas check arguments: a good call passes, a wrong type or a missing one fails
    check = validator_for(weather)(weather)
    assert check.is_valid({"city": "Lisbon", "unit": "celsius"})
    assert not check.is_valid({"city": "Lisbon", "unit": "kelvin"})
    assert not check.is_valid({"city": "Lisbon"})
    assert c.tool_schema("nope") is None
    assert c.checks_output and c.describe() == {"tools": ["get_weather", "search", "create_event"]}


def test_given_tools_are_kept_and_a_function_without_parameters_takes_none() -> None:
    bare = {"type": "function", "function": {"name": "ping"}}
    c = contract(tools=[WEATHER, bare])
    assert c.tools[0] == WEATHER
    assert c.tool_schema("get_weather") == WEATHER["function"]["parameters"]
    assert c.tool_schema("ping") == {"type": "object", "properties": {}}
    assert "parameters" not in bare["function"]  # the marker's dict is not changed


@pytest.mark.parametrize(
    ("tools", "named"),
    [
        ("some", r"tools must be \"sample\" or a list of function tools"),
        ([], r"tools must be \"sample\" or a list"),
        (WEATHER, r"tools must be \"sample\" or a list"),
        ([{"type": "code_interpreter"}], r"tools\[0\] is \{'type': 'code_interpreter'\}"),
        ([{"type": "function", "name": "x"}], r"tools\[0\] is"),
        (
            [{"type": "function", "function": {"name": "get weather"}}],
            r"tools\[0\] function name must be 1-64 letters, digits, _ or -, got 'get weather'",
        ),
        ([WEATHER, WEATHER], r"tools\[1\]: two tools are named 'get_weather'"),
        (
            [{"type": "function", "function": {"name": "f", "parameters": "x"}}],
            r"tools\[0\] \(f\) parameters must be a JSON Schema object, got 'x'",
        ),
        (
            [{"type": "function", "function": {"name": "f", "parameters": {"type": 3}}}],
            r"tools\[0\] \(f\) parameters is not a valid JSON Schema: 3 is not valid .*\(at type\)",
        ),
        (
            [{"type": "function", "function": {"name": "f", "description": 5}}],
            r"tools\[0\] \(f\) description must be a string, got 5",
        ),
    ],
)
def test_bad_tools_are_usage_errors(tools: Any, named: str) -> None:
    with pytest.raises(LlmPerfUsageError, match=r"^workload 'synthetic': .*" + named):
        parse(tools=tools)


@pytest.mark.parametrize("mode", ["auto", "required", "none"])
def test_tool_choice_modes_stay_strings(mode: str) -> None:
    c = contract(tools="sample", tool_choice=mode)
    assert c.tool_choice == mode and type(c.tool_choice) is str
    assert c.named_tool is None
    assert c.describe()["tool_choice"] == mode
    assert mode in set(ToolChoiceMode)


@pytest.mark.parametrize(
    "given",
    [
        "search",
        {"type": "function", "function": {"name": "search"}},
        {"type": "function", "name": "search"},  # the Responses API's form
    ],
)
def test_a_named_tool_choice_is_normalised_to_chat_s_form(given: Any) -> None:
    c = contract(tools="sample", tool_choice=given)
    assert c.tool_choice == {"type": "function", "function": {"name": "search"}}
    assert c.named_tool == "search"
    assert c.describe()["tool_choice"] == "search"


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"tool_choice": "auto"}, r"tool_choice='auto' needs tools= \(none given\)"),
        (
            {"tools": "sample", "tool_choice": "lookup"},
            r"tool_choice='lookup' names no tool given; tools: get_weather, search, create_event",
        ),
        (
            {"tools": "sample", "tool_choice": {"type": "function", "function": {"name": "x"}}},
            r"tool_choice=\{'type': 'function', 'function': \{'name': 'x'\}\} names no tool given",
        ),
        ({"tools": "sample", "tool_choice": 3}, r"tool_choice must be \"auto\", \"required\""),
        ({"tools": "sample", "tool_choice": {"type": "any"}}, r"tool_choice must be .*'any'"),
        ({"greedy": 1}, r"greedy must be True or False, got 1"),
        ({"greedy": "yes"}, r"greedy must be True or False, got 'yes'"),
    ],
)
def test_bad_tool_choice_and_greedy_are_usage_errors(params: dict[str, Any], named: str) -> None:
    with pytest.raises(LlmPerfUsageError, match=r"^workload 'synthetic': " + named):
        parse(**params)


def test_greedy_alone_keeps_the_output_without_checking_it() -> None:
    c = contract(greedy=True)
    assert c.greedy and c.greedy_seed == 7
    assert c.keeps_output and not c.checks_output
    assert c.describe() == {"greedy": True}


def test_everything_together_is_described_together() -> None:
    c = contract(structured=SCHEMA, tools=[WEATHER], tool_choice="required", greedy=True)
    assert c.describe() == {
        "structured": "output",
        "tools": ["get_weather"],
        "tool_choice": "required",
        "greedy": True,
    }


def test_contracts_hash_and_compare_by_value_and_survive_pickling() -> None:
    a = contract(structured=SCHEMA, tools="sample", greedy=True)
    b = contract(structured=SCHEMA, tools="sample", greedy=True)
    other = contract(structured=SCHEMA, tools="sample", greedy=False)
    assert a == b and hash(a) == hash(b)
    assert a != other
    assert {a: 1}[b] == 1  # a cache keyed by contract finds an equal one
    assert weakref.ref(a)() is a  # and a weak cache may hold it
    assert pickle.loads(pickle.dumps(a)) == a
