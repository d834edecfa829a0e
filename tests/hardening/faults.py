"""Behaviours of misbehaving servers, one per row of docs/fault-matrix.md, and a sender.

Each behaviour is a coroutine ``(request, wire)`` for :class:`OddServer`.
:func:`send_one` sends one streaming request with the library's own client
(real sockets, no mocks) under short timeouts so the slow faults stay quick.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

from odd_servers import Request, Wire, content_chunk, error_body, finish_chunk

from pytest_llmperf.client.endpoint import Endpoint, Timeouts, normalize_base_url
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.workloads.base import Sample

__all__ = ["FAST", "send_one"]

# Short limits: a stall is detected in 0.4 s, a never-ending stream in 1.5 s.
FAST = Timeouts(connect=1.0, first_token=1.0, stall=0.4, total=1.5)
SAMPLE = Sample(index=0, prompt="hello", input_tokens=1, max_tokens=3)
FOREVER = 3600.0


@contextlib.contextmanager
def unanswered_port() -> Iterator[int]:
    """A port on 127.0.0.1 whose listener never accepts and whose backlog is full, so the next
    connection attempt's SYN goes unanswered (a connect timeout, with no traffic off-host)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        fillers = []
        try:
            for _ in range(8):  # fill the accept queue so the next connect hangs
                s = socket.socket()
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    s.connect(listener.getsockname())
                fillers.append(s)
            yield listener.getsockname()[1]
        finally:
            for s in fillers:
                s.close()


async def send_one(
    url: str, *, timeouts: Timeouts = FAST, api: str = "chat", api_key: str | None = None
) -> RequestRecord:
    endpoint = Endpoint(
        normalize_base_url(url), model="odd-model", api=api, timeouts=timeouts, api_key=api_key
    )
    async with StreamClient(endpoint) as http:
        record = RequestRecord(index=0, t_sched=0)
        return await send_request(http, endpoint, SAMPLE, record)


async def stall_before_headers(req: Request, wire: Wire) -> None:
    await asyncio.sleep(FOREVER)


async def stall_before_first_token(req: Request, wire: Wire) -> None:
    await wire.head()
    await asyncio.sleep(FOREVER)


async def stall_mid_stream(req: Request, wire: Wire) -> None:
    await wire.head()
    await wire.event(content_chunk("a"))
    await asyncio.sleep(FOREVER)


async def keepalives_only(req: Request, wire: Wire) -> None:
    """Comment lines forever: bytes keep coming, so only the first-token limit can end it."""
    await wire.head()
    while True:
        await wire.body_chunk(b": keep-alive\n\n")
        await asyncio.sleep(0.05)


async def never_ending(req: Request, wire: Wire) -> None:
    """Tokens forever, never a finish_reason: only the total limit can end it."""
    await wire.head()
    while True:
        await wire.event(content_chunk("a"))
        await asyncio.sleep(0.01)


async def cut_mid_stream(req: Request, wire: Wire) -> None:
    await wire.head()
    await wire.event(content_chunk("a"))
    wire.cut()


async def ends_without_finish(req: Request, wire: Wire) -> None:
    """A clean end of the HTTP body, but no finish_reason and no [DONE]."""
    await wire.head()
    await wire.event(content_chunk("a"))
    await wire.end()


async def hang_up_at_once(req: Request, wire: Wire) -> None:
    wire.cut()


async def not_http(req: Request, wire: Wire) -> None:
    await wire.raw(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    wire.cut()


async def malformed_json(req: Request, wire: Wire) -> None:
    await wire.head()
    await wire.event(content_chunk("a"))
    await wire.event('{"choices": [{"delta": {"content": "b"')
    await wire.end()


async def json_not_object(req: Request, wire: Wire) -> None:
    await wire.head()
    await wire.event("[1, 2, 3]")
    await wire.end()


async def error_frame_mid_stream(req: Request, wire: Wire) -> None:
    await wire.head()
    await wire.event(content_chunk("a"))
    await wire.event({"error": {"message": "CUDA out of memory", "type": "server_error"}})
    await wire.end()


async def empty_stream(req: Request, wire: Wire) -> None:
    await wire.head()
    await wire.event(finish_chunk(0))
    await wire.event("[DONE]")
    await wire.end()


async def status_429_retry_after(req: Request, wire: Wire) -> None:
    body = error_body("Rate limit reached", "rate_limit_error", 429)
    await wire.whole(429, body, {"Retry-After": "7"})


async def status_500_openai_body(req: Request, wire: Wire) -> None:
    await wire.whole(500, error_body("The engine is dead", "server_error"))


async def status_502_html(req: Request, wire: Wire) -> None:
    body = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    await wire.whole(502, body, {"Content-Type": "text/html"})


async def status_503_empty(req: Request, wire: Wire) -> None:
    await wire.whole(503, b"")


async def status_400_openai_body(req: Request, wire: Wire) -> None:
    await wire.whole(400, error_body("max_tokens is too large", "invalid_request_error"))


async def status_404_plain(req: Request, wire: Wire) -> None:
    await wire.whole(404, b"Not Found", {"Content-Type": "text/plain"})


async def redirect(req: Request, wire: Wire) -> None:
    await wire.whole(307, b"", {"Location": "http://127.0.0.1:9/v1/chat/completions"})


async def huge_chunk(req: Request, wire: Wire) -> None:
    """One legitimate 2 MB content delta: must be measured, not rejected."""
    await wire.head()
    await wire.event(content_chunk("x" * 2_000_000))
    await wire.event(finish_chunk(1))
    await wire.event("[DONE]")
    await wire.end()


async def endless_line(req: Request, wire: Wire) -> None:
    """``data: xxxx...`` that never ends its line: bounded by the first-token limit."""
    await wire.head()
    await wire.body_chunk(b"data: ")
    while True:
        await wire.body_chunk(b"x" * 65536)
        await asyncio.sleep(0.005)


async def wrong_shape_chunk(req: Request, wire: Wire) -> None:
    """Valid JSON, wrong shape: ``choices`` is not a list."""
    await wire.head()
    await wire.event({"choices": True})
    await wire.end()
