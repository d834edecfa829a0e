"""One HTTP/1.1 connection of the load generator, as an ``asyncio.Protocol``.

Why not a general HTTP client here: a load generator reads tens of thousands
of small streamed chunks a second, and the time a chunk arrives must be taken
where its bytes are read. In ``data_received`` the bytes have just left the
socket, so the timestamp is taken there, once per read, and the body is
handed on synchronously — no coroutine resumes per chunk, no stream objects,
no header models. Measured against the httpx-on-aiohttp stack this replaced,
the client's CPU per streamed request fell by about two thirds
(``benchmarks/loadgen_throughput.py``). Metadata calls (``GET /v1/models``,
``/metrics``) and the ``llm_endpoint.client()`` fixture keep httpx.

What the parser accepts is what OpenAI-compatible servers send: a status
line and headers, then a body framed by ``Transfer-Encoding: chunked``,
``Content-Length``, or the end of the connection; interim ``1xx`` heads are
skipped. Anything else is a :data:`~pytest_llmperf.client.records.ErrorKind.PROTOCOL`
failure of that request, never an exception out of the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from pytest_llmperf.client.records import ErrorKind

__all__ = ["MAX_HEAD_BYTES", "Http1Connection", "ResponseSink", "request_prefix"]

MAX_HEAD_BYTES = 64 * 1024  # status line + headers; more is not a sane server
_MAX_CHUNK_LINE = 4096  # a chunk-size line (with extensions) or a trailer line

# Body framing of the response being read.
_CHUNKED, _LENGTH, _UNTIL_CLOSE, _NONE = range(4)


class ResponseSink(Protocol):
    """Receives one response as its bytes arrive; ``now_ns`` is the read's instant."""

    def on_head(self, status: int, headers: dict[str, str], now_ns: int) -> None: ...

    def on_body(self, data: bytes, now_ns: int) -> None: ...

    def on_end(self, now_ns: int) -> None: ...

    def on_failure(self, kind: str, detail: str, now_ns: int) -> None: ...


