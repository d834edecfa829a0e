"""Embeddings: the answer check, and whole requests over loopback sockets."""

from __future__ import annotations

import base64
import json
import struct
import time
from typing import Any

import pytest
from api_server import ApiServer, Reply, serve

from pytest_llmperf.apis.embeddings import EmbeddingsAnswer, EmbeddingsFault, check_answer
from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.apis.registry import build_payload
from pytest_llmperf.client import Endpoint, ErrorKind, RequestRecord, Timeouts, send_request
from pytest_llmperf.client.preflight import preflight
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads import Sample

INPUTS = ("first text", "second text", "third text")
SAMPLE = Sample(index=0, prompt="", input_tokens=9, max_tokens=0, inputs=INPUTS)
KEY = "sk-embed-secret-1234"


def answer(
    vectors: list[Any], *, usage: int | None = 9, indexes: list[Any] | None = None
) -> dict[str, Any]:
    indexes = indexes if indexes is not None else list(range(len(vectors)))
    data = [
        {"object": "embedding", "index": i, "embedding": v}
        for i, v in zip(indexes, vectors, strict=True)
    ]
    out: dict[str, Any] = {"object": "list", "data": data, "model": "m"}
    if usage is not None:
        out["usage"] = {"prompt_tokens": usage, "total_tokens": usage}
    return out


def b64(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


# -- the answer check --------------------------------------------------------------------------


def test_a_good_answer_gives_inputs_dimensions_and_usage() -> None:
    raw = json.dumps(answer([[0.1, 0.2, 0.3, 0.4]] * 3))
    assert check_answer(raw, 3) == EmbeddingsAnswer(3, 4, 9)
    assert check_answer(json.dumps(answer([[1, 2]], usage=None)), 1) == EmbeddingsAnswer(1, 2, None)


def test_base64_vectors_and_out_of_order_indexes_are_accepted() -> None:
    raw = json.dumps(answer([b64([0.5, 1.5]), b64([2.0, 3.0])], indexes=[1, 0]))
    assert check_answer(raw, 2) == EmbeddingsAnswer(2, 2, 9)


@pytest.mark.parametrize(
    ("obj", "inputs", "message"),
    [
        (answer([[0.1, 0.2]] * 2), 3, "embeddings answer has 2 vectors for 3 inputs"),
        (answer([[0.1, 0.2], [0.1, 0.2, 0.3]]), 2, "unequal dimensions (2 and 3, vector 1)"),
        (answer([[0.1, "x"]]), 1, "vector 0 holds values that are not numbers"),
        (answer([[0.1, True]]), 1, "vector 0 holds values that are not numbers"),
        (answer([[0.1, None]]), 1, "vector 0 holds values that are not numbers"),
        (answer([[]]), 1, "vector 0 is empty"),
        (answer([{"a": 1}]), 1, "vector 0 is dict, not a list of numbers"),
        (answer([[0.1], [0.2]], indexes=[0, 0]), 2, "repeats index 0"),
        (answer([[0.1], [0.2]], indexes=[0, 5]), 2, "item 1 has index 5 for 2 inputs"),
        (answer(["not base64!"]), 1, "is a string that is not base64"),
        (answer([base64.b64encode(b"abc").decode()]), 1, "not a whole number of float32s"),
        ({"object": "list"}, 1, "embeddings answer has no 'data' list"),
        ([1, 2], 1, "not a JSON object"),
    ],
)
def test_a_malformed_answer_says_what_was_wrong(obj: Any, inputs: int, message: str) -> None:
    fault = check_answer(json.dumps(obj), inputs)
    assert isinstance(fault, EmbeddingsFault) and not fault.server_error
    assert message in fault.message


def test_non_finite_and_non_json_answers_are_faults() -> None:
    fault = check_answer('{"data": [{"index": 0, "embedding": [0.1, NaN]}]}', 1)
    assert isinstance(fault, EmbeddingsFault) and "not finite" in fault.message
    fault = check_answer(b'{"data": [', 1)
    assert isinstance(fault, EmbeddingsFault) and "not JSON" in fault.message


def test_an_error_in_a_2xx_answer_is_the_servers_error() -> None:
    fault = check_answer(
        json.dumps({"error": {"message": "pooling failed", "type": "server_error"}}), 1
    )
    assert isinstance(fault, EmbeddingsFault) and fault.server_error
    assert fault.message == "pooling failed (server_error)"


def test_payload_carries_every_input_and_no_generation_fields() -> None:
    body = build_payload("embeddings", "m", SAMPLE, RequestFields(extra={"dimensions": 64}))
    assert body == {
        "model": "m",
        "input": list(INPUTS),
        "encoding_format": "float",
        "dimensions": 64,
    }
    single = Sample(
        index=0, prompt="only", input_tokens=1, max_tokens=0, extra_body={"ignore_eos": False}
    )
    assert build_payload("embeddings", "m", single, RequestFields()) == {
        "model": "m",
        "input": ["only"],
        "encoding_format": "float",
    }


# -- over loopback sockets -------------------------------------------------------------------


def _json(obj: Any, status: int = 200, **kw: Any) -> Reply:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return Reply([(0.0, data)], status=status, content_type="application/json", whole=True, **kw)


async def _send(
    url: str, *, key: str | None = KEY, timeouts: Timeouts | None = None
) -> RequestRecord:
    endpoint = Endpoint(
        url + "/v1", model="m", api="embeddings", api_key=key, timeouts=timeouts or Timeouts()
    )
    record = RequestRecord(index=0, t_sched=time.monotonic_ns())
    async with StreamClient(endpoint) as http:
        return await send_request(http, endpoint, SAMPLE, record)


@pytest.mark.asyncio
async def test_an_answer_that_checks_out_completes_the_request_at_its_read() -> None:
    with serve(ApiServer(lambda _p, _b: _json(answer([[0.25] * 8] * 3)))) as srv:
        record = await _send(srv.url)
        request, body, stamp = srv.requests[0], srv.bodies[0], srv.stamps[0][0]
    assert record.ok, record.error_detail
    assert request.path == "/v1/embeddings"
    assert request.headers["accept"] == "application/json"
    assert (
        request.headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in request.headers
    )
    assert body["input"] == list(INPUTS) and "stream" not in body and "ignore_eos" not in body
    assert record.embedding_inputs == 3 and record.embedding_dimensions == 8
    assert record.usage_prompt_tokens == 9 and record.has_output
    assert record.t_first == 0 and record.t_out == 0 and record.token_events == 0
    assert record.t_last == record.t_end >= stamp >= record.t_send
    assert record.gaps_ns == []


@pytest.mark.asyncio
async def test_an_answer_sent_as_text_plain_is_still_read_whole() -> None:
    reply = _json(answer([[0.1, 0.2]] * 3))
    reply.content_type = "text/plain"  # a gateway's wrong header changes nothing
    with serve(ApiServer(lambda _p, _b: reply)) as srv:
        record = await _send(srv.url)
    assert record.ok, record.error_detail


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("obj", "kind", "message"),
    [
        (
            answer([[0.1, 0.2]] * 2),
            ErrorKind.PROTOCOL,
            "embeddings answer has 2 vectors for 3 inputs",
        ),
        (answer([[0.1, 0.2], [0.1], [0.3, 0.4]]), ErrorKind.PROTOCOL, "unequal dimensions"),
        (answer([[0.1, "a"], [0.1, 0.2], [0.1, 0.2]]), ErrorKind.PROTOCOL, "not numbers"),
        (b"<html>oops</html>", ErrorKind.PROTOCOL, "not JSON"),
        (
            {"error": {"message": "pool exploded", "type": "server_error"}},
            ErrorKind.STREAM_ERROR,
            "pool exploded",
        ),
    ],
)
async def test_a_malformed_answer_is_a_failed_request_saying_why(
    obj: Any, kind: ErrorKind, message: str
) -> None:
    with serve(ApiServer(lambda _p, _b: _json(obj))) as srv:
        record = await _send(srv.url)
    assert record.error is kind and message in record.error_detail
    assert not record.has_output and record.embedding_inputs == 0 and record.t_end


