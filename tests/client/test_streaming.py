"""The client against real sockets: the simulator and scripted odd servers."""

from __future__ import annotations

import json
import time

import pytest
from scripted_server import Script, ScriptedServer, chat_chunk, sse

from pytest_llmperf.client import Endpoint, ErrorKind, RequestRecord, Timeouts, send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.sim import SimServer
from pytest_llmperf.workloads import Sample

pytestmark = pytest.mark.asyncio

SAMPLE = Sample(index=0, prompt="Tell me about harbours.", input_tokens=5, max_tokens=8)
USAGE = {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13}


async def _send(
    url: str, *, api: str = "chat", timeouts: Timeouts | None = None, sample: Sample = SAMPLE
) -> RequestRecord:
    endpoint = Endpoint.from_env(
        url, api_key_env=None, model="m", api=api, timeouts=timeouts or Timeouts()
    )
    record = RequestRecord(index=0, t_sched=0)
    async with StreamClient(endpoint) as http:
        record.t_sched = time.monotonic_ns()
        return await send_request(http, endpoint, sample, record)


@pytest.mark.parametrize("api", ["chat", "completions"])
async def test_simulator_stream_is_measured(api: str) -> None:
    from pytest_llmperf.client import resolve_model

    async with SimServer("fixed", ttft_ms=40, itl_ms=10) as sim:
        endpoint = Endpoint.from_env(sim.url, api_key_env=None, api=api)  # type: ignore[arg-type]
        endpoint = await resolve_model(endpoint)
        records = []
        async with StreamClient(endpoint) as http:
            for _ in range(2):  # the first pays connection set-up; the second is warm
                record = RequestRecord(index=0, t_sched=time.monotonic_ns())
                records.append(await send_request(http, endpoint, SAMPLE, record))
    for record in records:
        assert record.ok, record.error_detail
        assert record.usage_completion_tokens == 8
        assert record.output_tokens == 8
        assert len(record.gaps_ns) == record.token_events - 1
        assert record.t_sched <= record.t_send <= record.t_first <= record.t_last <= record.t_end
    warm = records[1]
    # The sim plans its first token 40 ms after the request arrives and one every 10 ms
    # after (an absolute schedule), and the client reads each no sooner: lower bounds that
    # hold whatever the machine does. No upper bound: one request's reads can be late by a
    # stall of the process (up to ~180 ms measured with both cores busy), so how close to
    # the plan the client measures is benchmarks/loadgen_latency.py's figure (--sim).
    assert (warm.t_first - warm.t_sched) / 1e6 >= 40
    assert (warm.t_last - warm.t_sched) / 1e6 >= 40 + 7 * 10
    assert len(warm.gaps_ns) == 7 and sum(warm.gaps_ns) == warm.t_last - warm.t_first
    assert all(gap >= 0 for gap in warm.gaps_ns)  # 0: two tokens in one late read


