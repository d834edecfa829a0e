"""One HTTP/1.1 connection of the load generator, as an asyncio protocol.

Why not a general HTTP client here: a load generator reads tens of thousands
of small streamed chunks a second, and the time a chunk arrives must be taken
where its bytes are read. In ``buffer_updated`` the bytes have just left the
socket, so the timestamp is taken there, once per read, and the body is
handed on synchronously — no coroutine resumes per chunk, no stream objects,
no header models. Measured against the httpx-on-aiohttp stack this replaced,
the client's CPU per streamed request fell by about two thirds
(``benchmarks/loadgen_throughput.py``). Metadata calls (``GET /v1/models``,
``/metrics``) and the ``llm_endpoint.client()`` fixture keep httpx.

Why llhttp (``httptools``) frames the responses: status line, headers,
``Content-Length``, chunked and close-delimited bodies, keep-alive rules
(HTTP/1.0, ``Connection: close``), interim ``1xx`` heads and trailers are
what uvicorn, aiohttp and Node read with the same parser, strictly: a chunk
size such as ``0x1a``, ``1_0`` or ``+a``, a CR or LF inside a header value,
``Content-Length`` beside ``Transfer-Encoding``, bytes after a
``Connection: close`` response are all refused. What stays here is the
project's own job: one ``monotonic_ns`` reading per read, the body of that
read handed to the sink in one piece, and the few things llhttp leaves to its
caller — the end of a close-delimited body (httptools cannot be told of the
socket's end), a bound on the bytes of a head, and bytes that arrive when no
request asked for them. Anything malformed is a
:data:`~pytest_llmperf.client.records.ErrorKind.PROTOCOL` failure of that
request (a cut, :data:`~pytest_llmperf.client.records.ErrorKind.TRUNCATED`),
never an exception out of the event loop.

What the connection knows about its own reuse (docs/measurement.md,
"Connections"), for the pool (:mod:`~pytest_llmperf.client.stream_client`)
to decide with: how many requests it has carried (``requests``), the idle
limit and request cap its server announced in ``Keep-Alive`` (read from each
response head that carries one, :mod:`~pytest_llmperf.client.keepalive`),
whether the server's close is already waiting in the socket though the loop
has not read it yet (:meth:`Http1Connection.hung_up`), and whether any byte of
the current response has arrived (:attr:`Http1Connection.answered`): a request
lost on a reused connection before that may be sent again, never after.

Why a buffered protocol (``get_buffer`` / ``buffer_updated``): with
``data_received`` asyncio reads each time into a new 256 KiB ``bytes``, and
until the process has freed a larger block glibc serves that size with
``mmap`` (and its shrink and free with ``mremap`` and ``munmap``): three
system calls on top of every read, seen at 72,000 of each in a 512-stream
run. Every connection of a thread reads into that thread's one buffer
instead (asyncio hands a read to ``buffer_updated`` before it reads again),
and llhttp copies out only the body bytes.
"""

from __future__ import annotations

import asyncio
import re
import select
import threading
import time
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Protocol, cast

from httptools import (
    HttpParserCallbackError,
    HttpParserError,
    HttpParserUpgrade,
    HttpResponseParser,
)

from pytest_llmperf.client.keepalive import KEEPALIVE_S, idle_limit, parse_keep_alive
from pytest_llmperf.client.records import ErrorKind

__all__ = [
    "MAX_HEAD_BYTES",
    "Http1Connection",
    "ResponseSink",
    "check_request_headers",
    "is_header_name",
    "request_prefix",
]

MAX_HEAD_BYTES = 64 * 1024  # a head, or framing bytes without body data between; more is not sane

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token (header name, method)


def is_header_name(name: str) -> bool:
    """Whether ``name`` can be an HTTP header's name (an RFC 9110 token)."""
    return _TOKEN.fullmatch(name) is not None


_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # controls but HTAB: CR and LF above all
_BAD_TARGET = re.compile(r"[^\x21-\x7e]")  # a request target is visible ASCII, no spaces
_UNCAPPED = 1 << 62  # max_requests of a connection whose server announced no max=


