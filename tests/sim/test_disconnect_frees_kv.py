"""A cancelled request frees its KV blocks in the simulator's engine, end to end.

The load generator's client cancels long-output requests with big prompts
after 5 token events (``CancelAt(after_tokens=5)``) and closes their
connections; the simulator notices each disconnect and aborts the request in
its engine (server.py), which releases its KV blocks. Shown through
``GET /metrics`` (vLLM's gauges ``vllm:num_requests_running`` and
``vllm:kv_cache_usage_perc``) while an uncancelled request of the same shape
is still streaming: the engine went back to holding that one request's blocks,
long before the cancelled requests could have finished generating.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

import httpx
import pytest

from pytest_llmperf.client import Endpoint, RequestRecord, send_request
from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.sim import SimServer
from pytest_llmperf.sim.realtime import EngineBackend
from pytest_llmperf.workloads import Sample

pytestmark = pytest.mark.asyncio

PROMPT_TOKENS = 1000
MAX_TOKENS = 6000  # at the tiny profile's ~2 ms decode steps: some 12 s of generation
CANCELLED = 4
BLOCK_SIZE = 16
NUM_BLOCKS = 1024
PROMPT_BLOCKS = math.ceil(PROMPT_TOKENS / BLOCK_SIZE)  # 63 blocks held by each running request


def _gauges(text: str) -> tuple[float, float]:
    """``(num_requests_running, kv_cache_usage_perc)`` from a /metrics page."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0]
        if name in ("vllm:num_requests_running", "vllm:kv_cache_usage_perc"):
            found[name] = float(line.rsplit(" ", 1)[1])
    return found["vllm:num_requests_running"], found["vllm:kv_cache_usage_perc"]


def _sample(index: int) -> Sample:
    # a distinct first word per request: no prefix-cache block is shared between them
    words = " ".join(f"w{i}" for i in range(PROMPT_TOKENS - 1))
    return Sample(
        index=index, prompt=f"r{index} {words}", input_tokens=PROMPT_TOKENS, max_tokens=MAX_TOKENS
    )


async def _poll_metrics(
    c: httpx.AsyncClient, until: Callable[[float, float], bool], what: str, deadline_s: float
) -> tuple[float, float, float]:
    """Poll /metrics until ``until(running, kv_usage)``; returns them and the seconds taken."""
    start = time.monotonic()
    while True:
        running, kv = _gauges((await c.get("/metrics")).text)
        if until(running, kv):
            return running, kv, time.monotonic() - start
        if time.monotonic() - start > deadline_s:
            raise AssertionError(f"{what}: not within {deadline_s} s (running {running}, kv {kv})")
        await asyncio.sleep(0.01)


async def test_cancelled_requests_free_their_kv_blocks_while_others_still_run() -> None:
    async with (
        SimServer("tiny", block_size=BLOCK_SIZE, num_blocks=NUM_BLOCKS, max_model_len=8192) as sim,
        httpx.AsyncClient(base_url=sim.url, timeout=10) as metrics,
    ):
        assert sim.sim is not None and isinstance(sim.sim.backend, EngineBackend)
        engine = sim.sim.backend.engine
        endpoint = Endpoint.from_env(sim.url, api_key_env=None, model="sim-tiny", api="completions")
        assert _gauges((await metrics.get("/metrics")).text) == (0.0, 0.0)  # idle

        async with StreamClient(endpoint) as http:

            async def request(index: int, cancel: CancelAt | None) -> RequestRecord:
                record = RequestRecord(index=index, t_sched=time.monotonic_ns())
                return await send_request(http, endpoint, _sample(index), record, cancel=cancel)

            # One uncancelled request of the same shape, streaming throughout.
            control_record = RequestRecord(index=0, t_sched=time.monotonic_ns())
            control = asyncio.create_task(send_request(http, endpoint, _sample(0), control_record))
            _, alone, _ = await _poll_metrics(
                metrics, lambda run, kv: run == 1 and kv > 0, "the control request runs", 10
            )
            assert alone * NUM_BLOCKS >= PROMPT_BLOCKS

            cancelled = await asyncio.gather(
                *(request(i, CancelAt(after_tokens=5)) for i in range(1, CANCELLED + 1))
            )
            for record in cancelled:
                assert record.cancelled and record.error is None, record.error_detail
                assert record.token_events == 5  # each ran in the engine, holding its prompt

            # The engine lets go of them as their connections close: back to the control's
            # blocks alone, fewer than two requests' prompts (five held at least five).
            _, kv, waited_s = await _poll_metrics(
                metrics,
                lambda run, kv: run == 1 and kv * NUM_BLOCKS < 2 * PROMPT_BLOCKS,
                "the cancelled requests leave the engine",
                5,
            )
            assert not control.done() and control_record.error is None
            assert kv * NUM_BLOCKS >= PROMPT_BLOCKS  # the control's blocks are still held
            assert engine.aborted == CANCELLED  # aborted on disconnect, not finished
            # ... long before an uncancelled one could have finished its generation
            itl_s = (
                (control_record.t_last - control_record.t_first)
                / 1e9
                / max(1, control_record.token_events - 1)
            )
            assert waited_s < (MAX_TOKENS - 5) * itl_s / 4, (waited_s, itl_s)

            control.cancel()  # the control goes away too: its connection closes
            await asyncio.gather(control, return_exceptions=True)
            await _poll_metrics(
                metrics, lambda run, kv: run == 0 and kv == 0, "the engine is idle again", 5
            )
        assert engine.aborted == CANCELLED + 1
        assert engine.kv.allocated == 0 and not engine.has_work
