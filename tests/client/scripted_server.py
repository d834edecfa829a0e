"""A real HTTP server on 127.0.0.1 that replays a script of bytes, for odd-server tests.

Each script step is ``(delay_s, bytes)``: wait, then write those bytes to the
socket, so tests control exactly how a response is split across reads and
when each piece arrives. ``close_early`` drops the connection after the
script without finishing the chunked body (a cut stream).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["Script", "ScriptedServer", "chat_chunk", "sse"]


def sse(obj: Any) -> bytes:
    """One SSE event carrying ``obj`` as JSON (or a raw string such as ``[DONE]``)."""
    data = obj if isinstance(obj, str) else json.dumps(obj)
    return f"data: {data}\n\n".encode()


def chat_chunk(
    content: str | None = None,
    *,
    role: str | None = None,
    finish: str | None = None,
    usage: dict | None = None,
    choices: bool = True,
) -> bytes:
    delta: dict[str, Any] = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    obj: dict[str, Any] = {"id": "x", "object": "chat.completion.chunk", "model": "m"}
    obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []
    if usage is not None:
        obj["usage"] = usage
    return sse(obj)


@dataclass
class Script:
    steps: Sequence[tuple[float, bytes]] = ()
    status: int = 200
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    close_early: bool = False


class ScriptedServer:
    """``async with ScriptedServer(script) as srv: srv.url`` — every POST replays ``script``."""

    def __init__(self, script: Script, models: Sequence[str] = ("m",)) -> None:
        self.script = script
        self.models = list(models)
        self.requests: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _models(self, request: web.Request) -> web.Response:
        self.headers_seen.append(dict(request.headers))
        return web.json_response({"object": "list", "data": [{"id": m} for m in self.models]})

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        self.headers_seen.append(dict(request.headers))
        self.requests.append(await request.json())
        script = self.script
        response = web.StreamResponse(status=script.status, headers=script.headers)
        response.content_type = script.content_type
        await response.prepare(request)
        for delay, data in script.steps:
            if delay:
                await asyncio.sleep(delay)
            await response.write(data)
        if script.close_early:
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write_eof()
        return response

    async def __aenter__(self) -> ScriptedServer:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_post("/v1/completions", self._generate)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
