"""Fault injection over real sockets: errors, stalls, cuts, odd chunks — seeded."""

from __future__ import annotations

import asyncio
import itertools
import json

import httpcore
import httpx
import pytest

from pytest_llmperf.sim import SimServer
from pytest_llmperf.sim.faults import plan_faults
from pytest_llmperf.sim.profiles import load_profile
from pytest_llmperf.tokens import count_tokens

# A dropped connection surfaces as httpx's error while reading, or as httpcore's
# own when the drop is noticed while the response is being closed.
CUT_CONNECTION = (httpx.RemoteProtocolError, httpcore.RemoteProtocolError)

BODY = {
    "prompt": "tell me something",
    "max_tokens": 20,
    "stream": True,
    "stream_options": {"include_usage": True},
}


@pytest.mark.parametrize("code", [429, 500, 503])
@pytest.mark.asyncio
async def test_error_statuses(code: int) -> None:
    async with (
        SimServer("fixed", error_rate=1.0, error_codes=str(code), retry_after_s=3) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        r = await c.post("/v1/completions", json=BODY)
    assert r.status_code == code
    err = r.json()["error"]
    assert err["code"] == code and err["message"]
    if code == 429:
        assert r.headers["Retry-After"] == "3"


@pytest.mark.asyncio
async def test_error_rate_is_seeded_and_roughly_right() -> None:
    async def statuses(seed: int) -> list[int]:
        async with (
            SimServer(
                "fixed", seed=seed, ttft_ms=0, itl_ms=0, error_rate=0.3, error_codes="500,503"
            ) as sim,
            httpx.AsyncClient(base_url=sim.url) as c,
        ):
            out = []
            for _ in range(60):  # sequential: request index order is deterministic
                r = await c.post("/v1/completions", json={"prompt": "x", "max_tokens": 1})
                out.append(r.status_code)
            return out

    a, b, other = await statuses(1), await statuses(1), await statuses(2)
    assert a == b and a != other
    assert set(a) <= {200, 500, 503}
    assert 8 <= sum(s != 200 for s in a) <= 30


@pytest.mark.asyncio
async def test_cut_stream_ends_without_done() -> None:
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=1, cut_rate=1.0) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        seen: list[str] = []
        with pytest.raises(CUT_CONNECTION):
            async with c.stream("POST", "/v1/completions", json=BODY) as resp:
                async for line in resp.aiter_lines():
                    if line.startswith("data: "):
                        seen.append(line)
        assert 1 <= len(seen) < 20 and "data: [DONE]" not in seen
        # the server keeps serving after cutting a connection
        assert (await c.get("/health")).status_code == 200


@pytest.mark.asyncio
async def test_malformed_multi_token_and_keepalive_chunks(sse) -> None:
    async with (
        SimServer(
            "fixed",
            ttft_ms=1,
            itl_ms=1,
            malformed_rate=0.3,
            multi_token_rate=0.5,
            multi_token_max=3,
            keepalive_rate=0.3,
        ) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
        c.stream("POST", "/v1/completions", json=BODY) as resp,
    ):
        events = await sse.read(resp)
    comments = [e for e in events if e.startswith(":")]
    good, bad = [], 0
    for e in events:
        if e.startswith(":") or e == "[DONE]":
            continue
        try:
            good.append(json.loads(e))
        except json.JSONDecodeError:
            bad += 1
    assert comments and bad
    content = [g for g in good if g["choices"]]
    text = "".join(g["choices"][0]["text"] for g in content)
    assert len(content) < 20  # several tokens share chunks
    assert count_tokens(text) == 20 == good[-1]["usage"]["completion_tokens"]  # no token lost
    assert events[-1] == "[DONE]"


@pytest.mark.asyncio
async def test_stall_before_first_token_with_keepalives(sse) -> None:
    async with (
        SimServer(
            "fixed",
            ttft_ms=1,
            itl_ms=1,
            stall_first_prob=1.0,
            stall_first_ms=150,
            keepalive_interval_ms=40,
        ) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        first = None
        comments = 0
        async with c.stream("POST", "/v1/completions", json=BODY) as resp:
            async for line in resp.aiter_lines():
                if line.startswith(":"):
                    comments += 1
                if line.startswith("data: {") and first is None:
                    first = loop.time() - t0
    assert first is not None and first >= 0.150
    assert comments >= 2


@pytest.mark.asyncio
async def test_stall_mid_stream() -> None:
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=1, stall_mid_prob=1.0, stall_mid_ms=120) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        loop = asyncio.get_running_loop()
        stamps = []
        start = loop.time()
        async with c.stream("POST", "/v1/completions", json=BODY) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: {"):
                    stamps.append(loop.time())
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    # The server sleeps 120 ms between two tokens: the stream cannot end sooner. Where the
    # client reads each token is up to a busy machine (a late read of the token before the
    # stall shortens the gap seen), so the gap itself is asked to stand out, not to be whole.
    assert stamps[-1] - start >= 0.12
    assert max(gaps) >= 0.05
    assert sorted(gaps)[len(gaps) // 2] < max(gaps) / 4


def test_fault_plans_are_deterministic_per_request() -> None:
    p = load_profile("fixed", error_rate=0.2, cut_rate=0.2, stall_mid_prob=0.2, stall_mid_ms=5)
    plans = [plan_faults(p, seed=5, index=i, output_tokens=50) for i in range(200)]
    again = [plan_faults(p, seed=5, index=i, output_tokens=50) for i in range(200)]
    key = [(x.error_status, x.cut_at, x.stall_mid_at) for x in plans]
    assert key == [(x.error_status, x.cut_at, x.stall_mid_at) for x in again]
    assert 20 <= sum(x.error_status is not None for x in plans) <= 60
    assert all(1 <= x.cut_at < 50 for x in plans if x.cut_at is not None)
    clean = load_profile("fixed")
    assert not plan_faults(clean, 0, 0, 10).per_chunk
