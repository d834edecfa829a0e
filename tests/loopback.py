"""Serve a test's own asyncio server on 127.0.0.1 from a thread of the test process.

The server runs on its own event loop in a thread, so the code under test
(on the test's loop) talks to it over real loopback sockets; both share the
process's monotonic clock, so the server's receive and send times can be
compared with the client's to the nanosecond.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from aiohttp import web


class LoopbackServer(Protocol):
    port: int

    def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Awaitable[None]: ...


Server = TypeVar("Server", bound=LoopbackServer)
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.contextmanager
def serve(server: Server) -> Iterator[Server]:
    """Serve ``server.handle`` on an ephemeral port (set as ``server.port``) until exit."""

    @contextlib.asynccontextmanager
    async def listening() -> AsyncIterator[None]:
        srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        server.port = srv.sockets[0].getsockname()[1]
        try:
            yield
        finally:
            srv.close()

    with running_in_thread(listening, type(server).__name__):
        yield server


@contextlib.contextmanager
def running_in_thread(
    serving: Callable[[], contextlib.AbstractAsyncContextManager[Any]], name: str
) -> Iterator[None]:
    """Enter ``serving()`` on an event loop of its own in a daemon thread; leave it on exit."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = loop.create_future()

    async def main() -> None:
        async with serving():
            ready.set()
            await stop

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError(f"{name} did not start")
    try:
        yield
    finally:
        loop.call_soon_threadsafe(stop.set_result, None)
        thread.join(10)
        loop.close()


@dataclass(frozen=True)
class ReceivedRequest:
    """One HTTP/1.1 request as a test server read it; ``received_ns`` is when its head was
    read, on the monotonic clock the client under test also stamps with."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    received_ns: int


async def read_request(reader: asyncio.StreamReader) -> ReceivedRequest:
    """Read one request's head and its ``Content-Length`` body (``IncompleteReadError`` at
    the end of the connection)."""
    head = await reader.readuntil(b"\r\n\r\n")
    received = time.monotonic_ns()
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:] if ":" in line)
    }
    size = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(size) if size else b""
    return ReceivedRequest(method, path, headers, body, received)


ServeApp = Callable[["web.Application"], str]


@contextlib.contextmanager
def aiohttp_apps() -> Iterator[ServeApp]:
    """``serve(app)`` -> the root URL of an aiohttp ``app`` listening on a free port of
    127.0.0.1 (in a thread of the test process), until the block ends. A handler whose
    client went away is cancelled, as the simulator's are."""
    from aiohttp import web

    with contextlib.ExitStack() as stack:

        def start(app: web.Application) -> str:
            found: list[str] = []

            @contextlib.asynccontextmanager
            async def listening() -> AsyncIterator[None]:
                runner = web.AppRunner(
                    app, handler_cancellation=True, access_log=None, shutdown_timeout=0.2
                )
                await runner.setup()
                await web.TCPSite(runner, "127.0.0.1", 0).start()
                found.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
                try:
                    yield
                finally:
                    await runner.cleanup()

            stack.enter_context(running_in_thread(listening, "stub server"))
            return found[0]

        yield start
