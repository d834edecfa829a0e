"""The OpenAI Responses API: the pure event parser, and whole requests over loopback sockets."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from api_server import ApiServer, Reply, event, serve

from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.apis.registry import answer_text_for, build_payload, chunk_parser
from pytest_llmperf.apis.responses import parse_event
from pytest_llmperf.client import Endpoint, ErrorKind, RequestRecord, Timeouts, send_request
from pytest_llmperf.client.preflight import preflight
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.workloads import Sample

SAMPLE = Sample(index=0, prompt="Tell me about harbours.", input_tokens=5, max_tokens=4)
KEY = "sk-resp-secret-4242"


def delta(text: str, kind: str = "response.output_text.delta") -> dict[str, Any]:
    return {"type": kind, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text}


def completed(
    status: str = "completed", reason: str | None = None, usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    response: dict[str, Any] = {"id": "resp_1", "object": "response", "status": status}
    response["incomplete_details"] = {"reason": reason} if reason else None
    response["usage"] = usage or {
        "input_tokens": 5,
        "output_tokens": 4,
        "input_tokens_details": {"cached_tokens": 2},
        "output_tokens_details": {"reasoning_tokens": 1},
    }
    return {"type": "response.completed", "response": response}


LIFECYCLE = [
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    {"type": "response.in_progress", "response": {"id": "resp_1", "status": "in_progress"}},
    {"type": "response.output_item.added", "item": {"type": "message", "id": "msg_1"}},
    {"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}},
]


# -- the pure parser ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "event_", "answer", "reasoning", "output"),
    [
        (delta("Hi"), True, True, False, True),
        (delta(""), True, False, False, False),  # an empty delta is still a token event
        (delta("hm", "response.reasoning_text.delta"), True, False, True, True),
        (delta("hm", "response.reasoning_summary_text.delta"), True, False, True, True),
        (delta('{"a"', "response.function_call_arguments.delta"), True, True, False, True),
        (delta("", "response.function_call_arguments.delta"), True, True, False, False),
        *[(obj, False, False, False, False) for obj in LIFECYCLE],
        ({"type": "response.output_text.done", "text": "Hi"}, False, False, False, False),
        ({"type": "response.content_part.done", "part": {}}, False, False, False, False),
    ],
)
def test_token_events_are_the_deltas_not_the_lifecycle(
    obj: dict[str, Any], event_: bool, answer: bool, reasoning: bool, output: bool
) -> None:
    info = parse_event(json.dumps(obj))
    assert (info.event, info.answer, info.reasoning, info.output) == (
        event_,
        answer,
        reasoning,
        output,
    )
    assert not info.done and info.error is None and info.finish_reason is None


def test_completed_carries_the_usage_in_the_records_names_and_ends_the_stream() -> None:
    info = parse_event(json.dumps(completed()))
    assert info.done and not info.event and info.finish_reason == "stop"
    assert info.usage == {
        "prompt_tokens": 5,
        "completion_tokens": 4,
        "prompt_tokens_details": {"cached_tokens": 2},
        "completion_tokens_details": {"reasoning_tokens": 1},
    }


def test_the_cap_is_a_normal_end_whether_vllm_or_openai_says_it() -> None:
    # vLLM: response.completed with status incomplete; OpenAI: a response.incomplete event
    vllm = parse_event(json.dumps(completed("incomplete", "max_output_tokens")))
    openai = completed("incomplete", "max_output_tokens")
    openai["type"] = "response.incomplete"
    other = parse_event(json.dumps(openai))
    for info in (vllm, other):
        assert info.done and info.error is None and info.finish_reason == "max_output_tokens"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "server_error", "message": "GPU fell over"},
                },
            },
            "GPU fell over (server_error)",
        ),
        (
            {"type": "error", "code": "rate_limit", "message": "slow down", "param": None},
            "slow down (rate_limit)",
        ),
        (
            {"error": {"code": 500, "message": "llama.cpp broke", "type": "server_error"}},
            "llama.cpp broke (500)",
        ),
        (
            completed("failed") | {"response": {"status": "failed", "error": None}},
            "response failed",
        ),
    ],
)
def test_failures_are_errors_in_the_servers_words(obj: dict[str, Any], message: str) -> None:
    info = parse_event(json.dumps(obj))
    assert info.error == message and not info.done


def test_done_marker_is_tolerated_and_ends_nothing() -> None:
    info = parse_event("[DONE]")
    assert not info.done and not info.event and info.error is None


def test_malformed_event_raises_value_error() -> None:
    with pytest.raises(ValueError):
        parse_event('{"type": "response.output_text.delta", ')
    with pytest.raises(ValueError):
        parse_event("[1, 2]")


def test_a_whole_response_object_is_read_as_one_answer() -> None:
    whole = completed()["response"] | {
        "output": [
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "think"}]},
            {"type": "message", "content": [{"type": "output_text", "text": "Hello"}]},
        ]
    }
    info = parse_event(json.dumps(whole))
    assert info.answer and info.reasoning and info.output and info.finish_reason == "stop"
    assert answer_text_for("responses")(json.dumps(whole)) == "Hello"
    assert answer_text_for("responses")(json.dumps(delta("Hi"))) == "Hi"
    assert (
        answer_text_for("responses")(json.dumps(delta("x", "response.reasoning_text.delta"))) == ""
    )


def test_payload_shape() -> None:
    sample = Sample(
        index=0,
        prompt="Next?",
        input_tokens=3,
        max_tokens=7,
        history=({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}),
    )
    body = build_payload("responses", "m", sample, RequestFields())
    assert body == {
        "model": "m",
        "input": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "user", "content": "Next?"},
        ],
        "max_output_tokens": 7,
        "stream": True,
        "temperature": 0.0,
        "ignore_eos": True,
    }
    refused = build_payload("responses", "m", sample, RequestFields(ignore_eos=False))
    assert "ignore_eos" not in refused and "stream_options" not in refused
    assert chunk_parser("responses") is parse_event


# -- over loopback sockets -------------------------------------------------------------------


async def _send(
    url: str,
    *,
    sample: Sample = SAMPLE,
    key: str | None = None,
    timeouts: Timeouts | None = None,
    reply: list[str] | None = None,
) -> RequestRecord:
    endpoint = Endpoint(
        url + "/v1", model="m", api="responses", api_key=key, timeouts=timeouts or Timeouts()
    )
    record = RequestRecord(index=0, t_sched=time.monotonic_ns(), reply=reply)
    async with StreamClient(endpoint) as http:
        return await send_request(http, endpoint, sample, record)


def _vllm_stream(gap: float, texts: list[str], usage: dict[str, Any] | None = None) -> Reply:
    steps = [(0.0, event(e)) for e in LIFECYCLE]
    steps += [(gap, event(delta(t))) for t in texts]
    steps += [(0.0, event({"type": "response.output_text.done", "text": "".join(texts)}))]
    steps += [(0.0, event(completed("incomplete", "max_output_tokens", usage)))]
    return Reply(steps)


@pytest.mark.asyncio
async def test_a_stream_is_timed_per_delta_and_ends_at_the_cap() -> None:
    texts = ["Har", "bours", "", " are"]  # the empty delta (a partial character) counts too
    with serve(ApiServer(lambda _p, _b: _vllm_stream(0.02, texts))) as srv:
        reply: list[str] = []
        record = await _send(srv.url, reply=reply)
        stamps = srv.stamps[0]
        request = srv.requests[0]
    assert record.ok, record.error_detail
    assert request.path == "/v1/responses"
    assert request.headers["accept"] == "text/event-stream"
    assert record.finish_reason == "max_output_tokens"
    assert record.token_events == 4 and len(record.gaps_ns) == 3
    assert record.usage_completion_tokens == 4 and record.usage_prompt_tokens == 5
    assert record.usage_cached_tokens == 2 and record.usage_reasoning_tokens == 1
    first_delta = stamps[len(LIFECYCLE)]
    # each delta is read no sooner than it was written: timestamps are the reads' own
    assert record.t_first >= first_delta and record.t_out >= first_delta
    assert record.t_last >= stamps[len(LIFECYCLE) + 3]
    assert sum(record.gaps_ns) == record.t_last - record.t_first
    assert record.t_send <= record.t_first <= record.t_last <= record.t_end
    assert "".join(reply) == "Harbours are"


@pytest.mark.asyncio
async def test_a_stream_without_a_terminal_event_is_truncated_even_with_done() -> None:
    steps = [(0.0, event(delta("Hi"))), (0.0, b"data: [DONE]\n\n")]
    with serve(ApiServer(lambda _p, _b: Reply(steps))) as srv:
        record = await _send(srv.url)
    assert record.error is ErrorKind.TRUNCATED
    assert "response.completed or response.incomplete" in record.error_detail
    assert record.token_events == 1


@pytest.mark.asyncio
async def test_a_cut_connection_mid_stream_is_truncated() -> None:
    with serve(ApiServer(lambda _p, _b: Reply([(0.0, event(delta("Hi")))], cut=True))) as srv:
        record = await _send(srv.url)
    assert record.error is ErrorKind.TRUNCATED


@pytest.mark.asyncio
async def test_done_after_the_terminal_event_is_tolerated() -> None:
    steps = [(0.0, event(delta("Hi"))), (0.0, event(completed())), (0.0, b"data: [DONE]\n\n")]
    with serve(ApiServer(lambda _p, _b: Reply(steps))) as srv:
        record = await _send(srv.url)
    assert record.ok, record.error_detail
    assert record.finish_reason == "stop"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "server_error", "message": f"boom for {KEY}"},
                },
            },
            "boom for",
        ),
        ({"type": "error", "code": "overloaded", "message": "try later"}, "try later (overloaded)"),
        (
            {"error": {"code": 500, "message": "llama.cpp: out of memory", "type": "server_error"}},
            "out of memory",
        ),
    ],
)
async def test_error_events_fail_the_request_with_the_servers_message(
    failure: dict[str, Any], expected: str
) -> None:
    steps = [(0.0, event(delta("Hi"))), (0.0, event(failure, "error"))]
    with serve(ApiServer(lambda _p, _b: Reply(steps))) as srv:
        record = await _send(srv.url, key=KEY)
    assert record.error is ErrorKind.STREAM_ERROR
    assert expected in record.error_detail
    assert KEY not in record.error_detail  # a server echoing the key: scrubbed


@pytest.mark.asyncio
async def test_an_http_error_keeps_the_servers_message_and_never_the_key() -> None:
    body = json.dumps(
        {"error": {"message": f"bad key {KEY}", "type": "auth", "code": 401}}
    ).encode()
    reply = Reply([(0.0, body)], status=401, content_type="application/json", whole=True)
    with serve(ApiServer(lambda _p, _b: reply)) as srv:
        record = await _send(srv.url, key=KEY)
        headers = srv.requests[0].headers
    assert record.error is ErrorKind.HTTP and record.status == 401
    assert "HTTP 401: bad key" in record.error_detail and KEY not in record.error_detail
    assert headers["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in headers  # only the Messages API sends it


@pytest.mark.asyncio
async def test_a_stalled_stream_is_a_failed_request_not_a_hang() -> None:
    steps = [(0.0, event(delta("Hi"))), (5.0, event(completed()))]
    timeouts = Timeouts(connect=2, first_token=2, stall=0.3, total=3)
    with serve(ApiServer(lambda _p, _b: Reply(steps))) as srv:
        record = await _send(srv.url, timeouts=timeouts)
    assert record.error is ErrorKind.READ_TIMEOUT


@pytest.mark.asyncio
async def test_a_strict_server_refusing_ignore_eos_gets_it_dropped_and_reported() -> None:
    allowed = frozenset({"model", "input", "max_output_tokens", "stream", "temperature"})
    server = ApiServer(lambda _p, _b: _vllm_stream(0, ["Hi"]), strict={"/responses": allowed})
    with serve(server) as srv:
        endpoint = Endpoint(srv.url + "/v1", model="m", api="responses", api_key=KEY)
        endpoint = await preflight(endpoint)
        record = RequestRecord(index=0, t_sched=time.monotonic_ns())
        async with StreamClient(endpoint) as http:
            record = await send_request(http, endpoint, SAMPLE, record)
        sent = srv.bodies[-1]
    assert endpoint.fields.ignore_eos is False
    described = endpoint.describe()
    fields = described["request_fields"]
    assert fields["ignore_eos"] is False and fields["include_usage"] is None  # never sent
    assert fields["max_tokens_field"] == "max_output_tokens"
    assert set(fields["refused"]) == {"ignore_eos"}
    assert any("max_output_tokens" in note for note in fields["notes"])
    assert not any("stream_options" in note for note in fields["notes"])
    assert record.ok and "ignore_eos" not in sent and "stream_options" not in sent
    assert KEY not in json.dumps(described) and KEY not in repr(endpoint)


@pytest.mark.asyncio
async def test_a_user_field_the_server_refuses_stops_the_session_in_its_words() -> None:
    from pytest_llmperf.errors import LlmPerfUsageError

    allowed = frozenset(
        {"model", "input", "max_output_tokens", "stream", "temperature", "ignore_eos"}
    )
    server = ApiServer(lambda _p, _b: _vllm_stream(0, ["Hi"]), strict={"/responses": allowed})
    with serve(server) as srv:
        fields = RequestFields(extra={"reasoning": {"effort": "low"}})
        endpoint = Endpoint(srv.url + "/v1", model="m", api="responses", fields=fields, api_key=KEY)
        with pytest.raises(LlmPerfUsageError) as caught:
            await preflight(endpoint)
    assert "Unrecognized request argument supplied: reasoning" in str(caught.value)
    assert KEY not in str(caught.value)
