"""A router-like server on 127.0.0.1 for the affinity tests: it records each request's
headers and body, says which of its replicas served it, and hands out a session token.

Placement: a request carrying a token this server issued (in ``token_header``, or a
``Cookie`` with ``route=...``) goes to that token's replica; any other goes to the next
replica in turn (round robin) and gets a fresh token. The answer is a short chat stream
with the replica in ``replica_header`` and the token in ``token_header`` (or as a
``Set-Cookie`` when ``cookie`` is set).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

__all__ = ["RouterServer"]


class RouterServer:
    """``async with RouterServer() as srv: srv.url``; ``srv.seen`` lists ``(headers, body)``."""

    def __init__(
        self,
        *,
        replicas: int = 2,
        replica_header: str = "x-replica-id",
        token_header: str = "x-route-token",
        cookie: bool = False,
    ) -> None:
        self.replicas = replicas
        self.replica_header = replica_header
        self.token_header = token_header
        self.cookie = cookie
        self.seen: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.tokens: dict[str, int] = {}
        self._next = 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    def _place(self, headers: dict[str, str]) -> tuple[int, str]:
        if self.cookie:
            jar = dict(
                p.strip().split("=", 1) for p in headers.get("cookie", "").split(";") if "=" in p
            )
            token = jar.get("route", "")
        else:
            token = headers.get(self.token_header, "")
        if token in self.tokens:
            return self.tokens[token], token
        replica = self._next % self.replicas
        self._next += 1
        token = f"tok-{len(self.tokens)}"
        self.tokens[token] = replica
        return replica, token

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        body = await request.json()
        self.seen.append((headers, body))
        replica, token = self._place(headers)
        out = {self.replica_header: f"replica-{replica}"}
        if self.cookie:
            out["Set-Cookie"] = f"route={token}; Path=/; HttpOnly"
        else:
            out[self.token_header] = token
        response = web.StreamResponse(status=200, headers=out)
        response.content_type = "text/event-stream"
        await response.prepare(request)
        for piece, finish in (("Hi", None), (" there", "stop")):
            chunk = {
                "id": "x",
                "object": "chat.completion.chunk",
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": finish}],
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def __aenter__(self) -> RouterServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._generate)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