@pytest.mark.asyncio
async def test_an_http_error_keeps_the_servers_message_never_the_key() -> None:
    error = {
        "error": {
            "message": f"This server does not support embeddings ({KEY})",
            "type": "not_supported_error",
            "code": 501,
        }
    }
    with serve(ApiServer(lambda _p, _b: _json(error, status=501))) as srv:
        record = await _send(srv.url)
    assert record.error is ErrorKind.HTTP and record.status == 501
    assert "does not support embeddings" in record.error_detail and KEY not in record.error_detail


@pytest.mark.asyncio
async def test_a_cut_answer_is_a_failed_request() -> None:
    with serve(ApiServer(lambda _p, _b: _json(answer([[0.1]] * 3), cut=True))) as srv:
        record = await _send(srv.url)
    assert record.error is ErrorKind.TRUNCATED


@pytest.mark.asyncio
async def test_a_server_that_never_answers_is_a_timeout_not_a_hang() -> None:
    reply = Reply([(5.0, b"{}")], content_type="application/json")  # chunked, silent for 5 s
    timeouts = Timeouts(connect=1, first_token=0.3, stall=2, total=2)
    with serve(ApiServer(lambda _p, _b: reply)) as srv:
        record = await _send(srv.url, timeouts=timeouts)
    assert (
        record.error is ErrorKind.FIRST_TOKEN_TIMEOUT
        and "no answer within 0.3 s" in record.error_detail
    )


@pytest.mark.asyncio
async def test_preflight_probes_reads_the_whole_answer_and_no_optional_field() -> None:
    with serve(ApiServer(lambda _p, _b: _json(answer([[0.1, 0.2]])))) as srv:
        endpoint = await preflight(
            Endpoint(srv.url + "/v1", model="m", api="embeddings", api_key=KEY)
        )
        probes = list(srv.bodies)
    assert len(probes) == 1 and probes[0]["input"] == ["Say hello."]
    assert set(probes[0]) == {"model", "input", "encoding_format"}
    fields = endpoint.describe()["request_fields"]
    assert fields["ignore_eos"] is None and fields["include_usage"] is None
    assert fields["max_tokens_field"] is None and fields["notes"] == [] and fields["refused"] == {}


@pytest.mark.asyncio
async def test_a_user_field_an_embeddings_server_refuses_stops_the_session() -> None:
    strict = {"/embeddings": frozenset({"model", "input", "encoding_format"})}
    server = ApiServer(lambda _p, _b: _json(answer([[0.1, 0.2]])), strict=strict)
    with serve(server) as srv:
        fields = RequestFields(extra={"dimensions": 32})
        endpoint = Endpoint(
            srv.url + "/v1", model="m", api="embeddings", api_key=KEY, fields=fields
        )
        with pytest.raises(LlmPerfUsageError) as caught:
            await preflight(endpoint)
    assert "refused the request fields" in str(caught.value)
    assert "Unrecognized request argument supplied: dimensions" in str(caught.value)
    assert KEY not in str(caught.value)
