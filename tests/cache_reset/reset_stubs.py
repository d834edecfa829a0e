"""Stub HTTP servers (aiohttp, on 127.0.0.1, in a thread of the test process) shaped like
the servers whose cache resets are probed: real sockets, real status codes.

A plain module (not conftest) so test modules can import its helpers by a unique name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from loopback import ServeApp

Serve = ServeApp


HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


def proxy_without_reset(target: str) -> Any:
    """An aiohttp app that forwards every request to ``target`` (a simulator's root URL),
    streaming its answer back as it comes, except the cache-reset routes
    (``/reset_prefix_cache``, ``/flush_cache``), which answer 404: a server with a
    prefix cache and no reset, as vLLM is outside development mode."""
    from aiohttp import ClientSession, web

    upstream = web.AppKey("upstream", ClientSession)

    async def session(app: web.Application) -> AsyncIterator[None]:
        app[upstream] = ClientSession()
        yield
        await app[upstream].close()

    async def forward(request: web.Request) -> web.StreamResponse:
        if request.path in ("/reset_prefix_cache", "/flush_cache"):
            raise web.HTTPNotFound()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        async with request.app[upstream].request(
            request.method, target + request.path_qs, data=await request.read(), headers=headers
        ) as answer:
            response = web.StreamResponse(status=answer.status)
            if "Content-Type" in answer.headers:
                response.headers["Content-Type"] = answer.headers["Content-Type"]
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application()
    app.cleanup_ctx.append(session)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app
