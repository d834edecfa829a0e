"""``POST /v1/embeddings`` over real sockets: deterministic unit vectors, usage by the
simulator's tokenizer, latency through the back end's prefill model, errors."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import struct
from typing import Any

import httpx
import pytest

from pytest_llmperf.sim import SimServer
from pytest_llmperf.tokens import count_tokens

pytestmark = pytest.mark.asyncio

TEXTS = ["The first passage to index.", "A second, different one!", "third"]


async def post(c: httpx.AsyncClient, **payload: Any) -> httpx.Response:
    payload.setdefault("encoding_format", "float")
    return await c.post("/v1/embeddings", json=payload, headers={"Accept": "application/json"})


async def test_one_unit_vector_per_input_and_usage() -> None:
    async with SimServer("fixed", ttft_ms=1) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        resp = await post(c, model="sim-fixed", input=TEXTS)
        again = await post(c, input=[TEXTS[1]])
        single = await post(c, input=TEXTS[2])
    assert resp.status_code == 200
    answer = resp.json()
    assert answer["object"] == "list" and answer["model"] == "sim-fixed"
    assert [d["index"] for d in answer["data"]] == [0, 1, 2]
    vectors = [d["embedding"] for d in answer["data"]]
    assert all(len(v) == 384 for v in vectors)
    assert all(math.isclose(math.hypot(*v), 1.0) for v in vectors)
    assert len({tuple(v) for v in vectors}) == 3  # another input, another vector
    assert again.json()["data"][0]["embedding"] == vectors[1]  # same input, same vector
    assert single.json()["data"][0]["embedding"] == vectors[2]
    total = sum(map(count_tokens, TEXTS))
    assert answer["usage"] == {"prompt_tokens": total, "total_tokens": total}


async def test_token_ids_base64_and_dimensions() -> None:
    async with (
        SimServer("fixed", ttft_ms=1, embedding_dim=16) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        ids = await post(c, input=[[1, 2, 3], [4, 5]])
        floats = await post(c, input=TEXTS)
        packed = await post(c, input=TEXTS, encoding_format="base64")
        short = await post(c, input=TEXTS, dimensions=4)
    assert ids.json()["usage"]["prompt_tokens"] == 5
    assert len(ids.json()["data"]) == 2
    for f, b in zip(floats.json()["data"], packed.json()["data"], strict=True):
        raw = base64.b64decode(b["embedding"])
        decoded = struct.unpack(f"<{len(raw) // 4}f", raw)
        assert len(decoded) == 16
        assert all(
            math.isclose(x, y, abs_tol=1e-6) for x, y in zip(decoded, f["embedding"], strict=True)
        )
    vectors = [d["embedding"] for d in short.json()["data"]]
    assert all(len(v) == 4 and math.isclose(math.hypot(*v), 1.0) for v in vectors)


async def test_errors() -> None:
    async with (
        SimServer("fixed", ttft_ms=1, max_model_len=50) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        missing = await c.post("/v1/embeddings", json={"model": "sim-fixed"})
        empty = await post(c, input=[])
        mixed = await post(c, input=["ok", 3.5])
        fmt = await post(c, input="x", encoding_format="int8")
        dims = await post(c, input="x", dimensions=10_000)
        long = await post(c, input=["short", "word " * 60])
        model = await post(c, input="x", model="other")
    for resp, param in [
        (missing, "input"),
        (empty, "input"),
        (mixed, "input"),
        (fmt, "encoding_format"),
        (dims, "dimensions"),
        (long, "input"),
    ]:
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"]["param"] == param
    assert "maximum context length is 50 tokens" in long.json()["error"]["message"]
    assert model.status_code == 404


async def test_strict_profile_and_injected_errors() -> None:
    async with (
        SimServer("fixed", ttft_ms=1, strict_fields=True) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        refused = await post(c, input="x", truncate_prompt_tokens=5)
        ok = await post(c, input="x", dimensions=8, user="me")
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "Unrecognized request argument supplied: truncate_prompt_tokens"
    )
    assert ok.status_code == 200
    async with (
        SimServer("fixed", ttft_ms=1, error_rate=1.0, error_codes=[500]) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        failed = await post(c, input="x")
    assert failed.status_code == 500
    assert failed.json()["error"]["message"] == "Internal server error (simulated)."


async def _timed(c: httpx.AsyncClient, inputs: list[str]) -> float:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    resp = await post(c, input=inputs)
    elapsed = loop.time() - t0
    assert resp.status_code == 200
    return elapsed


async def test_fixed_latency_is_ttft() -> None:
    async with SimServer("fixed", ttft_ms=40) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        await _timed(c, ["warm up the connection"])
        elapsed = await _timed(c, TEXTS)
    assert elapsed >= 0.040  # the server's wait; what a busy machine adds is no verdict


async def test_engine_latency_follows_the_prefill_model() -> None:
    """On an engine profile the inputs are prefill work: 8 inputs of 1,000 tokens take
    8,000 prefill tokens through a 1,024-token step budget — at least 8 steps of
    β0 + β1·1024 (2 ms + 10.24 ms) — where 8 one-word inputs take one short step."""
    long = " ".join(f"w{i}" for i in range(1000))
    async with (
        SimServer("tiny", num_blocks=1024, max_model_len=4096) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        await _timed(c, ["warm up the connection"])
        short_s = await _timed(c, ["hello"] * 8)
        long_s = await _timed(c, [long + f" {k}" for k in range(8)])
    # lower bounds only: the model's steps are the server's to wait; noise only adds
    assert short_s >= 0.002  # one step
    assert long_s >= 8 * (0.002 + 1024 * 10e-6) * 0.95


SLOWER = 0.1  # the engine's clock at a tenth of real time


async def test_embeddings_queue_behind_other_work() -> None:
    """Embeddings share the engine: behind four 3,500-token chat prefills already in the
    engine (their response headers are out: they were submitted), a 4 x 900-token
    embeddings request waits for step budget.

    Lower bounds only (noise only adds): alone, its 3,600 tokens take 7 full steps of
    β0 + β1·512 (2 ms + 5.12 ms) and a short eighth, so at least 7 x 7.12 = 50 ms (the
    eighth step's 16 tokens take 2.2 ms, which the simulator's 10x slower clock makes
    larger than the network time that once hid it); behind the chats' 14,000 tokens (28 steps, 199
    ms) it must take at least 100 ms more, so long as it arrives within the chats' first
    99 ms. The simulator runs 10x slower (``speedup=0.1``) so that is the first 0.99 s:
    a client held up by a busy machine (~180 ms at worst) still sends it in time, where
    at full speed a stall of a few tens of ms let the chats' prefill end before it came."""
    inputs = [" ".join(f"e{k}x{i}" for i in range(900)) for k in range(4)]
    async with (
        SimServer(
            "tiny",
            num_blocks=2048,
            max_model_len=4096,
            max_num_batched_tokens=512,
            speedup=SLOWER,
        ) as sim,
        httpx.AsyncClient(base_url=sim.url, timeout=30) as c,
    ):
        await _timed(c, ["warm up the connection"])
        alone = await _timed(c, inputs)
        async with contextlib.AsyncExitStack() as stack:
            for k in range(4):
                prompt = " ".join(f"c{k}x{i}" for i in range(3500))
                payload = {"prompt": prompt, "max_tokens": 20, "stream": True, "ignore_eos": True}
                await stack.enter_async_context(c.stream("POST", "/v1/completions", json=payload))
            loaded = await _timed(c, [text + " again" for text in inputs])
    step_s = (0.002 + 512 * 10e-6) / SLOWER  # in wall time
    assert alone >= 7 * step_s * 0.95, alone
    assert loaded >= (7 * step_s + 0.100 / SLOWER) * 0.95, (alone, loaded)
