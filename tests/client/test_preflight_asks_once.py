"""Each question asked once: before the first run a server is asked ``GET /v1/models``,
``GET /version`` and ``GET /metrics`` one time each, however many readers want the answers
(the preflight, the identity, the metrics source, the fingerprint, the tokenizer discovery).

The server is real (aiohttp on 127.0.0.1, in a thread of the test process), shaped like
vLLM (its model card, ``/version``, a ``/metrics`` page with ``vllm:`` names, a streaming
chat endpoint) and counts every request it receives, in order.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from loopback import aiohttp_apps

from pytest_llmperf.client.preflight import preflight_server_sync
from pytest_llmperf.client.preflight_result import PreflightResult
from pytest_llmperf.options import LlmPerfOptions
from pytest_llmperf.plugin.endpoints import EndpointPool
from pytest_llmperf.reports.server_identity import server_identity

ASKED_ONCE = ("GET /v1/models", "GET /version", "GET /metrics")
RUN_STARTS = ("POST /reset_prefix_cache", "POST /v1/chat/completions")
METRICS = (
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{engine="0",model_name="counted"} 0.0\n'
    "# TYPE vllm:cache_config_info gauge\n"
    'vllm:cache_config_info{block_size="16",enable_prefix_caching="True",engine="0"} 1.0\n'
)


class CountingServer:
    """Every request in order (``"GET /version"``; a chat request as ``"POST
    /v1/chat/completions probe"`` when it is the preflight's field probe)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @web.middleware
    async def unknown(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Calls this server does not serve (``/tokenize``, a cache reset) are counted too."""
        if request.match_info.route.resource is None:
            self.seen.append(f"{request.method} {request.path}")
        response: web.StreamResponse = await handler(request)
        return response

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.unknown])
        app.add_routes(
            [
                web.get("/v1/models", self.models),
                web.get("/version", self.version),
                web.get("/metrics", self.metrics),
                web.post("/v1/chat/completions", self.chat),
            ]
        )
        return app

    def before_first_run(self) -> Counter[str]:
        """How often each call came before the first run began: its prefix-cache reset (the
        gate's first step of a run; the sampler's first scrape follows) or first request."""
        runs = [i for i, s in enumerate(self.seen) if s in RUN_STARTS]
        return Counter(self.seen[: runs[0]] if runs else self.seen)

    async def models(self, request: web.Request) -> web.Response:
        self.seen.append("GET /v1/models")
        card = {"id": "counted", "object": "model", "owned_by": "vllm", "max_model_len": 4096}
        return web.json_response({"object": "list", "data": [card]}, headers=_SERVER)

    async def version(self, request: web.Request) -> web.Response:
        self.seen.append("GET /version")
        return web.json_response({"version": "0.32.0"}, headers=_SERVER)

    async def metrics(self, request: web.Request) -> web.Response:
        self.seen.append("GET /metrics")
        return web.Response(text=METRICS, content_type="text/plain", headers=_SERVER)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        probe = body["messages"][-1]["content"] == "Say hello."
        self.seen.append("POST /v1/chat/completions" + (" probe" if probe else ""))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **_SERVER})
        await response.prepare(request)
        tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 1)
        await response.write(_event(_chunk({"role": "assistant", "content": ""})))
        for i in range(tokens):
            await response.write(_event(_chunk({"content": f"w{i} "})))
        await response.write(_event(_chunk({}, finish="length")))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": 3 + tokens}
            await response.write(_event({"id": "x", "choices": [], "usage": usage}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


_SERVER = {"Server": "counting-vllm"}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "x", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": "counted", "choices": [choice]}  # fmt: skip


def _event(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


@pytest.fixture
def counting() -> Iterator[tuple[CountingServer, str]]:
    server = CountingServer()
    with aiohttp_apps() as serve:
        yield server, serve(server.app())


def _options(**raw: str) -> LlmPerfOptions:
    return LlmPerfOptions.resolve(lambda o: raw.get(o.dest))


@pytest.mark.filterwarnings("ignore::UserWarning")  # the tokenizer falls back: no /tokenize
@pytest.mark.parametrize("model", ["", "counted"])
@pytest.mark.parametrize("metrics", ["auto", "off"])
def test_the_pool_asks_each_path_once_per_endpoint(
    counting: tuple[CountingServer, str], model: str, metrics: str
) -> None:
    server, url = counting
    pool = EndpointPool(_options(llm_endpoint=url, llm_model=model, llm_server_metrics=metrics))
    try:
        endpoint = pool.default()
        identity = pool.identity(endpoint)
    finally:
        pool.close()
    asked = Counter(server.seen)
    once = {path: asked[path] for path in ASKED_ONCE}
    assert once == dict.fromkeys(ASKED_ONCE, 1), repr(server.seen)
    # ... and every reader got its answer from that one asking
    assert endpoint.model == "counted"
    assert identity["server_version"] == "0.32.0"
    assert identity["server_software"] == "counting-vllm"
    fingerprint = identity["fingerprint"]
    assert fingerprint["server"]["family"] == "vllm"
    assert fingerprint["model"]["max_model_len"] == 4096  # the listing's body, model named too
    assert fingerprint["engine"]["cache_config"]["block_size"] == "16"  # /metrics, read once
    assert identity["server_metrics"] == (
        "off" if metrics == "off" else f"vllm at {url}/metrics every 1 s"
    )
    assert (pool.metrics_source(endpoint) is None) == (metrics == "off")


def test_the_preflight_result_holds_each_answer(counting: tuple[CountingServer, str]) -> None:
    from pytest_llmperf.client.endpoint import Endpoint

    server, url = counting
    got = preflight_server_sync(Endpoint(url + "/v1", model="counted"), metrics=True)
    assert isinstance(got, PreflightResult)
    assert got.models.status == 200 and got.models.json()["data"][0]["id"] == "counted"
    assert got.models.complete  # the head settled it; the body came along
    assert set(got.answered()) == set(ASKED_ONCE)
    assert server_identity(got) == {"server_version": "0.32.0", "server_software": "counting-vllm"}
    assert Counter(server.seen)["GET /version"] == 1


SESSION = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=3, requests=3, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=1)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_measured(llm_loadgen):
    await llm_loadgen.run()
"""


def test_a_session_asks_each_path_once_before_the_first_run(
    counting: tuple[CountingServer, str], pytester: pytest.Pytester
) -> None:
    server, url = counting
    pytester.makepyfile(SESSION)
    result = pytester.runpytest(f"--llm-endpoint={url}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    before = server.before_first_run()
    once = {path: before[path] for path in ASKED_ONCE}
    assert once == dict.fromkeys(ASKED_ONCE, 1), repr(server.seen)
    assert server.seen.count("POST /v1/chat/completions") == 3  # the run itself
    assert server.seen.count("POST /v1/chat/completions probe") == 1  # the field probe


def test_a_listing_that_stalls_after_its_head_still_settles_the_check() -> None:
    """``Read.HEAD_THEN_BODY``: the head settles the call (as ``Read.HEAD`` did for the
    preflight with ``--llm-model``); the body is kept as far as it came in time."""
    from pytest_llmperf.client.endpoint import Endpoint, Timeouts
    from pytest_llmperf.client.metadata import MetadataClient, Read

    async def models(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"object": "list", "da')
        await asyncio.sleep(30)
        return response

    async def ask(url: str) -> Any:
        endpoint = Endpoint(url + "/v1", model="m", timeouts=Timeouts.from_seconds(1))
        async with MetadataClient(endpoint) as meta:
            return await meta.call(
                "GET", meta.url("/models"), read=Read.HEAD_THEN_BODY, retry=False
            )

    app = web.Application()
    app.add_routes([web.get("/v1/models", models)])
    with aiohttp_apps() as serve:
        answer = asyncio.run(ask(serve(app)))
    assert answer.status == 200 and not answer.complete
    assert answer.body == b'{"object": "list", "da'
