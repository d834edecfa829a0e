"""The server's own per-request timings, read from the chunk that ends a stream.

The shapes are the real servers' own: vLLM 0.32 with ``--enable-per-request-metrics``
(``metrics`` on the final usage chunk and on a non-streamed body; fields it lacks left
out) and llama.cpp's server (``timings`` on the last chunk: the usage chunk with
``include_usage``, else the finish chunk; a completions stream's last chunk carries
text, finish, usage and timings at once). They are served by a real HTTP server on
127.0.0.1 (``scripted_server.py``) and read by the real client.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import pytest
from scripted_server import Script, ScriptedServer, chat_chunk, sse

from pytest_llmperf.apis.chunks import parse_chunk
from pytest_llmperf.client import Endpoint, RequestRecord, Timeouts, send_request
from pytest_llmperf.client.server_timing import apply_server_timing
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.workloads import Sample

SAMPLE = Sample(index=0, prompt="Tell me about harbours.", input_tokens=5, max_tokens=3)
USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
VLLM_METRICS = {
    "time_to_first_token_ms": 12.5,
    "generation_time_ms": 20.0,
    "queue_time_ms": 3.25,
    "mean_itl_ms": 10.0,
    "tokens_per_second": 92.3,
}
LLAMACPP_TIMINGS = {
    "cache_n": 0,
    "prompt_n": 5,
    "prompt_ms": 7.5,
    "prompt_per_token_ms": 1.5,
    "prompt_per_second": 666.7,
    "predicted_n": 3,
    "predicted_ms": 16.0,
    "predicted_per_token_ms": 8.0,
    "predicted_per_second": 125.0,
}


def _final(obj: dict[str, Any]) -> bytes:
    return sse({"id": "x", "object": "chat.completion.chunk", "model": "m", **obj})


async def _send(url: str, *, api: Literal["chat", "completions"] = "chat") -> RequestRecord:
    endpoint = Endpoint.from_env(
        url, api_key_env=None, model="m", api=api, timeouts=Timeouts.from_seconds(10)
    )
    record = RequestRecord(index=0, t_sched=time.monotonic_ns())
    async with StreamClient(endpoint) as http:
        return await send_request(http, endpoint, SAMPLE, record)


def _tokens() -> list[tuple[float, bytes]]:
    return [
        (0, chat_chunk("", role="assistant")),
        (0, chat_chunk("Hel")),
        (0, chat_chunk("lo")),
        (0, chat_chunk(" you", finish="length")),
    ]


@pytest.mark.asyncio
async def test_vllm_metrics_on_the_final_usage_chunk() -> None:
    spec = {"num_accepted_draft_tokens": 5, "num_draft_tokens": 8, "num_spec_tokens": 4}
    metrics = {**VLLM_METRICS, "speculative_decoding": spec}
    steps = [*_tokens(), (0, _final({"choices": [], "usage": USAGE, "metrics": metrics}))]
    steps.append((0, sse("[DONE]")))
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
        sent = srv.requests[0]
    assert sent["stream_options"] == {"include_usage": True}  # the chunk vLLM puts them on
    assert record.ok, record.error_detail
    assert record.token_events == 3 and record.usage_completion_tokens == 3
    assert record.server_queue_ms == 3.25
    assert record.server_ttft_ms == 12.5
    assert record.server_decode_ms == 20.0
    assert record.server_mean_itl_ms == 10.0
    assert (record.server_spec_accepted, record.server_spec_draft) == (5, 8)


@pytest.mark.asyncio
async def test_vllm_fields_it_lacks_stay_none() -> None:
    # vLLM leaves a field out when the engine lacked its timestamps (exclude_none)
    steps = [
        *_tokens(),
        (0, _final({"choices": [], "usage": USAGE, "metrics": {"time_to_first_token_ms": 4.0}})),
        (0, sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
    assert record.ok and record.server_ttft_ms == 4.0
    assert record.server_queue_ms is None and record.server_decode_ms is None
    assert record.server_mean_itl_ms is None and record.server_spec_draft is None


@pytest.mark.asyncio
async def test_llamacpp_timings_on_the_usage_chunk() -> None:
    timings = {**LLAMACPP_TIMINGS, "draft_n": 6, "draft_n_accepted": 4}
    steps = [
        *_tokens()[:-1],
        (0, chat_chunk(" you")),
        (0, chat_chunk(None, finish="length")),  # llama.cpp: the finish on an empty delta
        (0, _final({"choices": [], "usage": USAGE, "timings": timings})),
        (0, sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
    assert record.ok, record.error_detail
    assert record.server_ttft_ms == 7.5  # prompt_ms: the engine's prefill
    assert record.server_decode_ms == 16.0
    assert record.server_mean_itl_ms == 8.0  # predicted_ms over predicted_n - 1
    assert record.server_queue_ms is None  # llama.cpp says nothing of its queue
    assert (record.server_spec_accepted, record.server_spec_draft) == (4, 6)


@pytest.mark.asyncio
async def test_llamacpp_timings_on_the_finish_chunk_without_usage() -> None:
    # without include_usage llama.cpp puts them on its last chunk, the finish chunk
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    steps = [
        *_tokens()[:-1],
        (0, chat_chunk(" you")),
        (0, _final({**finish, "timings": LLAMACPP_TIMINGS})),
        (0, sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
    assert record.ok, record.error_detail
    assert record.usage_completion_tokens is None
    assert (record.server_ttft_ms, record.server_decode_ms) == (7.5, 16.0)


@pytest.mark.asyncio
async def test_llamacpp_completions_last_chunk_carries_text_finish_usage_and_timings() -> None:
    def text(t: str, finish: str | None = None, **extra: Any) -> bytes:
        choice = {"text": t, "index": 0, "logprobs": None, "finish_reason": finish}
        return sse({"id": "x", "object": "text_completion", "choices": [choice], **extra})

    steps = [
        (0, text("Hel")),
        (0, text("lo")),
        (0, text(" you")),
        (0, text("", "length", usage=USAGE, timings=LLAMACPP_TIMINGS)),
        (0, sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url, api="completions")
    assert record.ok, record.error_detail
    assert record.token_events == 3
    assert (record.server_ttft_ms, record.server_decode_ms) == (7.5, 16.0)


@pytest.mark.asyncio
async def test_vllm_metrics_on_a_non_streamed_body() -> None:
    body = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
        ],
        "usage": USAGE,
        "metrics": VLLM_METRICS,
    }
    script = Script([(0, json.dumps(body).encode())], content_type="application/json")
    async with ScriptedServer(script) as srv:
        record = await _send(srv.url)
    assert record.ok, record.error_detail
    assert (record.server_queue_ms, record.server_ttft_ms) == (3.25, 12.5)


@pytest.mark.asyncio
async def test_a_stream_without_timings_leaves_them_none() -> None:
    steps = [
        *_tokens(),
        (0, chat_chunk(None, usage=USAGE, choices=False)),
        (0, sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        record = await _send(srv.url)
    assert record.ok
    assert record.server_ttft_ms is None and record.server_queue_ms is None


def test_timings_are_looked_for_only_on_the_chunk_that_ends_a_stream() -> None:
    # A token chunk is never searched (its cost stays what it was): llama.cpp's
    # timings_per_token puts timings on every chunk, and the last one is what counts.
    token = {"choices": [{"index": 0, "delta": {"content": "a"}}], "timings": LLAMACPP_TIMINGS}
    assert parse_chunk(json.dumps(token)).timing is None
    usage = {"choices": [], "usage": USAGE, "metrics": VLLM_METRICS}
    assert parse_chunk(json.dumps(usage)).timing == VLLM_METRICS
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "timings": {"a": 1}}
    assert parse_chunk(json.dumps(finish)).timing == {"a": 1}


@pytest.mark.parametrize("bad", [None, "12", True, -1.0, float("inf"), float("nan"), [1], {"x": 1}])
def test_values_that_are_not_finite_non_negative_numbers_are_ignored(bad: Any) -> None:
    record = RequestRecord(index=0, t_sched=0)
    apply_server_timing(record, {"queue_time_ms": bad, "time_to_first_token_ms": bad})
    apply_server_timing(record, {"prompt_ms": bad, "predicted_ms": bad, "predicted_n": 3})
    assert record.server_queue_ms is None and record.server_ttft_ms is None
    assert record.server_decode_ms is None and record.server_mean_itl_ms is None


def test_llamacpp_before_any_token_is_no_timing() -> None:
    # prompt_ms is 0 for "prompt not processed yet" until a token is sampled
    record = RequestRecord(index=0, t_sched=0)
    apply_server_timing(record, {**LLAMACPP_TIMINGS, "predicted_n": 0, "prompt_ms": 0.0})
    assert record.server_ttft_ms is None and record.server_decode_ms is None


def test_llamacpp_single_token_has_no_mean_itl() -> None:
    record = RequestRecord(index=0, t_sched=0)
    apply_server_timing(record, {**LLAMACPP_TIMINGS, "predicted_n": 1, "predicted_ms": 0.001})
    assert record.server_decode_ms == 0.001 and record.server_mean_itl_ms is None
