"""``reset_prefix_cache`` against stub servers shaped like vLLM (development mode and not),
SGLang, a server that hangs and one that echoes the API key: real sockets, bounded calls,
what worked remembered per server."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest
from aiohttp import web
from reset_stubs import Serve

from pytest_llmperf.client.endpoint import Endpoint, normalize_base_url
from pytest_llmperf.server_metrics.cache_reset import (
    CacheReset,
    reset_prefix_cache,
    reset_prefix_cache_async,
)

SECRET = "sk-cache-reset-secret-0123456789"


class Recorder:
    """The calls a stub received, in order (``"POST /flush_cache"``), and their headers."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.auth: list[str | None] = []

    @web.middleware
    async def record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.calls.append(f"{request.method} {request.path}")
        self.auth.append(request.headers.get("Authorization"))
        response: web.StreamResponse = await handler(request)
        return response

    def app(self, *routes: web.RouteDef) -> web.Application:
        app = web.Application(middlewares=[self.record])
        app.add_routes(list(routes))
        return app


def endpoint(root: str, **kwargs: Any) -> Endpoint:
    return Endpoint(normalize_base_url(root), **kwargs)


def answers(*bodies: tuple[int, Any]) -> Any:
    """A handler answering each call with the next ``(status, body)`` (the last repeats);
    a dict body is JSON, a str text."""
    left = list(bodies)

    async def handler(_request: web.Request) -> web.Response:
        status, body = left.pop(0) if len(left) > 1 else left[0]
        if isinstance(body, dict):
            return web.json_response(body, status=status)
        return web.Response(status=status, text=body)

    return handler


def test_a_server_without_a_reset_says_so_once_and_is_not_asked_again(serve: Serve) -> None:
    seen = Recorder()
    ep = endpoint(serve(seen.app()))
    first = reset_prefix_cache(ep)
    assert not first.done and not first.remembered and first.how == ""
    assert first.why.startswith("the server has no cache reset (")
    assert "POST /reset_prefix_cache: 404, POST /flush_cache: 404" in first.why
    assert "VLLM_SERVER_DEV_MODE=1" in first.why  # what would give it one on vLLM
    assert seen.calls == ["POST /reset_prefix_cache", "POST /flush_cache"]
    again = reset_prefix_cache(ep)
    assert again == CacheReset(False, why=first.why, remembered=True, tries=0)
    assert len(seen.calls) == 2  # the next run asks nothing
    # no route tells nothing of a prefix cache (the simulator's fixed profile has none)
    assert first.to_dict() == {"done": False, "how": None, "why": first.why, "prefix_cache": None}
    assert first.text == f"prefix cache not reset: {first.why}"


def test_vllm_in_development_mode_is_reset_and_remembered(serve: Serve) -> None:
    seen = Recorder()
    route = web.post("/reset_prefix_cache", answers((200, {"success": True})))
    ep = endpoint(serve(seen.app(route)))
    done = reset_prefix_cache(ep)
    assert done == CacheReset(True, "POST /reset_prefix_cache", tries=1)
    assert done.to_dict() == {
        "done": True,
        "how": "POST /reset_prefix_cache",
        "why": None,
        "prefix_cache": True,
    }
    assert done.text == "prefix cache reset (POST /reset_prefix_cache)"
    again = reset_prefix_cache(ep)
    assert again.done and again.remembered and again.how == "POST /reset_prefix_cache"
    assert seen.calls == ["POST /reset_prefix_cache"] * 2  # asked each run: it works


def test_an_older_vllm_that_answers_an_empty_200_is_taken_as_reset(serve: Serve) -> None:
    route = web.post("/reset_prefix_cache", answers((200, "")))
    assert reset_prefix_cache(endpoint(serve(Recorder().app(route)))).done


def test_sglang_flush_is_retried_while_requests_hold_the_cache(serve: Serve) -> None:
    """SGLang answers 400 while requests run or wait ("the operation will not be
    performed"), 200 once idle; the reset waits twice at most."""
    seen = Recorder()
    busy = (
        400,
        "Cache flushed.\nPlease check backend logs for more details. (When there "
        "are running or waiting requests, the operation will not be performed.)\n",
    )
    route = web.post("/flush_cache", answers(busy, (200, "Cache flushed.\n")))
    ep = endpoint(serve(seen.app(route)))
    done = reset_prefix_cache(ep)
    assert done.done and done.how == "POST /flush_cache" and done.tries == 3
    assert seen.calls == ["POST /reset_prefix_cache", "POST /flush_cache", "POST /flush_cache"]
    reset_prefix_cache(ep)
    assert seen.calls[3:] == ["POST /flush_cache"]  # the route that worked, only


