"""Loopback servers that end keep-alive connections the ways real servers do.

A raw asyncio HTTP/1.1 server on 127.0.0.1, run on its own event loop in a
thread (``tests/loopback.py``), so its closes race with the client as a real
server's do, and a test can block the client's loop while a close reaches
the client's socket. Every answer is a well-formed streamed chat completion;
what varies is what happens to the connection after it (:class:`After`),
what the server announces (``Keep-Alive``), and what it does with the n-th
request of a connection (:class:`Action`, from ``script``).

The server counts what it forced, so a test can compare the client's
``connection_retries`` with it: ``refused`` is the requests it reset
unanswered (no response byte) — on a connection it had already condemned, or
because the script said so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from loopback import read_request, running_in_thread

__all__ = ["Action", "After", "ClosingServer", "serving"]

MODEL = "m"


class After(Enum):
    """What the server does with a connection once an answer is written."""

    KEEP = "keep"  # wait for the next request (closing once idle for idle_close_s, if set)
    CLOSE = "close"  # close it at once (FIN), whatever it announced
    # llama-server (cpp-httplib) after every streamed answer: FIN at once (shutdown
    # SHUT_WR), then read and discard what comes for 100 ms, then close
    SHUT_AND_DRAIN = "shut_and_drain"
    CONDEMN = "condemn"  # close it after hold_s; a request before then is reset unanswered
    RESET_IDLE = "reset_idle"  # reset it (RST, SO_LINGER 0) once idle for hold_s


class Action(Enum):
    """What the server does with one request."""

    ANSWER = "answer"
    RESET = "reset"  # RST before any response byte
    HEAD_THEN_CLOSE = "head_then_close"  # the whole response head, then FIN
    PARTIAL_HEAD_THEN_CLOSE = "partial_head_then_close"  # "HTTP/1.1 200 OK\r\nCont", FIN
    STALL = "stall"  # nothing, ever


def answer_all(connection: int, request: int) -> Action:
    return Action.ANSWER


@dataclass
class ClosingServer:
    """``with serving(ClosingServer(...)) as srv:`` serves on ``srv.url``.

    ``headers`` go on every response (``Keep-Alive: timeout=5, max=100`` to
    promise what the server does not keep). ``after`` is its policy after each
    answer; ``max_per_connection`` condemns a connection after that many
    answers, whatever ``after`` says. ``script(connection, request)`` (both
    1-based: the connection's order of arrival, the request's on it) says what
    to do with each request. ``refuse_delay_s`` is how long a condemned
    connection holds a request before resetting it. ``closed`` is set each
    time the server has shut a connection's socket (for a test to wait on
    without running the client's loop).
    """

    after: After = After.KEEP
    headers: dict[str, str] = field(default_factory=dict)
    hold_s: float = 30.0
    idle_close_s: float | None = None
    max_per_connection: int = 0
    script: Callable[[int, int], Action] = answer_all
    refuse_delay_s: float = 0.0
    tokens: int = 3
    token_gap_s: float = 0.0
    port: int = 0
    accepted: int = 0  # connections, /v1/models ones included
    used: int = 0  # connections that carried a completion request
    answered: int = 0  # complete answers written
    refused: int = 0  # requests reset unanswered
    closed: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        connection = self.accepted
        served = 0
        condemned = False
        wait: float | None = None  # how long the next request may take to come
        try:
            while True:
                try:
                    request = await asyncio.wait_for(read_request(reader), wait)
                except TimeoutError:  # idle past the limit: close, or reset
                    await self._close(writer, reset=self.after is After.RESET_IDLE)
                    return
                if request.method == "GET" and request.path.endswith("/models"):  # preflight
                    body = json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode()
                    writer.write(_whole(200, body))
                    continue
                if not request.path.endswith("/completions"):  # /tokenize, /metrics, ...
                    writer.write(_whole(404, b'{"error": {"message": "not found"}}'))
                    continue
                served += 1
                if served == 1:
                    self.used += 1
                action = Action.RESET if condemned else self.script(connection, served)
                if action is Action.RESET:
                    self.refused += 1
                    if self.refuse_delay_s:
                        await asyncio.sleep(self.refuse_delay_s)
                    await self._close(writer, reset=True)
                    return
                if action is Action.STALL:
                    await asyncio.Event().wait()
                if action is Action.HEAD_THEN_CLOSE:
                    writer.write(self._head())
                    await self._close(writer, reset=False)
                    return
                if action is Action.PARTIAL_HEAD_THEN_CLOSE:
                    writer.write(b"HTTP/1.1 200 OK\r\nCont")
                    await self._close(writer, reset=False)
                    return
                await self._answer(writer)
                self.answered += 1
                after = self.after
                if self.max_per_connection and served >= self.max_per_connection:
                    after = After.CONDEMN
                if after is After.CLOSE:
                    await self._close(writer, reset=False)
                    return
                if after is After.SHUT_AND_DRAIN:
                    await self._shut_and_drain(reader, writer)
                    return
                if after is After.CONDEMN:
                    condemned, wait = True, self.hold_s
                elif after is After.RESET_IDLE:
                    wait = self.hold_s
                else:
                    wait = self.idle_close_s
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            if not writer.transport.is_closing():
                writer.transport.abort()

    def _head(self) -> bytes:
        lines = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        lines.append("Transfer-Encoding: chunked")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def _answer(self, writer: asyncio.StreamWriter) -> None:
        def event(obj: object) -> bytes:
            data = b"data: %s\n\n" % (obj if isinstance(obj, bytes) else json.dumps(obj).encode())
            return b"%x\r\n%s\r\n" % (len(data), data)

        writer.write(self._head())
        for i in range(self.tokens):
            if self.token_gap_s:
                await writer.drain()
                await asyncio.sleep(self.token_gap_s)
            delta = {"content": f"t{i} "}
            writer.write(event({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}))
        usage = {"prompt_tokens": 1, "completion_tokens": self.tokens}
        finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
        writer.write(event({**finish, "usage": usage}) + event(b"[DONE]") + b"0\r\n\r\n")
        await writer.drain()

    async def _shut_and_drain(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """cpp-httplib's ``drain_and_close_socket``: a request that arrives in the drain is
        read and dropped unanswered (counted in ``refused``)."""
        writer.write_eof()
        discarded = False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.1):
                while await reader.read(1 << 16):
                    discarded = True
        self.refused += discarded
        await self._close(writer, reset=False)

    async def _close(self, writer: asyncio.StreamWriter, *, reset: bool) -> None:
        """FIN after what was written, or RST; ``closed`` is set once the socket is shut."""
        if reset:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        else:
            writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
        self.closed.set()


def _whole(status: int, body: bytes) -> bytes:
    return b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        status,
        len(body),
        body,
    )


@contextlib.contextmanager
def serving(server: ClosingServer) -> Iterator[ClosingServer]:
    """Serve ``server`` on an ephemeral port of 127.0.0.1 from a thread until exit."""
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            await server.handle(reader, writer)
        finally:
            handlers.discard(task)

    @contextlib.asynccontextmanager
    async def listening() -> AsyncIterator[None]:
        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        server.port = srv.sockets[0].getsockname()[1]
        try:
            yield
        finally:
            srv.close()
            await asyncio.sleep(0)  # a connection accepted just now: its handler starts
            for task in list(handlers):
                task.cancel()
            if handlers:
                await asyncio.wait(list(handlers), timeout=5)

    with running_in_thread(listening, "closing server"):
        yield server
