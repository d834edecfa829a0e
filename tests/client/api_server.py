"""A loopback server for the typed-event APIs (Responses, Messages) and embeddings.

Each POST is answered by the test's ``reply(path, body)``: a :class:`Reply` of
status, content type and steps ``(delay_s, bytes)``, written as an HTTP/1.1
chunked body (a stream) or with a ``Content-Length`` (``whole=True``), or cut
before its end (``cut=True``: the connection is closed mid-body). The server
stamps ``time.monotonic_ns()`` just before each step goes to the socket, on the
client's clock (a thread of the test's process): the client cannot have read a
step before its stamp. ``strict`` names the fields each path takes; any other
is refused with HTTP 400 naming it, as strict servers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopback import ReceivedRequest, read_request, serve

__all__ = ["ApiServer", "Reply", "event", "serve"]


def event(obj: Any, name: str | None = None) -> bytes:
    """One SSE event with ``obj`` as JSON (a string as is), after an ``event:`` line of its
    ``type`` (or ``name``), as vLLM and llama.cpp send the typed-event APIs."""
    data = obj if isinstance(obj, str) else json.dumps(obj)
    kind = name or (obj.get("type") if isinstance(obj, dict) else None)
    head = f"event: {kind}\n" if kind else ""
    return f"{head}data: {data}\n\n".encode()


@dataclass
class Reply:
    steps: Sequence[tuple[float, bytes]] = ()
    status: int = 200
    content_type: str = "text/event-stream"
    whole: bool = False  # one Content-Length body (the steps joined), not a chunked stream
    cut: bool = False  # close the connection before the body's end


@dataclass
class ApiServer:
    reply: Callable[[str, dict[str, Any]], Reply]
    strict: Mapping[str, frozenset[str]] = field(default_factory=dict)
    requests: list[ReceivedRequest] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    stamps: list[list[int]] = field(default_factory=list)  # per POST: before each step
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                request = await read_request(reader)
                if request.method == "GET":
                    await _send_whole(writer, 200, {"object": "list", "data": [{"id": "m"}]})
                    continue
                self.requests.append(request)
                body = json.loads(request.body)
                self.bodies.append(body)
                allowed = next(
                    (v for k, v in self.strict.items() if request.path.endswith(k)), None
                )
                unknown = sorted(set(body) - allowed) if allowed is not None else []
                if unknown:
                    message = f"Unrecognized request argument supplied: {unknown[0]}"
                    error = {"error": {"message": message, "type": "invalid_request_error"}}
                    await _send_whole(writer, 400, error)
                    continue
                reply = self.reply(request.path, body)
                stamps: list[int] = []
                self.stamps.append(stamps)
                if reply.whole:
                    payload = b"".join(data for _, data in reply.steps)
                    size = len(payload) + (7 if reply.cut else 0)  # cut: promise more than sent
                    writer.write(
                        f"HTTP/1.1 {reply.status} X\r\nContent-Type: {reply.content_type}\r\n"
                        f"Content-Length: {size}\r\n\r\n".encode()
                    )
                    stamps.append(time.monotonic_ns())
                    writer.write(payload)
                    await writer.drain()
                    if reply.cut:
                        writer.close()
                        return
                    continue
                writer.write(
                    f"HTTP/1.1 {reply.status} X\r\nContent-Type: {reply.content_type}\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n".encode()
                )
                await writer.drain()
                for delay, data in reply.steps:
                    if delay:
                        await asyncio.sleep(delay)
                    stamps.append(time.monotonic_ns())
                    writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                    await writer.drain()
                if reply.cut:
                    writer.close()
                    return
                writer.write(b"0\r\n\r\n")
                await writer.drain()


async def _send_whole(writer: asyncio.StreamWriter, status: int, obj: Any) -> None:
    data = json.dumps(obj).encode()
    writer.write(
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    await writer.drain()
