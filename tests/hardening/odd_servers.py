"""Small purpose-built misbehaving HTTP servers on 127.0.0.1 for the hardening tests.

A raw asyncio HTTP/1.1 server (no framework between the test and the bytes on
the wire), so a test can send exactly what a broken or hostile server sends:
a stall before the headers, a stream cut mid-way, garbage instead of HTTP, a
line that never ends. Each server is given one *behaviour*, a coroutine that
answers a parsed request by writing to the socket; ``GET /v1/models`` is
answered by the server itself unless the behaviour says otherwise.

Everything listens on 127.0.0.1 with an ephemeral port; nothing leaves the
machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from loopback import read_request, running_in_thread

__all__ = [
    "Behaviour",
    "OddServer",
    "Request",
    "Wire",
    "always",
    "chunk",
    "content_chunk",
    "error_body",
    "failing_first",
    "finish_chunk",
    "metrics_ok",
    "models_ok",
    "routed",
    "serve_in_thread",
    "sse_ok",
    "stalls_after_head",
    "streams_forever",
    "trickles",
    "word_tokenize",
]

MODEL = "odd-model"


@dataclass
class Request:
    """What the client sent: request line, headers (lower-case names), body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class Wire:
    """The response side of one connection, with HTTP/1.1 chunked-encoding helpers."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.keep_alive = True

    async def raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def head(
        self,
        status: int = 200,
        headers: dict[str, str] | None = None,
        *,
        reason: str = "X",
        chunked: bool = True,
    ) -> None:
        lines = [f"HTTP/1.1 {status} {reason}"]
        hdrs = {"Content-Type": "text/event-stream", **(headers or {})}
        if chunked:
            hdrs["Transfer-Encoding"] = "chunked"
        lines += [f"{k}: {v}" for k, v in hdrs.items()]
        await self.raw(("\r\n".join(lines) + "\r\n\r\n").encode())

    async def body_chunk(self, data: bytes) -> None:
        """One HTTP chunk (chunked transfer encoding)."""
        if data:
            await self.raw(b"%x\r\n%s\r\n" % (len(data), data))

    async def event(self, payload: str | dict[str, Any]) -> None:
        """One SSE ``data:`` event in its own HTTP chunk."""
        text = payload if isinstance(payload, str) else json.dumps(payload)
        await self.body_chunk(f"data: {text}\n\n".encode())

    async def end(self) -> None:
        """The terminating zero-length chunk: the response is complete."""
        await self.raw(b"0\r\n\r\n")

    async def whole(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        """A complete non-chunked response with Content-Length."""
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        hdrs["Content-Length"] = str(len(body))
        lines = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in hdrs.items())]
        await self.raw(("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    def cut(self) -> None:
        """Drop the connection now (no terminating chunk)."""
        self.keep_alive = False
        transport = self.writer.transport
        with contextlib.suppress(Exception):
            transport.abort()


Behaviour = Callable[[Request, Wire], Awaitable[None]]


def chunk(**fields: Any) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion.chunk", "model": MODEL, **fields}


def content_chunk(text: str) -> dict[str, Any]:
    return chunk(choices=[{"index": 0, "delta": {"content": text}, "finish_reason": None}])


def finish_chunk(tokens: int = 1) -> dict[str, Any]:
    return chunk(
        choices=[{"index": 0, "delta": {}, "finish_reason": "length"}],
        usage={"prompt_tokens": 4, "completion_tokens": tokens, "total_tokens": 4 + tokens},
    )


def error_body(message: str, kind: str = "server_error", code: int | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()


async def sse_ok(req: Request, wire: Wire, *, tokens: int = 3) -> None:
    """A well-behaved streaming answer: ``tokens`` content chunks, finish, usage, [DONE]."""
    await wire.head()
    for i in range(tokens):
        await wire.event(content_chunk(f"t{i} "))
    await wire.event(finish_chunk(tokens))
    await wire.event("[DONE]")
    await wire.end()


async def models_ok(req: Request, wire: Wire) -> None:
    """The model listing, as the server itself answers it unless told not to."""
    body = json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode()
    await wire.whole(200, body)


async def metrics_ok(req: Request, wire: Wire) -> None:
    """A small Prometheus page with vLLM's names."""
    text = b"# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total 3\n"
    await wire.whole(200, text, {"Content-Type": "text/plain; version=0.0.4"})


_WORD = re.compile(r"\S+")


