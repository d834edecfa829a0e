"""A test's markers against the API it drives: what cannot be measured there is refused."""

from __future__ import annotations

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.api_fit import TOKEN_STREAM_METRICS, check_api_fit
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.workloads.apis import TOKEN_STREAM_APIS, Api, parse_api

WHERE = "tests/test_x.py::test_embed"


def spec(*slos: str, **workload: object) -> PerfSpec:
    slo_markers: list[tuple[tuple[str, ...], dict[str, object]]] = [(slos, {})] if slos else []
    return PerfSpec.from_markers((("synthetic",), {"requests": 10, **workload}), None, slo_markers)


@pytest.mark.parametrize(
    "slo",
    [
        "ttft.p99 < 500ms",
        "itl.p50 < 5ms",
        "tpot.mean < 20ms",
        "ttfo.max < 1s",
        "output_throughput > 10 tok/s",
        "blank_rate < 5%",  # embeddings generate no text to be blank
    ],
)
def test_a_token_stream_slo_on_embeddings_names_the_test_the_slo_and_the_api(slo: str) -> None:
    with pytest.raises(LlmPerfUsageError) as err:
        check_api_fit(spec(slo), Api.EMBEDDINGS, where=WHERE)
    text = str(err.value)
    assert text.startswith(WHERE + ": ")
    assert repr(slo) in text and "--llm-api=embeddings streams no tokens" in text


@pytest.mark.parametrize("api", sorted(TOKEN_STREAM_APIS))
def test_token_stream_slos_fit_every_streaming_api(api: Api) -> None:
    check_api_fit(spec("ttft.p99 < 500ms", "itl.p99 < 50ms", "blank_rate < 5%"), api, where=WHERE)


def test_embeddings_take_the_metrics_an_answer_has() -> None:
    check_api_fit(
        spec(
            "e2e.p99 < 200ms",
            "request_throughput > 5 req/s",
            "input_throughput > 100 tok/s",
            "error_rate < 1%",
            inputs_per_request=8,
        ),
        Api.EMBEDDINGS,
        where=WHERE,
    )


@pytest.mark.parametrize("api", [Api.COMPLETIONS, Api.EMBEDDINGS])
def test_images_need_an_api_whose_prompt_takes_them(api: Api) -> None:
    with pytest.raises(
        LlmPerfUsageError, match=rf"images=2.*--llm-api={api.value} sends no images"
    ):
        check_api_fit(spec(images=2), api, where=WHERE)


@pytest.mark.parametrize("api", [Api.CHAT, Api.RESPONSES, Api.MESSAGES])
def test_images_fit_chat_like_apis(api: Api) -> None:
    check_api_fit(spec(images=2), api, where=WHERE)


def test_inputs_per_request_is_for_embeddings_only() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"inputs_per_request=8.*this test drives chat"):
        check_api_fit(spec(inputs_per_request=8), Api.CHAT, where=WHERE)


def test_the_metric_set_is_what_a_token_stream_gives() -> None:
    assert {"ttft", "itl", "tpot", "ttfo"} <= TOKEN_STREAM_METRICS
    assert (
        not {"e2e", "error_rate", "request_throughput", "input_throughput"} & TOKEN_STREAM_METRICS
    )


def test_an_unknown_api_is_named() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"--llm-api: must be one of chat, .*got 'rerank'"):
        parse_api("rerank", where="--llm-api")
    assert parse_api("messages", where="x") is Api.MESSAGES