def test_vllm_refusing_while_blocks_are_held_is_said_and_asked_again(serve: Serve) -> None:
    seen = Recorder()
    route = web.post("/reset_prefix_cache", answers((200, {"success": False})))
    ep = endpoint(serve(seen.app(route)))
    refused = reset_prefix_cache(ep)
    assert not refused.done and refused.how == "POST /reset_prefix_cache"
    assert "cache is in use" in refused.why and "success=false 3 times" in refused.why
    assert seen.calls == ["POST /reset_prefix_cache"] * 3
    assert refused.to_dict()["prefix_cache"] is True  # a cache in use is a cache
    reset_prefix_cache(ep)
    assert len(seen.calls) == 6  # busy is not absent: asked again next run


def test_a_server_error_is_reported_and_not_remembered(serve: Serve) -> None:
    seen = Recorder()
    route = web.post("/reset_prefix_cache", answers((500, {"error": {"message": "boom"}})))
    ep = endpoint(serve(seen.app(route)))
    failed = reset_prefix_cache(ep)
    assert not failed.done and failed.why == "POST /reset_prefix_cache answered HTTP 500: boom"
    assert failed.tries == 1  # no retries: a reset is not worth a wait
    assert failed.prefix_cache is None  # an error says nothing of a cache
    reset_prefix_cache(ep)
    assert len(seen.calls) == 2


def test_a_hanging_server_costs_the_limit_once_and_is_not_asked_again(serve: Serve) -> None:
    seen = Recorder()

    async def hang(_request: web.Request) -> web.Response:
        await asyncio.sleep(60)
        return web.Response()

    ep = endpoint(serve(seen.app(web.post("/reset_prefix_cache", hang))))
    started = time.monotonic()
    hung = reset_prefix_cache(ep, timeout=1.0)
    took = time.monotonic() - started
    assert not hung.done and hung.how == "POST /reset_prefix_cache"
    assert "never answered" in hung.why and "not asked again" in hung.why
    assert 0.9 <= took < 8.0  # its limit, plus what a busy machine adds: never the 60 s
    started = time.monotonic()
    again = reset_prefix_cache(ep, timeout=1.0)
    assert again.remembered and again.tries == 0 and time.monotonic() - started < 1.0
    assert seen.calls == ["POST /reset_prefix_cache"]


def test_the_api_key_is_sent_and_never_appears_in_the_result(serve: Serve) -> None:
    seen = Recorder()
    body = {"error": {"message": f"Incorrect API key provided: {SECRET}"}}
    ep = endpoint(serve(seen.app(web.post("/reset_prefix_cache", answers((401, body))))))
    ep = Endpoint(ep.base_url, api_key=SECRET)
    refused = reset_prefix_cache(ep)
    assert seen.auth == [f"Bearer {SECRET}"]
    assert not refused.done and "HTTP 401" in refused.why
    assert SECRET not in json.dumps(refused.to_dict()) and SECRET not in refused.text
    again = reset_prefix_cache(ep)  # refused for good: not asked again
    assert again.remembered and SECRET not in again.why and len(seen.calls) == 1


def test_nothing_listening_is_reported_and_asked_again_next_run() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    ep = endpoint(f"http://127.0.0.1:{port}")
    down = reset_prefix_cache(ep)
    assert not down.done and down.how == "POST /reset_prefix_cache" and down.why
    assert reset_prefix_cache(ep).tries == 1  # a server that is down may come back


@pytest.mark.asyncio
async def test_from_a_coroutine_with_the_callers_client(serve: Serve) -> None:
    seen = Recorder()
    route = web.post("/reset_prefix_cache", answers((200, {"success": True})))
    ep = endpoint(serve(seen.app(route)))
    http = ep.client(max_connections=2)
    try:
        done = await reset_prefix_cache_async(ep, http=http)
        assert done.done and done.how == "POST /reset_prefix_cache"
        assert not http.is_closed  # lent, not closed
    finally:
        await http.aclose()
    # the synchronous call inside a running loop's thread works too (its own loop)
    assert reset_prefix_cache(ep).remembered
