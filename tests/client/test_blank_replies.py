"""Blank replies on every streaming API, from the simulator's ``blank_reply_rate`` and from
typed-event streams, through the run's counts, its live progress and its event log.

A blank reply (docs/measurement.md, "Blank replies") is completed: the server generated
its tokens (its usage counts them, or it streamed empty deltas) and none decodes to
visible text. vLLM's chat and completions stream one ``""`` delta per such token (timed:
a TTFT); its Responses and Messages adapters drop empty deltas, so there nothing is
streamed but the usage (no TTFT; ``e2e`` to the stream's end), as ``transformers serve``
does on chat. Real sockets on 127.0.0.1.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_server import ApiServer, Reply, event, serve

from pytest_llmperf.client import Endpoint, ErrorKind, RequestRecord, send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen import run_load
from pytest_llmperf.loadgen.progress import ProgressSampler
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.results.blank import all_blank_note
from pytest_llmperf.results.event_log import analyse_event_log
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads import Sample

SAMPLE = Sample(index=0, prompt="Tell me about harbours.", input_tokens=5, max_tokens=4)
APIS = ("chat", "completions", "responses", "messages")
STREAMS_EMPTY_DELTAS = {"chat", "completions"}  # vLLM's adapters drop them on the other two


def _spec(requests: int, concurrency: int = 4) -> RunSpec:
    return RunSpec.from_markers(
        ("synthetic",),
        {"requests": requests, "input_tokens": 8, "output_tokens": 6},
        ("concurrency",),
        {"concurrency": concurrency},
    )


# -- the Responses API: deltas, or the usage alone -------------------------------------------


def _responses(deltas: int, output_tokens: int) -> Reply:
    steps = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {"type": "response.output_item.added", "item": {"type": "message", "id": "msg_1"}},
        *[
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": ""}
            for _ in range(deltas)
        ],
        {
            "type": "response.completed",
            "response": {
                "id": "r",
                "status": "completed",
                "usage": {"input_tokens": 5, "output_tokens": output_tokens},
            },
        },
    ]
    return Reply([(0.0, event(step)) for step in steps])


async def _send_responses(reply: Reply) -> RequestRecord:
    with serve(ApiServer(lambda _p, _b: reply)) as srv:
        endpoint = Endpoint(srv.url + "/v1", model="m", api="responses")
        record = RequestRecord(index=0, t_sched=time.monotonic_ns())
        async with StreamClient(endpoint) as http:
            return await send_request(http, endpoint, SAMPLE, record)


@pytest.mark.asyncio
@pytest.mark.parametrize(("deltas", "usage"), [(3, 3), (0, 4), (2, 0), (0, 0)])
async def test_a_responses_stream_without_text_is_blank_or_empty_by_its_evidence(
    deltas: int, usage: int
) -> None:
    """Empty deltas with a usage, or a usage alone: blank. A usage of 0: empty, however
    many empty deltas came (the server's own count says nothing was generated)."""
    record = await _send_responses(_responses(deltas, usage))
    if usage:
        assert record.ok and record.blank, (record.error, record.error_detail)
        assert record.token_events == deltas and bool(record.t_first) == bool(deltas)
    else:
        assert record.error is ErrorKind.EMPTY and not record.blank
        assert "usage counts 0 completion tokens" in record.error_detail


# -- the simulator's blank replies on every API ----------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("api", APIS)
async def test_a_server_of_blank_replies_completes_every_request_counted_blank(
    api: str, tmp_path: Path
) -> None:
    async with SimServer("fixed", ttft_ms=1, itl_ms=0.5, blank_reply_rate=1.0) as sim:
        endpoint = Endpoint.from_env(sim.url, api_key_env=None, model="sim-fixed", api=api)  # type: ignore[arg-type]
        result = await run_load(endpoint, _spec(12), events_dir=tmp_path)
    counts = result.counts
    assert (counts["completed"], counts["failed"], counts["blank"]) == (12, 0, 12), result.errors
    assert result.rate("blank_rate") == 1.0
    assert result.accumulator.output_tokens == 12 * 6  # the usage's tokens were generated
    timed = 12 if api in STREAMS_EMPTY_DELTAS else 0
    assert result.histogram("ttft").count == timed and result.histogram("e2e").count == 12
    assert all_blank_note(counts).startswith("all 12 completed replies were blank")
    # the event log replays the same: blank, and timed the same
    assert result.events_path is not None
    replayed = analyse_event_log(result.events_path)
    assert replayed.counts() == result.accumulator.counts()
    assert replayed.histograms["ttft"].count == timed and replayed.histograms["e2e"].count == 12


@pytest.mark.asyncio
@pytest.mark.parametrize("api", APIS)
async def test_blank_and_text_replies_mixed_are_each_counted_where_they_belong(api: str) -> None:
    async with SimServer("fixed", ttft_ms=1, itl_ms=0.5, blank_reply_rate=0.4, seed=3) as sim:
        endpoint = Endpoint.from_env(sim.url, api_key_env=None, model="sim-fixed", api=api)  # type: ignore[arg-type]
        result = await run_load(endpoint, _spec(40))
    counts = result.counts
    blank = counts["blank"]
    assert counts["completed"] == 40 and counts["failed"] == 0, result.errors
    assert 0 < blank < 40  # seeded: some of each
    assert result.rate("blank_rate") == blank / 40
    assert all_blank_note(counts) == ""
    # a blank reply without an event has no TTFT; every reply has its e2e
    timed = 40 if api in STREAMS_EMPTY_DELTAS else 40 - blank
    assert result.histogram("ttft").count == timed and result.histogram("e2e").count == 40


@pytest.mark.asyncio
async def test_live_progress_counts_the_blank_replies_beside_the_errors() -> None:
    async with SimServer("fixed", ttft_ms=1, itl_ms=0.5, blank_reply_rate=0.5, seed=1) as sim:
        endpoint = Endpoint.from_env(sim.url, api_key_env=None, model="sim-fixed", api="chat")
        run = LoadRun(endpoint, _spec(20), handle_sigint=False, label="run0")
        result = await run.execute()
    snapshot = ProgressSampler(run).sample()
    assert snapshot.done == 20 and snapshot.errors == 0
    assert snapshot.blank == result.counts["blank"] > 0


@pytest.mark.asyncio
@pytest.mark.parametrize("api", ["chat", "completions"])
async def test_a_sim_blank_reply_not_streamed_has_no_text_and_a_usage_that_counts_it(
    api: str,
) -> None:
    body: dict[str, Any] = {"model": "sim-fixed", "max_tokens": 5, "stream": False}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": "hi"}]
    else:
        body["prompt"] = "hi"
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=0.5, blank_reply_rate=1.0) as sim,
        httpx.AsyncClient(base_url=sim.url) as client,
    ):
        path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
        answer = (await client.post(path, json=body)).json()
    [choice] = answer["choices"]
    assert (choice["message"]["content"] if api == "chat" else choice["text"]) == ""
    assert answer["usage"]["completion_tokens"] == 5
