"""The real-time server over real sockets: wire format, errors, disconnects."""

from __future__ import annotations

import asyncio
import itertools

import httpx
import pytest

from pytest_llmperf.sim import SimServer
from pytest_llmperf.tokens import count_tokens

pytestmark = pytest.mark.asyncio

MODEL = "sim-fixed"
PROMPT = "The quick brown fox, jumping over the lazy dog, said: hello!"


async def test_models_health_version() -> None:
    async with SimServer("fixed") as sim, httpx.AsyncClient(base_url=sim.url) as c:
        assert sim.url.startswith("http://127.0.0.1:")
        models = (await c.get("/v1/models")).json()
        assert models["object"] == "list"
        assert models["data"][0]["id"] == MODEL
        assert models["data"][0]["object"] == "model"
        assert models["data"][0]["owned_by"] == "pytest-llmperf-sim"
        assert (await c.get("/health")).status_code == 200
        assert "version" in (await c.get("/version")).json()


async def test_chat_stream_with_usage_matches_vllm_shape(sse) -> None:
    async with (
        SimServer("fixed", ttft_ms=5, itl_ms=1) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        body = {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": PROMPT},
            ],
            "max_tokens": 7,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        async with c.stream("POST", "/v1/chat/completions", json=body) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            events = await sse.read(resp)
    assert events[-1] == "[DONE]"
    chunks = sse.json(events)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(ch["object"] == "chat.completion.chunk" for ch in chunks)
    content = chunks[1:-1]
    assert len(content) == 7
    assert [ch["choices"][0]["finish_reason"] for ch in content] == [None] * 6 + ["length"]
    text = "".join(ch["choices"][0]["delta"]["content"] for ch in content)
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["completion_tokens"] == 7 == count_tokens(text)
    assert usage["prompt_tokens"] == count_tokens("Be brief.") + count_tokens(PROMPT)
    assert usage["total_tokens"] == usage["prompt_tokens"] + 7
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert len({ch["id"] for ch in chunks}) == 1


async def test_stream_without_include_usage_has_no_usage_chunk(sse) -> None:
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=1) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": PROMPT}],
            "max_completion_tokens": 3,
            "stream": True,
        }
        async with c.stream("POST", "/v1/chat/completions", json=body) as resp:
            chunks = sse.json(await sse.read(resp))
    assert len(chunks) == 4  # role + 3 tokens (max_completion_tokens honoured)
    assert all("usage" not in ch for ch in chunks)


async def test_completions_stream_and_full(sse) -> None:
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=1) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        body = {
            "model": MODEL,
            "prompt": PROMPT,
            "max_tokens": 5,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        async with c.stream("POST", "/v1/completions", json=body) as resp:
            events = await sse.read(resp)
        chunks = sse.json(events)
        assert events[-1] == "[DONE]"
        assert [ch["object"] for ch in chunks] == ["text_completion"] * 6
        texts = [ch["choices"][0]["text"] for ch in chunks[:-1]]
        assert len(texts) == 5 and all(count_tokens(t) == 1 for t in texts)
        assert chunks[-2]["choices"][0]["finish_reason"] == "length"
        assert chunks[-1]["usage"]["prompt_tokens"] == count_tokens(PROMPT)

        full = (
            await c.post(
                "/v1/completions", json={"model": MODEL, "prompt": PROMPT, "max_tokens": 4}
            )
        ).json()
        assert full["object"] == "text_completion"
        assert count_tokens(full["choices"][0]["text"]) == 4 == full["usage"]["completion_tokens"]
        assert full["choices"][0]["finish_reason"] == "length"


async def test_chat_non_streaming_and_default_length() -> None:
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=0, default_max_tokens=9) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        full = (
            await c.post(
                "/v1/chat/completions",
                json={"model": MODEL, "messages": [{"role": "user", "content": PROMPT}]},
            )
        ).json()
    assert full["object"] == "chat.completion"
    msg = full["choices"][0]["message"]
    assert msg["role"] == "assistant"
    assert count_tokens(msg["content"]) == 9 == full["usage"]["completion_tokens"]
    assert full["choices"][0]["finish_reason"] == "stop"  # no max_tokens: stopped "at EOS"