class ResponseSink(Protocol):
    """Receives one response as its bytes arrive; ``now_ns`` is the read's instant."""

    def on_head(self, status: int, headers: dict[str, str], now_ns: int) -> None: ...

    def on_body(self, data: bytes, now_ns: int) -> None: ...

    def on_end(self, now_ns: int) -> None: ...

    def on_failure(self, kind: ErrorKind, detail: str, now_ns: int) -> None: ...


def check_request_headers(headers: Mapping[str, str]) -> None:
    """Raise ``ValueError`` for a header that would break a request's framing.

    A CR or LF in a value would end the header early and let the rest be read
    as further headers or as the body (header injection); a value from the
    environment, such as an API key read from a file with its newline, is the
    usual way one gets there. The message names the header, never its value:
    the value may be a secret.
    """
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"header name {name!r} is not an HTTP token")
        if _BAD_VALUE.search(value):
            raise ValueError(
                f"the value of the {name} header contains a control character (CR, LF, NUL, …);"
                " a trailing newline in an environment variable is the usual cause"
            )
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError(f"the value of the {name} header is not ISO-8859-1 text") from None


def request_prefix(method: str, target: str, host: str, headers: dict[str, str]) -> bytes:
    """A request's head up to ``Content-Length: `` (the length and body follow per request).

    ``target`` is the path with its query string, if any. Every part is
    checked first (``ValueError`` naming the part): this head is built once
    and then written for every request, so a bad byte here would be in all of
    them.
    """
    if not _TOKEN.fullmatch(method):
        raise ValueError(f"request method {method!r} is not an HTTP token")
    if not target.startswith("/") or _BAD_TARGET.search(target):
        raise ValueError(
            f"request path {target!r} must start with '/' and be visible ASCII"
            " (percent-encode spaces and other characters)"
        )
    check_request_headers({"Host": host, **headers})
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines.extend(f"{name}: {value}" for name, value in headers.items())
    lines.append("Content-Length: ")
    return "\r\n".join(lines).encode("latin-1")


READ_BUFFER_BYTES = 256 * 1024  # as asyncio's own reads (max_size)
_thread = threading.local()


def _read_buffer() -> memoryview:
    """This thread's read buffer, shared by its connections (one event loop per thread
    reads one socket at a time, and each read is parsed before the next)."""
    view: memoryview | None = getattr(_thread, "read_buffer", None)
    if view is None:
        view = _thread.read_buffer = memoryview(bytearray(READ_BUFFER_BYTES))
    return view


class _Unsolicited(Exception):
    """Raised inside the parser: a response began that no request asked for."""


