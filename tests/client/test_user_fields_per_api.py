"""A test's own request fields are probed where that test sends them: on its API only.

A chat test's ``extra_body`` field that a strict server's embeddings API refuses must
not stop a session at the embeddings preflight (nor pass unprobed on chat)."""

from __future__ import annotations

import asyncio

import pytest

from pytest_llmperf.client import Endpoint
from pytest_llmperf.client.endpoint import Timeouts
from pytest_llmperf.client.negotiation import UserFields
from pytest_llmperf.client.preflight import preflight
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.sim import start_sim_process

WHERE = "test_x.py::test_chat llm_workload(extra_body=...)"
ODD = {"not_an_openai_field": 1}


@pytest.fixture(scope="module")
def strict_url():
    sim = start_sim_process("strict-reasoning")  # refuses fields outside each API's own
    try:
        yield sim.url
    finally:
        sim.stop()


def prepared(url: str, api: str, user: list[UserFields]) -> Endpoint:
    endpoint = Endpoint(url + "/v1", api=api, timeouts=Timeouts.from_seconds(10))  # type: ignore[arg-type]
    return asyncio.run(preflight(endpoint, user))


def test_a_chat_tests_field_is_not_probed_on_the_embeddings_api(strict_url: str) -> None:
    got = prepared(strict_url, "embeddings", [UserFields(WHERE, ODD, api="chat")])
    assert got.api == "embeddings" and got.model


def test_the_same_field_is_still_refused_on_the_api_that_sends_it(strict_url: str) -> None:
    with pytest.raises(LlmPerfUsageError, match=r"not_an_openai_field") as caught:
        prepared(strict_url, "chat", [UserFields(WHERE, ODD, api="chat")])
    assert caught.value.where == WHERE


def test_fields_of_no_api_in_particular_are_probed_everywhere(strict_url: str) -> None:
    with pytest.raises(LlmPerfUsageError, match=r"not_an_openai_field"):
        prepared(strict_url, "embeddings", [UserFields(WHERE, ODD)])