@pytest.mark.parametrize(
    ("path", "body", "status", "param"),
    [
        (
            "/v1/chat/completions",
            {"model": "nope", "messages": [{"role": "user", "content": "x"}]},
            404,
            "model",
        ),
        ("/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "messages"),
        (
            "/v1/chat/completions",
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": "many"},
            400,
            "max_tokens",
        ),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
        (
            "/v1/completions",
            {"model": MODEL, "prompt": "word " * 60, "max_tokens": 10},
            400,
            "max_tokens",
        ),
    ],
)
async def test_errors_are_openai_shaped(path: str, body: dict, status: int, param: str) -> None:
    async with (
        SimServer("fixed", max_model_len=64) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        resp = await c.post(path, json=body)
    assert resp.status_code == status
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["code"] == status and err["param"] == param and err["message"]


async def test_invalid_json_is_400() -> None:
    async with SimServer("fixed") as sim, httpx.AsyncClient(base_url=sim.url) as c:
        resp = await c.post("/v1/completions", content=b"{not json")
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == 400


async def test_fixed_profile_timing_is_as_configured() -> None:
    """TTFT 50 ms and ITL 10 ms: exact in the server's plan, and never early on the wire.

    The fixed back end plans each token's instant on arrival (arrival + TTFT + i * ITL, in
    absolute loop time), and the server records that plan: each token's planned instant
    (``emit_planned``) and each request's phases (``/metrics``, from the back end's served
    times). The client reads on the same loop clock, so the wire can be held to the plan
    structurally: no token arrives before its instant. How late a busy machine makes it
    (scheduling noise, up to ~180 ms) is a benchmark's figure (sim_token_timing.py), not a
    test's (tests/README.md, "The rule for timing assertions": structure)."""
    async with (
        SimServer("fixed", ttft_ms=50, itl_ms=10, record_emit_lag=True) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        loop = asyncio.get_running_loop()
        body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 11, "stream": True}
        t0 = loop.time()
        stamps = []
        async with c.stream("POST", "/v1/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: {"):
                    stamps.append(loop.time())
        text = (await c.get("/metrics")).text
        assert sim.sim is not None
        planned = list(sim.sim.emit_planned)
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    labels = f'{{engine="0",model_name="{MODEL}"}}'
    assert len(stamps) == len(planned) == 11
    # ITL: the planned instants are 10 ms apart exactly; absolute times, so a token written
    # late does not push the next one's instant (a relative sleep would add its lateness)
    gaps = [b - a for a, b in itertools.pairwise(planned)]
    assert gaps == pytest.approx([0.010] * 10, abs=1e-9), gaps
    # TTFT: the first instant is 50 ms after arrival (no queue in this back end), and the
    # decode phase 10 ITLs long, as the server's own phase histograms record them
    assert float(lines["vllm:request_queue_time_seconds_sum" + labels]) == 0
    assert float(lines["vllm:request_prefill_time_seconds_sum" + labels]) == pytest.approx(
        0.050, abs=1e-9
    )
    assert float(lines["vllm:request_decode_time_seconds_sum" + labels]) == pytest.approx(
        0.100, abs=1e-9
    )
    # arrival follows the client's send, so the plan starts at least 50 ms after it
    assert planned[0] >= t0 + 0.050, (planned[0] - t0) * 1000
    # the wire follows the plan: the client reads no token before its planned instant
    early = [(i, (p - s) * 1000) for i, (s, p) in enumerate(zip(stamps, planned, strict=True))]
    assert all(ms <= 0 for _, ms in early), early


async def test_server_side_emit_lag_is_recorded_and_never_early() -> None:
    async with (
        SimServer("fixed", ttft_ms=5, itl_ms=3, record_emit_lag=True) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):

        async def one() -> None:
            await c.post(
                "/v1/completions", json={"prompt": PROMPT, "max_tokens": 30, "stream": True}
            )

        await asyncio.gather(*(one() for _ in range(8)))
        lags = sorted(sim.emit_lags)
    assert len(lags) == 8 * 30  # one lag per token
    # The clock waits until each token's planned instant and writes it after: never early
    # (a coarse sleep that stopped short would be). How late is the scheduler's business on
    # a busy machine (its lower quartile went from ~0.01 to 2 ms with both cores loaded), so
    # the precision is a benchmark figure: benchmarks/sim_token_timing.py --timing spin.
    assert lags[0] >= 0, lags[:5]


async def test_client_disconnect_frees_the_request() -> None:
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=5) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 10_000, "stream": True}
        async with c.stream("POST", "/v1/completions", json=body) as resp:
            seen = 0
            async for line in resp.aiter_lines():
                seen += line.startswith("data: {")
                if seen == 3:
                    break
            assert sim.sim is not None and sim.sim.backend.stats().running == 1
        # The server notices the disconnect on its own schedule; poll for it.
        for _ in range(200):
            if sim.sim.backend.stats().running == 0:
                break
            await asyncio.sleep(0.01)
        assert sim.sim.backend.stats().running == 0


async def test_metrics_endpoint_counts_tokens() -> None:
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=1) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        await c.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 4, "stream": True})
        text = (await c.get("/metrics")).text
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    labels = f'{{engine="0",model_name="{MODEL}"}}'
    assert float(lines["vllm:generation_tokens_total" + labels]) == 4
    assert float(lines["vllm:prompt_tokens_total" + labels]) == count_tokens(PROMPT)
    assert float(lines["vllm:time_to_first_token_seconds_count" + labels]) == 1
    assert float(lines["vllm:inter_token_latency_seconds_count" + labels]) == 3
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
    ):
        assert name + labels in lines


async def test_speedup_scales_wall_clock_time() -> None:
    async with (
        SimServer("fixed", ttft_ms=2000, itl_ms=1000, speedup=20.0) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        r = await c.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 3})
        elapsed = loop.time() - t0
    assert r.json()["usage"]["completion_tokens"] == 3
    # (2000 + 2 * 1000) ms / 20 = 200 ms: never sooner (the plan is a lower bound); the
    # upper bound, 1 s, is a speed-up of at least 4 and leaves noise 800 ms
    assert 0.198 <= elapsed < 1.0, elapsed