def request_prefix(method: str, path: str, host: str, headers: dict[str, str]) -> bytes:
    """A request's head up to ``Content-Length: `` (the length and body follow per request)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines.extend(f"{name}: {value}" for name, value in headers.items())
    lines.append("Content-Length: ")
    return "\r\n".join(lines).encode("latin-1")


class Http1Connection(asyncio.Protocol):
    """A keep-alive connection that reads one response at a time into a sink.

    ``reusable`` is true once a response has been read completely on a
    connection both sides keep open; the pool only reuses such connections.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self.idle_since = 0.0  # time.monotonic() when last put back in the pool
        self._sink: ResponseSink | None = None
        self._buf = bytearray()
        self._in_head = False
        self._framing = _NONE
        self._left = 0  # bytes left: of the body (Content-Length) or of this chunk
        self._crlf_due = False  # after a chunk's data
        self._trailers = False  # after the zero-size chunk
        self._keep_alive = True
        self.lost = False  # the transport has let go of the socket
        self._lost: asyncio.Future[None] | None = None
        self.on_lost: Callable[[Http1Connection], None] | None = None

    async def wait_closed(self) -> None:
        """Until the transport has really let go of the socket (after :meth:`close`)."""
        if self.transport is None or self.lost:
            return
        if self._lost is None:
            self._lost = asyncio.get_running_loop().create_future()
        await self._lost

    # -- asyncio.Protocol --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        if self._sink is None:  # bytes nobody asked for: keep a little, to report them
            if len(self._buf) < MAX_HEAD_BYTES:
                self._buf += data
            self.reusable = False
            return
        if self._in_head:
            self._read_head(data, now)
        else:
            self._read_body(data, now)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost reports the end

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = self.lost = True
        self.reusable = False
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        if self.on_lost is not None:
            self.on_lost(self)
        sink = self._sink
        if sink is None:
            return
        now = time.monotonic_ns()
        self._sink = None
        if not self._in_head and self._framing == _UNTIL_CLOSE and exc is None:
            sink.on_end(now)  # the close is the end of this body
            return
        where = "before the response head" if self._in_head else "mid-body"
        detail = f"server closed the connection {where}"
        if exc is not None:
            detail += f": {type(exc).__name__}: {exc}"
        sink.on_failure(ErrorKind.TRUNCATED, detail, now)

    # -- one exchange ------------------------------------------------------------

    def send(self, data: bytes, sink: ResponseSink) -> int:
        """Write a whole request; returns the instant the bytes went to the socket."""
        assert self.transport is not None and self._sink is None
        self._sink = sink
        self.reusable = False
        self._in_head = True
        self._framing = _NONE
        self._keep_alive = True
        t_send = time.monotonic_ns()
        self.transport.write(data)
        if self._buf:  # the server spoke first (a banner): judge it as the response
            early, self._buf = bytes(self._buf), bytearray()
            self._read_head(early, time.monotonic_ns())
        return t_send

    def detach(self) -> None:
        """Stop delivering to the current sink; an unfinished response spoils the connection."""
        if self._sink is not None:
            self._sink = None
            self.close()

    def close(self) -> None:
        self.reusable = False
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # -- parsing -----------------------------------------------------------------

    def _fail(self, kind: str, detail: str, now: int) -> None:
        sink, self._sink = self._sink, None
        self.close()
        if sink is not None:
            sink.on_failure(kind, detail, now)

    def _finish(self, now: int, leftover: bool) -> None:
        sink, self._sink = self._sink, None
        self._buf.clear()
        if leftover or not self._keep_alive or self.closed:
            self.close()  # bytes past the body, or the server said close: not reusable
        else:
            self.reusable = True
        if sink is not None:
            sink.on_end(now)

    def _read_head(self, data: bytes, now: int) -> None:
        buf = self._buf
        buf += data
        while self._in_head:
            if len(buf) >= 5 and not buf.startswith(b"HTTP/"):
                shown = bytes(buf[:60]).decode("latin-1")
                self._fail(ErrorKind.PROTOCOL, f"not an HTTP response: {shown!r}", now)
                return
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    self._fail(
                        ErrorKind.PROTOCOL, f"response head over {MAX_HEAD_BYTES} bytes", now
                    )
                return
            head = bytes(buf[:end]).decode("latin-1")
            del buf[: end + 4]
            try:
                http10, status, headers = _parse_head(head)
            except ValueError as exc:
                self._fail(ErrorKind.PROTOCOL, f"malformed response head: {exc}", now)
                return
            if 100 <= status < 200:
                continue  # an interim response (100 Continue, 103 Early Hints)
            self._start_body(status, headers, now, http10)
        if self._sink is not None and buf:
            rest = bytes(buf)
            buf.clear()
            self._read_body(rest, now)

    def _start_body(self, status: int, headers: dict[str, str], now: int, http10: bool) -> None:
        self._in_head = False
        connection = headers.get("connection", "").lower()
        # HTTP/1.1 keeps the connection unless told otherwise; HTTP/1.0 only when told to.
        self._keep_alive = "keep-alive" in connection if http10 else "close" not in connection
        encoding = headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        if status in (204, 304):
            self._framing, self._left = _LENGTH, 0
        elif "chunked" in encoding:
            self._framing, self._left = _CHUNKED, 0
            self._crlf_due = self._trailers = False
        elif length is not None:
            try:
                self._left = int(length)
                if self._left < 0:
                    raise ValueError
            except ValueError:
                self._fail(ErrorKind.PROTOCOL, f"bad Content-Length: {length[:40]!r}", now)
                return
            self._framing = _LENGTH
        else:
            self._framing = _UNTIL_CLOSE
            self._keep_alive = False
        sink = self._sink
        assert sink is not None
        sink.on_head(status, headers, now)
        if self._sink is not None and self._framing == _LENGTH and self._left == 0:
            self._finish(now, leftover=False)

    def _read_body(self, data: bytes, now: int) -> None:
        if self._framing == _CHUNKED:
            self._read_chunked(data, now)
        elif self._framing == _LENGTH:
            self._read_sized(data, now)
        elif self._sink is not None:
            self._sink.on_body(data, now)

    def _read_sized(self, data: bytes, now: int) -> None:
        sink = self._sink
        if sink is None:
            return
        left = self._left
        if len(data) >= left:
            body, extra = data[:left], len(data) > left
            self._left = 0
            if body:
                sink.on_body(body, now)
            if self._sink is not None:
                self._finish(now, leftover=extra)
            return
        self._left = left - len(data)
        sink.on_body(data, now)

    def _read_chunked(self, data: bytes, now: int) -> None:
        """Decode ``Transfer-Encoding: chunked``; one ``on_body`` per read, all pieces joined.

        A chunk that arrived whole (the usual case: an SSE event per chunk,
        several per read) takes one step; a chunk split across reads goes
        through the byte-by-byte states (``_left``, ``_crlf_due``, ``_trailers``).
        """
        buf = self._buf
        if buf:
            buf += data
            data = bytes(buf)
            buf.clear()
        pos, size = 0, len(data)
        pieces: list[bytes] = []
        done = False
        while pos < size:
            if self._left:
                take = min(self._left, size - pos)
                pieces.append(data[pos : pos + take])
                pos += take
                self._left -= take
                if not self._left:
                    self._crlf_due = True
                continue
            if self._crlf_due:
                if size - pos < 2:
                    break
                if data[pos : pos + 2] != b"\r\n":
                    self._fail(ErrorKind.PROTOCOL, "chunk data not followed by CRLF", now)
                    return
                pos += 2
                self._crlf_due = False
                continue
            nl = data.find(b"\n", pos)
            if nl < 0:
                if size - pos > _MAX_CHUNK_LINE:
                    self._fail(ErrorKind.PROTOCOL, "chunk-size line too long", now)
                    return
                break
            line = data[pos:nl]
            pos = nl + 1
            if self._trailers:
                if not line.rstrip(b"\r"):
                    done = True
                    break
                continue
            try:
                chunk = int(line, 16)  # int() ignores the surrounding whitespace and the CR
            except ValueError:
                chunk = _chunk_size(line)  # chunk extensions, or not a size at all
            if chunk is None or chunk < 0:
                shown = line[:40].decode("latin-1")
                self._fail(ErrorKind.PROTOCOL, f"bad chunk size line {shown!r}", now)
                return
            if chunk == 0:
                self._trailers = True
                continue
            end = pos + chunk
            if end + 2 <= size and data[end : end + 2] == b"\r\n":  # the whole chunk is here
                pieces.append(data[pos:end])
                pos = end + 2
            else:
                self._left = chunk
        if not done and pos < size:
            buf += data[pos:]
        sink = self._sink
        if pieces and sink is not None:
            sink.on_body(pieces[0] if len(pieces) == 1 else b"".join(pieces), now)
        if done and self._sink is not None:
            self._finish(now, leftover=pos < size)


def _chunk_size(line: bytes) -> int | None:
    """The size on a chunk-size line with ``;extensions``, or None if it is not one."""
    head = line.split(b";", 1)[0]
    if head == line:
        return None
    try:
        return int(head, 16)
    except ValueError:
        return None


def _parse_head(head: str) -> tuple[bool, int, dict[str, str]]:
    """Whether it is HTTP/1.0, the status code, and the headers.

    Header names are lower-cased; repeated names are joined with commas.
    """
    status_line, *lines = head.split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"status line {status_line[:60]!r}")
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ValueError(f"header line {line[:60]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return parts[0] == "HTTP/1.0", int(parts[1]), headers