async def test_vllm_style_stream_role_chunk_separate_finish_and_usage() -> None:
    steps = [
        (0, chat_chunk("", role="assistant")),
        (0.05, chat_chunk("Hello")),
        (0.01, chat_chunk(" there")),
        (0.01, chat_chunk("", finish="length")),
        (0, chat_chunk(None, usage=USAGE, choices=False)),
        (0, sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
        body = srv.requests[0]
    assert record.ok, record.error_detail
    assert record.token_events == 2  # the role-only and finish-only chunks carry no text
    assert record.usage_completion_tokens == 8
    assert record.finish_reason == "length"
    assert (record.t_first - record.t_send) / 1e6 >= 50  # timed from text, not the role chunk
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 8 and body["messages"][-1]["content"] == SAMPLE.prompt


async def test_multi_token_chunks_without_usage_fall_back_to_chunk_count() -> None:
    steps = [
        (0, chat_chunk("Hello there friend")),
        (0.01, chat_chunk(" again", finish="stop")),
        (0, sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
    assert record.ok
    assert record.usage_completion_tokens is None
    assert record.output_tokens == 2


async def test_comment_lines_crlf_and_events_split_across_reads() -> None:
    raw = (
        b": keep-alive\r\n\r\n"
        + chat_chunk("Hi").replace(b"\n", b"\r\n")
        + chat_chunk(" you", finish="stop")
        + sse("[DONE]")
    )
    steps = [(0.002, raw[i : i + 7]) for i in range(0, len(raw), 7)]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
    assert record.ok, record.error_detail
    assert record.token_events == 2


async def test_error_frame_mid_stream_is_a_failed_request() -> None:
    steps = [
        (0, chat_chunk("Hi")),
        (0, sse({"error": {"message": "engine overloaded", "type": "server_error", "code": 503}})),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
    assert record.error == ErrorKind.STREAM_ERROR
    assert "engine overloaded" in record.error_detail


async def test_http_error_with_openai_body() -> None:
    body = json.dumps(
        {
            "error": {
                "message": "maximum context length is 8192",
                "type": "invalid",
                "param": None,
                "code": 400,
            }
        }
    ).encode()
    script = Script([(0, body)], status=400, content_type="application/json")
    async with ScriptedServer(script) as srv:
        record = await _send(srv.url)
    assert record.error == ErrorKind.HTTP and record.status == 400
    assert "maximum context length" in record.error_detail


async def test_http_error_without_json_body() -> None:
    script = Script([(0, b"<html>bad gateway</html>")], status=502, content_type="text/html")
    async with ScriptedServer(script) as srv:
        record = await _send(srv.url)
    assert record.error == ErrorKind.HTTP and "502" in record.error_detail


async def test_malformed_chunk_is_a_protocol_error() -> None:
    steps = [(0, chat_chunk("Hi")), (0, b"data: {not json\n\n")]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
    assert record.error == ErrorKind.PROTOCOL


async def test_stream_cut_before_the_end_is_truncated() -> None:
    async with ScriptedServer(Script([(0, chat_chunk("Hi"))], close_early=True)) as srv:
        record = await _send(srv.url)
    assert record.error == ErrorKind.TRUNCATED


async def test_stream_ending_without_finish_or_done_is_truncated() -> None:
    async with ScriptedServer(Script([(0, chat_chunk("Hi"))])) as srv:
        record = await _send(srv.url)
    assert record.error == ErrorKind.TRUNCATED


async def test_first_token_timeout_ends_a_stalled_request() -> None:
    steps = [(0, chat_chunk("", role="assistant")), (5.0, chat_chunk("late", finish="stop"))]
    timeouts = Timeouts(connect=1, first_token=0.3, stall=10, total=10)
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url, timeouts=timeouts)
    assert record.error == ErrorKind.FIRST_TOKEN_TIMEOUT
    assert (record.t_end - record.t_send) / 1e9 < 1.5


async def test_non_streaming_json_answer_is_measured_as_one_chunk() -> None:
    answer = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
        ],
        "usage": USAGE,
    }
    script = Script([(0.02, json.dumps(answer).encode())], content_type="application/json")
    async with ScriptedServer(script) as srv:
        record = await _send(srv.url)
    assert record.ok and record.t_first == record.t_last
    assert record.output_tokens == 8


async def test_completions_payload_and_text_chunks() -> None:
    steps = [
        (0, sse({"choices": [{"index": 0, "text": "Hi", "finish_reason": None}]})),
        (0, sse({"choices": [{"index": 0, "text": "!", "finish_reason": "length"}]})),
        (0, sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url, api="completions")
        body = srv.requests[0]
    assert record.ok and record.token_events == 2
    assert body["prompt"] == SAMPLE.prompt and "messages" not in body


async def test_connection_refused_is_a_connect_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    record = await _send(f"http://127.0.0.1:{port}")
    assert record.error == ErrorKind.CONNECT


async def test_api_key_goes_only_in_the_authorization_header() -> None:
    key = "sk-test-NEVER-PRINT-ME-1234"
    steps = [(0, chat_chunk("Hi", finish="stop")), (0, sse("[DONE]"))]
    async with ScriptedServer(Script(steps)) as srv:
        endpoint = Endpoint(srv.url + "/v1", model="m", api_key=key)
        record = RequestRecord(index=0, t_sched=0)
        async with StreamClient(endpoint) as http:
            await send_request(http, endpoint, SAMPLE, record)
        assert srv.headers_seen[-1]["Authorization"] == f"Bearer {key}"
        assert key not in json.dumps(srv.requests)
    assert key not in repr(endpoint) and key not in json.dumps(endpoint.describe())
    assert key not in endpoint.label
