"""vLLM's per-request ``metrics`` object, as the simulator sends it over HTTP.

vLLM with ``--enable-per-request-metrics`` adds the request's own timings to a
non-streamed body and to the final usage chunk of a stream (only that chunk, so
only with ``stream_options.include_usage``); the simulator does the same (profile
key ``per_request_metrics``, on by default), from its back end's own clock.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from pytest_llmperf.sim import SimServer, load_profile

pytestmark = pytest.mark.asyncio

KEYS = {
    "queue_time_ms",
    "time_to_first_token_ms",
    "generation_time_ms",
    "mean_itl_ms",
    "tokens_per_second",
}


def _body(stream: bool, usage: bool = True, max_tokens: int = 5) -> dict[str, Any]:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": "Tell me about harbours."}],
        "max_tokens": max_tokens,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": usage}
    return body


async def _stream(sim: SimServer, sse: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with (
        httpx.AsyncClient(base_url=sim.url) as c,
        c.stream("POST", "/v1/chat/completions", json=body) as resp,
    ):
        assert resp.status_code == 200
        chunks: list[dict[str, Any]] = sse.json(await sse.read(resp))
        return chunks


async def test_the_usage_chunk_carries_the_fixed_models_own_times(sse: Any) -> None:
    async with SimServer("fixed", ttft_ms=30, itl_ms=4) as sim:
        chunks = await _stream(sim, sse, _body(stream=True))
    assert all("metrics" not in ch for ch in chunks[:-1])  # never on a token chunk
    last = chunks[-1]
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 5
    m = last["metrics"]
    assert set(m) == KEYS
    # the fixed model schedules at arrival: no queue, the first token ttft_ms later
    assert m["queue_time_ms"] == 0.0
    assert m["time_to_first_token_ms"] == pytest.approx(30.0)
    assert m["generation_time_ms"] == pytest.approx(4 * 4.0)
    assert m["mean_itl_ms"] == pytest.approx(4.0)
    assert m["tokens_per_second"] == pytest.approx(5 / (30.0 + 16.0) * 1000)


async def test_the_engines_times_are_causal_and_within_what_the_client_saw(sse: Any) -> None:
    async with SimServer("tiny") as sim:
        t0 = time.monotonic()
        chunks = await _stream(sim, sse, _body(stream=True, max_tokens=8))
        seen_ms = (time.monotonic() - t0) * 1000
    m = chunks[-1]["metrics"]
    assert set(m) == KEYS
    assert all(m[k] >= 0 for k in KEYS)
    # the engine's clock: queued <= scheduled <= first <= last token, all inside the request
    assert m["queue_time_ms"] + m["time_to_first_token_ms"] + m["generation_time_ms"] <= seen_ms
    assert m["mean_itl_ms"] == pytest.approx(m["generation_time_ms"] / 7)
    # tiny: beta0 2000 us + 10 us per prompt token for the prefill step, at least
    assert m["time_to_first_token_ms"] >= 2.0


@pytest.mark.parametrize("profile", ["fixed", "tiny"])
async def test_a_non_streamed_body_carries_them(profile: str) -> None:
    async with SimServer(profile) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        r = await c.post("/v1/chat/completions", json=_body(stream=False))
        r.raise_for_status()
        completions = await c.post(
            "/v1/completions", json={"prompt": "Hello there", "max_tokens": 3}
        )
    assert set(r.json()["metrics"]) == KEYS
    assert set(completions.json()["metrics"]) == KEYS


async def test_one_token_has_no_mean_itl(sse: Any) -> None:
    async with SimServer("fixed", ttft_ms=5, itl_ms=1) as sim:
        chunks = await _stream(sim, sse, _body(stream=True, max_tokens=1))
    m = chunks[-1]["metrics"]
    assert "mean_itl_ms" not in m and m["generation_time_ms"] == 0.0


async def test_without_include_usage_there_is_no_chunk_to_carry_them(sse: Any) -> None:
    async with SimServer("fixed", ttft_ms=1, itl_ms=1) as sim:
        chunks = await _stream(sim, sse, _body(stream=True, usage=False))
    assert all("metrics" not in ch and "usage" not in ch for ch in chunks)


async def test_off_as_vllm_without_the_flag(sse: Any) -> None:
    assert load_profile("fixed").per_request_metrics is True  # on by default
    async with SimServer("fixed", ttft_ms=1, itl_ms=1, per_request_metrics=False) as sim:
        chunks = await _stream(sim, sse, _body(stream=True))
        async with httpx.AsyncClient(base_url=sim.url) as c:
            full = (await c.post("/v1/chat/completions", json=_body(stream=False))).json()
    assert "usage" in chunks[-1] and "metrics" not in chunks[-1]
    assert "usage" in full and "metrics" not in full
