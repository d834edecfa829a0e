"""The Anthropic Messages API: the pure event parser, and whole requests over loopback sockets."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from api_server import ApiServer, Reply, event, serve

from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.apis.messages import parse_event
from pytest_llmperf.apis.registry import answer_text_for, build_payload
from pytest_llmperf.client import Endpoint, ErrorKind, RequestRecord, Timeouts, send_request
from pytest_llmperf.client.preflight import preflight
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads import Sample

SAMPLE = Sample(index=0, prompt="Tell me about harbours.", input_tokens=5, max_tokens=4)
KEY = "sk-ant-secret-7777"


def start(usage: dict[str, Any] | None = None) -> dict[str, Any]:
    usage = (
        usage
        if usage is not None
        else {"input_tokens": 3, "cache_read_input_tokens": 2, "output_tokens": 0}
    )
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": usage}
    return {"type": "message_start", "message": message}


def block_delta(kind: str, text: str, index: int = 0) -> dict[str, Any]:
    key = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": kind, key.get(kind, "signature"): text},
    }


def stop_delta(reason: str = "max_tokens", output: int = 4) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": output},
    }


BLOCK_START = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "text", "text": ""},
}
BLOCK_STOP = {"type": "content_block_stop", "index": 0}
STOP = {"type": "message_stop"}
PING = {"type": "ping"}


# -- the pure parser ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "event_", "answer", "reasoning", "output"),
    [
        (block_delta("text_delta", "Hi"), True, True, False, True),
        (block_delta("text_delta", ""), True, False, False, False),
        (block_delta("thinking_delta", "hmm"), True, False, True, True),
        (block_delta("input_json_delta", '{"city"'), True, True, False, True),
        (block_delta("signature_delta", ""), False, False, False, False),
        (block_delta("signature_delta", "EqQBCgIYAh"), False, False, False, False),
        (BLOCK_START, False, False, False, False),
        (BLOCK_STOP, False, False, False, False),
        (PING, False, False, False, False),
    ],
)
def test_token_events_are_content_block_deltas(
    obj: dict[str, Any], event_: bool, answer: bool, reasoning: bool, output: bool
) -> None:
    info = parse_event(json.dumps(obj))
    assert (info.event, info.answer, info.reasoning, info.output) == (
        event_,
        answer,
        reasoning,
        output,
    )
    assert not info.done and info.error is None


def test_usage_prompt_sums_cache_and_completion_comes_from_message_delta() -> None:
    usage = {"input_tokens": 3, "cache_read_input_tokens": 2, "cache_creation_input_tokens": 1}
    info = parse_event(json.dumps(start(usage)))
    assert info.usage == {"prompt_tokens": 6, "prompt_tokens_details": {"cached_tokens": 2}}
    ending = parse_event(json.dumps(stop_delta("end_turn", 9)))
    assert ending.finish_reason == "end_turn" and ending.usage == {"completion_tokens": 9}
    assert not ending.done  # message_stop ends the stream, not the finish
    assert parse_event(json.dumps(STOP)).done


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "Overloaded (overloaded_error)",
        ),
        (
            {"code": 500, "message": "llama.cpp: context full", "type": "server_error"},
            "llama.cpp: context full (500)",
        ),
        (
            {
                "type": "error",
                "error": {"type": "internal_error", "message": "Invalid data format received"},
            },
            "Invalid data format received",
        ),
    ],
)
def test_error_events_in_the_servers_words(obj: dict[str, Any], message: str) -> None:
    info = parse_event(json.dumps(obj))
    assert info.error is not None and message in info.error


def test_a_whole_message_and_answer_text() -> None:
    whole = {
        "type": "message",
        "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "Hello"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }
    info = parse_event(json.dumps(whole))
    assert info.answer and info.reasoning and info.output and info.finish_reason == "end_turn"
    assert info.usage == {"prompt_tokens": 5, "completion_tokens": 3}
    text = answer_text_for("messages")
    assert text(json.dumps(whole)) == "Hello"
    assert text(json.dumps(block_delta("text_delta", "Hi"))) == "Hi"
    assert text(json.dumps(block_delta("thinking_delta", "Hi"))) == ""


def test_payload_puts_the_system_turn_on_top() -> None:
    sample = Sample(
        index=0,
        prompt="Next?",
        input_tokens=3,
        max_tokens=7,
        history=(
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
        ),
    )
    body = build_payload("messages", "m", sample, RequestFields())
    assert body == {
        "model": "m",
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Next?"},
        ],
        "max_tokens": 7,
        "stream": True,
        "temperature": 0.0,
        "ignore_eos": True,
    }
    assert "ignore_eos" not in build_payload(
        "messages", "m", sample, RequestFields(ignore_eos=False)
    )


# -- over loopback sockets -------------------------------------------------------------------


def _stream(gap: float, pieces: list[tuple[str, str]]) -> Reply:
    steps = [(0.0, event(start())), (0.0, event(BLOCK_START)), (0.0, event(PING))]
    steps += [(gap, event(block_delta(kind, text))) for kind, text in pieces]
    steps += [(0.0, event(BLOCK_STOP)), (0.0, event(stop_delta())), (0.0, event(STOP))]
    return Reply(steps)


async def _send(
    url: str,
    *,
    key: str | None = KEY,
    timeouts: Timeouts | None = None,
    reply: list[str] | None = None,
) -> RequestRecord:
    endpoint = Endpoint(
        url + "/v1", model="m", api="messages", api_key=key, timeouts=timeouts or Timeouts()
    )
    record = RequestRecord(index=0, t_sched=time.monotonic_ns(), reply=reply)
    async with StreamClient(endpoint) as http:
        return await send_request(http, endpoint, SAMPLE, record)


@pytest.mark.asyncio
async def test_a_stream_is_timed_per_delta_with_usage_and_the_anthropic_headers() -> None:
    pieces = [
        ("thinking_delta", "Let me see."),
        ("signature_delta", "sig"),
        ("text_delta", "Har"),
        ("text_delta", "bours"),
    ]
    with serve(ApiServer(lambda _p, _b: _stream(0.02, pieces))) as srv:
        reply: list[str] = []
        record = await _send(srv.url, reply=reply)
        request, stamps = srv.requests[0], srv.stamps[0]
    assert record.ok, record.error_detail
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["authorization"] == f"Bearer {KEY}"  # vLLM's --api-key reads this one
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert record.token_events == 3 and record.reasoning_events == 1  # not the signature
    assert len(record.gaps_ns) == 2 and sum(record.gaps_ns) == record.t_last - record.t_first
    assert record.t_first >= stamps[3]  # the thinking delta's write
    assert record.t_out >= stamps[5] and record.t_out > record.t_first  # the first text
    assert record.usage_prompt_tokens == 5 and record.usage_cached_tokens == 2
    assert record.usage_completion_tokens == 4 and record.finish_reason == "max_tokens"
    assert "".join(reply) == "Harbours"


@pytest.mark.asyncio
async def test_without_a_key_no_key_header_is_sent() -> None:
    with serve(ApiServer(lambda _p, _b: _stream(0, [("text_delta", "Hi")]))) as srv:
        record = await _send(srv.url, key=None)
        headers = srv.requests[0].headers
    assert record.ok
    assert "x-api-key" not in headers and "authorization" not in headers
    assert headers["anthropic-version"] == "2023-06-01"


@pytest.mark.asyncio
async def test_a_stream_cut_after_message_delta_is_truncated() -> None:
    steps = [
        (0.0, event(start())),
        (0.0, event(block_delta("text_delta", "Hi"))),
        (0.0, event(stop_delta())),
    ]
    with serve(ApiServer(lambda _p, _b: Reply(steps))) as srv:
        record = await _send(srv.url)
    assert record.error is ErrorKind.TRUNCATED and "message_stop" in record.error_detail


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "failure",
    [
        {
            "type": "error",
            "error": {"type": "overloaded_error", "message": f"Overloaded; key {KEY}"},
        },  # vLLM, Anthropic
        {"code": 500, "message": f"Overloaded; key {KEY}", "type": "server_error"},  # llama.cpp
    ],
)
async def test_an_error_event_fails_the_request_with_its_message_and_not_the_key(
    failure: dict[str, Any],
) -> None:
    steps = [
        (0.0, event(start())),
        (0.0, event(block_delta("text_delta", "Hi"))),
        (0.0, event(failure, "error")),
    ]
    with serve(ApiServer(lambda _p, _b: Reply(steps))) as srv:
        record = await _send(srv.url)
    assert record.error is ErrorKind.STREAM_ERROR
    assert "Overloaded; key" in record.error_detail and KEY not in record.error_detail


@pytest.mark.asyncio
async def test_a_stream_with_only_a_signature_is_blank_where_its_usage_counts_tokens() -> None:
    """No token event, but the usage counts 4 output tokens: generated, nothing visible
    (completed, blank); with a usage of 0 nothing says a token was made (empty_response)."""
    with serve(ApiServer(lambda _p, _b: _stream(0, [("signature_delta", "sig")]))) as srv:
        record = await _send(srv.url)
    assert record.ok and record.blank and record.token_events == 0, record.error_detail
    assert record.usage_completion_tokens == 4

    def nothing(_path: str, _body: dict[str, Any]) -> Reply:
        steps = [event(start()), event(BLOCK_START), event(block_delta("signature_delta", "s"))]
        steps += [event(BLOCK_STOP), event(stop_delta("end_turn", output=0)), event(STOP)]
        return Reply([(0.0, step) for step in steps])

    with serve(ApiServer(nothing)) as srv:
        record = await _send(srv.url)
    assert record.error is ErrorKind.EMPTY and "usage counts 0" in record.error_detail


@pytest.mark.asyncio
async def test_a_strict_server_refusing_ignore_eos_gets_it_dropped_and_reported() -> None:
    allowed = frozenset({"model", "messages", "max_tokens", "stream", "temperature", "system"})
    server = ApiServer(
        lambda _p, _b: _stream(0, [("text_delta", "Hi")]), strict={"/messages": allowed}
    )
    with serve(server) as srv:
        endpoint = await preflight(
            Endpoint(srv.url + "/v1", model="m", api="messages", api_key=KEY)
        )
        probe_headers = srv.requests[0].headers
    fields = endpoint.describe()["request_fields"]
    assert endpoint.fields.ignore_eos is False
    assert fields["ignore_eos"] is False and fields["include_usage"] is None
    assert fields["max_tokens_field"] == "max_tokens" and set(fields["refused"]) == {"ignore_eos"}
    assert probe_headers["x-api-key"] == KEY  # the probes go as the run's requests do
    assert KEY not in json.dumps(endpoint.describe())


@pytest.mark.asyncio
async def test_a_server_refusing_even_the_plainest_request_stops_the_session() -> None:
    allowed = frozenset({"model", "messages", "stream"})  # refuses max_tokens, the API's own
    server = ApiServer(
        lambda _p, _b: _stream(0, [("text_delta", "Hi")]), strict={"/messages": allowed}
    )
    with serve(server) as srv, pytest.raises(LlmPerfUsageError) as caught:
        await preflight(Endpoint(srv.url + "/v1", model="m", api="messages", api_key=KEY))
    text = str(caught.value)
    assert "refused even the plainest request" in text and "/v1/messages" in text
    assert "Unrecognized request argument supplied: max_tokens" in text and KEY not in text