async def word_tokenize(req: Request, wire: Wire) -> None:
    """vLLM's ``/tokenize`` shape, one token per whitespace-separated word (token strings
    show the space before a word), a chat's messages counted with 3 tokens of framing each."""
    body = req.json() or {}
    if "messages" in body:
        count = sum(3 + len(_WORD.findall(m.get("content", ""))) for m in body["messages"])
        answer: dict[str, Any] = {"count": count, "tokens": list(range(count))}
    else:
        text = body.get("prompt", "")
        strs = [
            (" " if m.start() and text[m.start() - 1] == " " else "") + m.group()
            for m in _WORD.finditer(text)
        ]
        answer = {"count": len(strs), "tokens": list(range(len(strs)))}
        answer["token_strs"] = strs if body.get("return_token_strs") else None
    await wire.whole(200, json.dumps(answer).encode())


async def streams_forever(req: Request, wire: Wire) -> None:
    """A 200 whose stream never ends, whatever ``max_tokens`` asked: an event every 10 ms."""
    await wire.head()
    while True:
        await wire.event(content_chunk("a"))
        await asyncio.sleep(0.01)


async def stalls_after_head(req: Request, wire: Wire) -> None:
    """Sends the response head, then nothing, never closing."""
    await wire.head()
    await asyncio.sleep(3600)


async def trickles(req: Request, wire: Wire) -> None:
    """Sends the head, then one byte of body a second, forever (never a whole event)."""
    await wire.head()
    while True:
        await wire.body_chunk(b"d")
        await asyncio.sleep(1.0)


def always(
    status: int, message: str = "Service Unavailable", headers: dict[str, str] | None = None
) -> Behaviour:
    """Every request answered ``status`` with an OpenAI error body saying ``message``."""

    async def behaviour(req: Request, wire: Wire) -> None:
        await wire.whole(status, error_body(message, "server_error", status), headers)

    return behaviour


def failing_first(
    times: int, fault: Behaviour, then: Behaviour, seen: list[float] | None = None
) -> Behaviour:
    """``fault`` for the first ``times`` requests, ``then`` for the rest; each request's
    arrival (``time.monotonic()``) is appended to ``seen`` when given."""
    count = 0

    async def behaviour(req: Request, wire: Wire) -> None:
        nonlocal count
        count += 1
        if seen is not None:
            seen.append(time.monotonic())
        await (fault if count <= times else then)(req, wire)

    return behaviour


def routed(routes: Mapping[str, Behaviour], default: Behaviour = sse_ok) -> Behaviour:
    """The behaviour of the first route whose path ends the request's path, else ``default``."""

    async def behaviour(req: Request, wire: Wire) -> None:
        path = req.path.split("?", 1)[0]
        for suffix, answer in routes.items():
            if path.endswith(suffix):
                await answer(req, wire)
                return
        await default(req, wire)

    return behaviour


@dataclass
class OddServer:
    """``async with OddServer(behaviour) as srv:`` serves on ``srv.url`` until exit.

    ``ssl_context`` makes it an HTTPS server. ``requests`` keeps every
    request seen (for header checks); ``accepted`` counts connections, and
    ``open_connections`` those not yet closed (for leak checks).
    """

    behaviour: Behaviour = sse_ok
    ssl_context: ssl.SSLContext | None = None
    models: bool = True
    keep_requests: bool = True
    greeting: bytes = b""  # sent on accept, then the connection is dropped (e.g. plain text to TLS)
    requests: list[Request] = field(default_factory=list)
    accepted: int = 0
    open_connections: int = 0
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    async def __aenter__(self) -> OddServer:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", 0, ssl=self.ssl_context, backlog=4096, limit=1 << 20
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=5)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.accepted += 1
        self.open_connections += 1
        wire = Wire(writer)
        try:
            if self.greeting:
                await wire.raw(self.greeting)
                wire.cut()
            while wire.keep_alive:
                req = await _read_request(reader)
                if req is None:
                    break
                if self.keep_requests:
                    self.requests.append(req)
                if self.models and req.method == "GET" and req.path.endswith("/models"):
                    body = json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode()
                    await wire.whole(200, body)
                    continue
                await self.behaviour(req, wire)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self.open_connections -= 1
            self._handlers.discard(task)
            with contextlib.suppress(Exception):
                writer.transport.abort()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        got = await read_request(reader)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    return Request(got.method, got.path, got.headers, got.body)


@contextlib.contextmanager
def serve_in_thread(server: OddServer) -> Iterator[OddServer]:
    """Run ``server`` on its own event loop in a thread (for pytest subprocesses to call)."""
    with running_in_thread(lambda: server, "odd server"):
        yield server