class Http1Connection(asyncio.BufferedProtocol):
    """A keep-alive connection that reads one response at a time into a sink.

    ``reusable`` is true once a response has been read completely on a
    connection both sides keep open; the pool only reuses such connections.
    One llhttp parser serves the connection's responses in turn; after any
    framing error the connection is closed, never reused. ``requests`` counts
    the requests written on it, ``reused`` says whether the pool handed it out
    from its idle list (set by the pool), and ``idle_limit_s`` /
    ``max_requests`` are what its server's last ``Keep-Alive`` header allowed
    (:data:`~pytest_llmperf.client.keepalive.KEEPALIVE_S` and no cap when none
    said).
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self.idle_since = 0.0  # time.monotonic() when last put back in the pool
        self.lost = False  # the transport has let go of the socket
        self.lost_at = 0.0  # time.monotonic() when it did
        self.requests = 0  # requests written on this connection
        self.reused = False  # handed out from the pool's idle list (set by the pool)
        self.idle_limit_s = KEEPALIVE_S  # how long it may sit idle in the pool
        self.max_requests = _UNCAPPED  # how many requests it may carry in all
        self._fd = -1  # the socket's descriptor while the transport holds it
        self.on_lost: Callable[[Http1Connection], None] | None = None
        self._lost: asyncio.Future[None] | None = None
        self._sink: ResponseSink | None = None
        self._now = 0  # the instant of the read being parsed
        self._pieces: list[bytes] = []  # body bytes of this read (never replaced: see below)
        self._headers: dict[str, str] = {}
        self._in_head = False  # a request is out and its final head has not been read
        self._status_seen = False  # the status line of the head being read was accepted
        self._interim = False  # the message being read is a 1xx head
        self._until_close = False  # the body ends when the server closes the connection
        self._unframed = 0  # bytes read since the last head or body data (bounded)
        self._early = bytearray()  # bytes that came while no request was out
        # llhttp calls these during feed_data(); ``on_body`` is the list's own append,
        # so a chunk of body costs no Python frame.
        callbacks = SimpleNamespace(
            on_message_begin=self._on_message_begin,
            on_status=self._on_status,
            on_header=self._on_header,
            on_headers_complete=self._on_headers_complete,
            on_body=self._pieces.append,
            on_message_complete=self._on_message_complete,
        )
        self._parser: HttpResponseParser | None = HttpResponseParser(callbacks)
        self._buffer = _read_buffer()

    @property
    def answered(self) -> bool:
        """Whether any byte of the response to the last request sent has been read."""
        return self._now != 0

    def hung_up(self) -> bool:
        """Whether the socket of this idle connection has something to read: the server's
        close (FIN or RST) that the event loop has not processed yet, or bytes nobody asked
        for. Either way it must not carry a request (urllib3 checks the same before reuse).

        One ``poll`` with a zero timeout (well under a microsecond): it catches the close
        that reached the socket after the loop's last look, the usual case of a server
        that hangs up right after its response while the client is already reusing it.
        """
        if self._fd < 0 or self.lost:
            return self.lost
        poller = select.poll()
        poller.register(self._fd, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))

    async def wait_closed(self) -> None:
        """Until the transport has really let go of the socket (after :meth:`close`)."""
        if self.transport is None or self.lost:
            return
        if self._lost is None:
            self._lost = asyncio.get_running_loop().create_future()
        await self._lost

    # -- asyncio.BufferedProtocol ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's transports do not derive from asyncio's classes.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._fd = sock.fileno()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        """One read (``nbytes`` in the shared buffer): timestamped here, framed by llhttp,
        its body handed to the sink, before the buffer is read into again."""
        now = time.monotonic_ns()
        data = self._buffer[:nbytes]
        sink = self._sink
        if sink is None or self._parser is None:
            self._unasked(data)
            return
        self._now = now
        try:
            self._parser.feed_data(data)
        except HttpParserError as exc:
            self._parse_failed(exc, data)
            return
        except HttpParserUpgrade:
            self._fail(ErrorKind.PROTOCOL, "the server switched protocols (HTTP 101)", now)
            return
        pieces = self._pieces
        if pieces:  # a response that ended in this read has had its body already
            body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            pieces.clear()
            self._unframed = 0
            sink.on_body(body, now)
        elif self._sink is not None:
            self._unframed += len(data)
            if self._unframed > MAX_HEAD_BYTES:
                self._too_long(now)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost reports the end

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = self.lost = True
        self.reusable = False
        self.lost_at = time.monotonic()
        self._fd = -1  # the descriptor may be another socket's from now on
        self._parser = None  # it holds this object's methods: no cycle left to collect
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        if self.on_lost is not None:
            self.on_lost(self)
        sink = self._sink
        if sink is None:
            return
        now = time.monotonic_ns()
        self._sink = None
        if not self._in_head and self._until_close and exc is None:
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
        self.requests += 1
        self._now = 0  # nothing of this response read yet (buffer_updated sets it per read)
        self._in_head = True
        self._status_seen = self._interim = self._until_close = False
        self._unframed = 0
        t_send = time.monotonic_ns()
        self.transport.write(data)
        if self._early:
            self._answered_before_asked(time.monotonic_ns())
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

    # -- llhttp callbacks (inside feed_data) ---------------------------------------

    def _on_message_begin(self) -> None:
        if self._sink is None:
            raise _Unsolicited  # stops the parser; buffer_updated closes the connection
        self._headers = {}

    def _on_status(self, reason: bytes) -> None:
        self._status_seen = True

    def _on_header(self, name: bytes, value: bytes) -> None:
        """Names lower-cased, repeated names joined with commas; trailers are dropped."""
        if not self._in_head:
            return
        headers = self._headers
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1").strip()
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def _on_headers_complete(self) -> None:
        assert self._parser is not None and self._sink is not None
        status = self._parser.get_status_code()
        if status < 200:  # 100 Continue, 103 Early Hints (101 ends in HttpParserUpgrade)
            self._interim = True
            return
        self._in_head = False
        self._unframed = 0
        headers = self._headers
        self._until_close = _ends_at_close(status, headers)
        keep_alive = headers.get("keep-alive")
        if keep_alive is not None:
            self._announced(keep_alive)
        self._sink.on_head(status, headers, self._now)

    def _on_message_complete(self) -> None:
        if self._interim:
            self._interim = False  # the final head follows
            return
        sink, self._sink = self._sink, None
        assert sink is not None and self._parser is not None
        now = self._now
        pieces = self._pieces
        if pieces:
            sink.on_body(pieces[0] if len(pieces) == 1 else b"".join(pieces), now)
            pieces.clear()
        if self._parser.should_keep_alive() and not self.closed:
            self.reusable = True
        else:
            self.close()  # HTTP/1.0 without keep-alive, or Connection: close
        sink.on_end(now)

    # -- what llhttp leaves to its caller ----------------------------------------------

    def _announced(self, value: str) -> None:
        """A ``Keep-Alive`` header: its ``timeout=`` and ``max=`` bound this connection's reuse."""
        said = parse_keep_alive(value)
        if said.timeout_s is not None:
            self.idle_limit_s = idle_limit(said.timeout_s)
        if said.max_requests is not None:
            self.max_requests = said.max_requests

    def _unasked(self, data: bytes | memoryview) -> None:
        """Bytes while no request is out: kept (a little) to report, and never reused."""
        self.reusable = False
        if len(self._early) < MAX_HEAD_BYTES:
            self._early += data

    def _answered_before_asked(self, now: int) -> None:
        shown = bytes(self._early[:60]).decode("latin-1")
        if shown.startswith("HTTP/"):
            detail = f"the server sent a response before the request was sent: {shown!r}"
        else:
            detail = f"not an HTTP response: {shown!r} (sent before the request)"
        self._fail(ErrorKind.PROTOCOL, detail, now)

    def _parse_failed(self, exc: HttpParserError, data: bytes | memoryview) -> None:
        if self._sink is None:  # bytes after a complete response: that connection is spoiled
            self.close()
            return
        cause = exc.__context__
        if isinstance(exc, HttpParserCallbackError) and cause is not None:
            # A bug in a sink must not take the loop down: it fails this request alone.
            self._fail(ErrorKind.CLIENT, f"{type(cause).__name__}: {cause}", self._now)
            return
        reason = str(exc) or type(exc).__name__
        if not self._in_head:
            detail = f"malformed response body: {reason}"
        elif self._status_seen or bytes(data[:5]) == b"HTTP/":
            detail = f"malformed response head: {reason}"
        else:
            detail = f"not an HTTP response: {bytes(data[:60]).decode('latin-1')!r} ({reason})"
        self._fail(ErrorKind.PROTOCOL, detail, self._now)

    def _too_long(self, now: int) -> None:
        if self._in_head:
            self._fail(ErrorKind.PROTOCOL, f"response head over {MAX_HEAD_BYTES} bytes", now)
        else:
            detail = f"over {MAX_HEAD_BYTES} bytes of chunk framing or trailers without body data"
            self._fail(ErrorKind.PROTOCOL, detail, now)

    def _fail(self, kind: ErrorKind, detail: str, now: int) -> None:
        sink, self._sink = self._sink, None
        self._pieces.clear()
        self.close()
        if sink is not None:
            sink.on_failure(kind, detail, now)


def _ends_at_close(status: int, headers: Mapping[str, str]) -> bool:
    """Whether llhttp reads this response's body until the connection closes.

    httptools has no call for the socket's end (llhttp's ``llhttp_finish``),
    so the caller must know when a close is the body's proper end: the rule
    of llhttp's ``llhttp_message_needs_eof`` (RFC 9112 §6.3), from the head
    llhttp has already accepted (so never ``Content-Length`` together with
    ``Transfer-Encoding``, nor two different lengths).
    """
    if status in (204, 304):
        return False
    coding = headers.get("transfer-encoding")
    if coding is not None:  # chunked must be the final coding, else the close ends it
        return coding.rsplit(",", 1)[-1].strip().lower() != "chunked"
    return "content-length" not in headers
