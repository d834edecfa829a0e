"""``structured=, tools=, greedy=`` against the API a test drives: refused where it has none."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.api_fit import (
    GREEDY_APIS,
    PATH_FIELDS,
    STRUCTURED_APIS,
    TOOL_APIS,
    check_api_fit,
)
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.workloads.apis import Api

WHERE = "tests/test_x.py::test_paths"
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def spec(**workload: Any) -> PerfSpec:
    return PerfSpec.from_markers((("synthetic",), {"requests": 10, **workload}), None, [])


@pytest.mark.parametrize(
    ("params", "api", "says"),
    [
        ({"structured": SCHEMA}, Api.COMPLETIONS, r"completions have no response_format.*"
         r"extra_body=\{'structured_outputs': \{'json': SCHEMA\}\}"),
        ({"structured": SCHEMA}, Api.MESSAGES, r"the Messages API has no response_format; "
         r"use tools= with a named tool_choice.*extra_body"),
        ({"structured": SCHEMA}, Api.EMBEDDINGS, r"embeddings generate no output to check"),
        ({"tools": "sample"}, Api.COMPLETIONS, r"a completions prompt takes no tools.*extra_body"),
        ({"tools": "sample"}, Api.EMBEDDINGS, r"embeddings generate no output to check"),
        ({"greedy": True}, Api.EMBEDDINGS, r"embeddings generate nothing to decode"),
    ],
)  # fmt: skip
def test_a_path_an_api_lacks_names_the_test_the_parameter_and_the_api(
    params: dict[str, Any], api: Api, says: str
) -> None:
    (name, value), *_ = params.items()
    with pytest.raises(LlmPerfUsageError) as err:
        check_api_fit(spec(**params), api, where=WHERE)
    text = str(err.value)
    assert text.startswith(f"{WHERE}: llm_workload({name}={value!r}")
    assert f"does not fit --llm-api={api.value}: " in text
    assert re.search(says, text), text


@pytest.mark.parametrize(
    ("params", "apis"),
    [
        ({"structured": SCHEMA}, STRUCTURED_APIS),
        ({"tools": "sample", "tool_choice": "get_weather"}, TOOL_APIS),
        ({"greedy": True}, GREEDY_APIS),
        ({"adapters": {"lora": 0.5}}, set(Api)),  # a served model name fits every API
        ({"greedy": False}, set(Api)),
    ],
)
def test_a_path_fits_the_apis_that_have_it(params: dict[str, Any], apis: set[Api]) -> None:
    for api in apis:
        check_api_fit(spec(**params), api, where=WHERE)


def test_the_sets_are_what_the_apis_offer() -> None:
    assert {Api.CHAT, Api.RESPONSES} == STRUCTURED_APIS
    assert {Api.CHAT, Api.RESPONSES, Api.MESSAGES} == TOOL_APIS
    assert set(Api) - {Api.EMBEDDINGS} == GREEDY_APIS


@pytest.mark.parametrize(
    ("params", "api", "field"),
    [
        ({"structured": SCHEMA}, Api.CHAT, "response_format"),
        ({"structured": SCHEMA}, Api.RESPONSES, "text"),
        ({"tools": "sample"}, Api.MESSAGES, "tool_choice"),
        ({"tools": "sample"}, Api.CHAT, "tools"),
        ({"greedy": True}, Api.COMPLETIONS, "seed"),
        ({"greedy": True}, Api.MESSAGES, "temperature"),
        ({"greedy": True}, Api.CHAT, "top_p"),
    ],
)
def test_extra_body_may_not_set_a_field_a_path_sends(
    params: dict[str, Any], api: Api, field: str
) -> None:
    (name, _), *_ = params.items()
    with pytest.raises(LlmPerfUsageError) as err:
        check_api_fit(spec(**params, extra_body={field: 1, "top_k": 5}), api, where=WHERE)
    text = str(err.value)
    assert text.startswith(f"{WHERE}: llm_workload({name}=")
    assert f"sends {', '.join(PATH_FIELDS[name][api])} on --llm-api={api.value}" in text
    assert text.endswith(f"extra_body sets {field} too: drop one")


def test_extra_body_fields_no_path_sends_are_fine() -> None:
    # greedy on the Responses API sends no seed: the user's own seed is not a clash
    check_api_fit(spec(greedy=True, extra_body={"seed": 3}), Api.RESPONSES, where=WHERE)
    check_api_fit(spec(extra_body={"temperature": 0.5}), Api.CHAT, where=WHERE)
    check_api_fit(spec(tools="sample", extra_body={"top_k": 5}), Api.CHAT, where=WHERE)
