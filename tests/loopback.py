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
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol, TypeVar


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
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = loop.create_future()

    async def main() -> None:
        srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        server.port = srv.sockets[0].getsockname()[1]
        ready.set()
        await stop
        srv.close()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError(f"{type(server).__name__} did not start")
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(stop.set_result, None)
        thread.join(10)
        loop.close()
