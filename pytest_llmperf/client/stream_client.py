"""The load generator's connections to one endpoint: a keep-alive pool of HTTP/1.1 sockets.

A pool per run, made inside the running loop. It opens connections on demand
up to ``max_connections`` (a request beyond that waits for a free one) and
keeps finished ones for reuse (last in, first out, so the warm ones are reused
and the rest age out). A connection is never reused, so that the client does
not write into a socket the server is closing (docs/measurement.md,
"Connections"), when:

- its response did not end cleanly on a connection both sides keep open
  (``Connection: close``, HTTP/1.0, a cut, a cancel, a 5xx);
- the server closed it while idle (EOF or RST, seen by the loop, or still
  waiting in the socket: :meth:`Http1Connection.hung_up` at hand-out);
- it sat idle longer than its server's ``Keep-Alive: timeout=`` allows, less a
  margin, or ``KEEPALIVE_S`` when the server announced none (under the 5 s of
  uvicorn: vLLM, SGLang);
- it has carried the ``Keep-Alive: max=`` requests its server announced.

Those rules cannot close the race of a server that hangs up just as the
client reuses the connection; :mod:`~pytest_llmperf.client.request` sends such
a request once more on a new connection (:meth:`StreamClient.redial`). And a
server that closes its connections right after the responses it announced as
keep-alive (llama.cpp's server after every streamed response) is taken at its
deed: after :data:`BROKEN_PROMISES` such closes within
:data:`SOON_AFTER_S` of a response, the pool keeps no connection for the rest
of its run, as if every response said ``Connection: close``. Each request then
connects before it is sent, instead of a share of them losing the race and
connecting again after their first write (inside their measured time).

The request head is built once per API and checked then (a header value
with CR/LF, say an API key read with its newline, is a usage error naming the
header, never its value); a query string on the base URL (``?api-version=…``
of a gateway) is kept after the API path. A request with headers of its own
(``Sample.headers``) has them checked and inserted before its
``Content-Length``; one without pays nothing for that.

A failure to connect is raised as :class:`TransportFailure` carrying its
:class:`~pytest_llmperf.client.records.ErrorKind`, so the request that needed
the connection records the real cause (DNS, TLS, refused, timeout).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Mapping
from types import TracebackType
from urllib.parse import urlsplit

from pytest_llmperf.apis.registry import API_FORMATS
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.fdlimits import connection_budget, ensure_descriptors
from pytest_llmperf.client.http1 import Http1Connection, check_request_headers, request_prefix
from pytest_llmperf.client.keepalive import KEEPALIVE_S
from pytest_llmperf.client.records import ErrorKind
from pytest_llmperf.client.slots import SlotGate
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.tls import tls_verify

__all__ = ["BROKEN_PROMISES", "KEEPALIVE_S", "SOON_AFTER_S", "StreamClient", "TransportFailure"]

# A close this soon after a kept-alive response is the server's habit, not its idle
# timeout (uvicorn's is 5 s; a server that announces less is taken at its word).
SOON_AFTER_S = 0.25
BROKEN_PROMISES = 3  # such closes before the pool stops keeping connections

_LENGTH = b"Content-Length: "  # where request_prefix ends


def _head_headers(endpoint: Endpoint, api: str) -> dict[str, str]:
    """The headers of every ``api`` request: a stream is asked for, except of a format that
    streams no tokens (embeddings), whose answer is one JSON body; the endpoint's auth
    headers for that API."""
    return {
        "User-Agent": "pytest-llmperf",
        "Accept": "text/event-stream" if API_FORMATS[api].streams_tokens else "application/json",
        "Accept-Encoding": "identity",
        "Content-Type": "application/json",
        **endpoint.headers(api),
    }


class TransportFailure(Exception):
    """A request could not be sent; ``kind`` is its error category."""

    def __init__(self, kind: ErrorKind, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class StreamClient:
    """Streaming POSTs to ``endpoint`` over pooled keep-alive connections.

    ``max_connections=None`` sizes the pool by the file-descriptor budget
    (open-loop loads: a request must not wait in the client for a
    connection, since its latency counts from the planned send time). ``spares``:
    :meth:`take_idle` keeps the pool a connection ahead of its load (open loops).
    """

    def __init__(
        self, endpoint: Endpoint, *, max_connections: int | None = 1024, spares: bool = False
    ) -> None:
        if max_connections is None:
            max_connections = connection_budget()
        else:
            ensure_descriptors(max_connections, what="connections (concurrency)")
        parts = urlsplit(endpoint.base_url)
        self.host = parts.hostname or ""
        https = parts.scheme == "https"
        self.port = parts.port or (443 if https else 80)
        literal = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = literal if parts.port is None else f"{literal}:{self.port}"
        self.max_connections = max_connections
        self.connect_timeout = endpoint.timeouts.connect
        self._ssl: ssl.SSLContext | None = None
        if https:
            verify = tls_verify()
            if not isinstance(verify, ssl.SSLContext):
                verify = ssl.create_default_context()
            self._ssl = verify
        heads = {api: _head_headers(endpoint, api) for api in API_FORMATS}
        query = f"?{parts.query}" if parts.query else ""  # e.g. ?api-version=… of a gateway
        try:
            self._prefixes = {
                api: request_prefix(
                    "POST", parts.path + fmt.path + query, self.authority, heads[api]
                )
                for api, fmt in API_FORMATS.items()
            }
        except ValueError as exc:  # a header or path that would break every request's framing
            raise LlmPerfUsageError(
                f"cannot send requests to {endpoint.label}: {exc}", where="--llm-endpoint"
            ) from None
        # The heads without their "Content-Length: ", for requests with headers of their own;
        # a sample may not repeat a header the client sends (nor the framing ones).
        assert all(prefix.endswith(_LENGTH) for prefix in self._prefixes.values())
        self._heads = {api: prefix[: -len(_LENGTH)] for api, prefix in self._prefixes.items()}
        self._own_headers = {
            api: frozenset(
                name.lower() for name in ("Host", "Content-Length", "Transfer-Encoding", *head)
            )
            for api, head in heads.items()
        }
        self._idle: list[Http1Connection] = []
        self._open: set[Http1Connection] = set()  # until each socket is really closed
        self._slots = SlotGate(max_connections)
        self._closed = False
        self.broken_promises = 0  # closes right after a kept-alive response (see above)
        self.keeps_connections = True  # until BROKEN_PROMISES of them
        self.spares = spares  # take_idle() dials a spare on a miss
        self.kept_one = False  # a connection carried a response and was kept for another
        self._spare: asyncio.Future[None] | None = None

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection and wait until their sockets are released."""
        self._closed = True
        if self._spare is not None:
            self._spare.cancel()
        self._idle.clear()
        still_open = list(self._open)
        for conn in still_open:
            conn.close()
        if still_open:
            await asyncio.wait(
                [asyncio.ensure_future(c.wait_closed()) for c in still_open], timeout=5
            )

    def request_bytes(
        self, api: str, body: bytes, headers: Mapping[str, str] | None = None
    ) -> bytes:
        """A whole POST of ``body`` to the ``api``'s path (any format of ``API_FORMATS``).

        ``headers`` are this request's own (``Sample.headers``, e.g. a session's
        affinity header), added to the client's. ``ValueError`` (naming the header,
        never its value) for a name that is not an HTTP token, a value with CR, LF or
        another control character, or a header the client already sends (``Host``,
        ``Content-Length``, ``Transfer-Encoding``, the endpoint's headers).
        """
        if not headers:
            return b"%s%d\r\n\r\n%s" % (self._prefixes[api], len(body), body)
        check_request_headers(headers)
        own = self._own_headers[api]
        for name in headers:
            if name.lower() in own:
                raise ValueError(
                    f"header {name!r} is sent by the client itself; a request may not repeat it"
                )
        extra = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
        return b"%s%s%s%d\r\n\r\n%s" % (
            self._heads[api],
            extra.encode("latin-1"),
            _LENGTH,
            len(body),
            body,
        )

    # -- connections -------------------------------------------------------------

    async def acquire(self, timeout_s: float) -> Http1Connection:
        """A connection for one request: a kept-alive one (``reused``), or a new one
        within ``timeout_s``."""
        await self._slots.acquire()
        try:
            conn = self._pop_idle()
            return conn if conn is not None else await self._connect(timeout_s)
        except BaseException:
            self._slots.release()
            raise

    def take_idle(self) -> Http1Connection | None:
        """A kept-alive connection now, without waiting, or None (none idle, pool full):
        what lets a paced request be written in its pacer's own step.

        With ``spares``, taking the last idle connection (or finding none) dials one in
        the background (one at a time), so that the next request finds one: an open
        loop's pool then grows ahead of its load, not inside its requests' measured
        time. Only once the server has kept a connection after a response, and not
        once it has broken that promise (:data:`BROKEN_PROMISES`): for a server that
        keeps none (``Connection: close``, HTTP/1.0, llama-server) every request
        connects, as every user's does.
        """
        conn = None
        if self._idle and self._slots.try_acquire():
            conn = self._pop_idle()
            if conn is None:
                self._slots.release()
        if self.spares and not self._idle:  # that was the last one (or there was none)
            self._dial_spare()
        return conn

    @property
    def idle(self) -> int:
        """Connections kept idle for reuse now."""
        return len(self._idle)

    @property
    def dialling_spare(self) -> bool:
        """A spare connection is being dialled (:meth:`take_idle`)."""
        return self._spare is not None

    def _dial_spare(self) -> None:
        if self._spare is not None or self._closed or not self.keeps_connections:
            return
        if not self.kept_one:  # a server that has kept none may close every one (close)
            return
        if len(self._open) >= self.max_connections:
            return
        self._spare = asyncio.ensure_future(self.open_connections(1))
        self._spare.add_done_callback(self._spare_dialled)

    def _spare_dialled(self, _: asyncio.Future[None]) -> None:
        self._spare = None

    def _pop_idle(self) -> Http1Connection | None:
        """The warmest idle connection still fit to carry a request (the rest are closed)."""
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < conn.idle_limit_s:
                if conn.reusable and not conn.hung_up():
                    conn.reused = True
                    return conn
                if conn.lost or conn.reusable:  # the server closed it while idle
                    self._closed_by_server(conn, conn.lost_at if conn.lost else now)
            conn.close()
        return None

    def release(self, conn: Http1Connection) -> None:
        """Give back what :meth:`acquire` handed out (kept if its response ended cleanly
        and its server lets it carry another request)."""
        if (
            conn.reusable
            and self.keeps_connections
            and not self._closed
            and conn.requests < conn.max_requests
        ):
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
            self.kept_one = self.kept_one or conn.requests > 0
        else:
            conn.close()
        self._slots.release()

    async def redial(self, conn: Http1Connection, timeout_s: float) -> Http1Connection:
        """A new connection in place of ``conn`` (closed), in the same pool slot.

        For a request lost on a reused connection before any byte of its response
        (:mod:`~pytest_llmperf.client.request`); raises :class:`TransportFailure` as a
        connect does, and the caller then still releases ``conn``.
        """
        self._closed_by_server(conn, conn.lost_at or time.monotonic())
        conn.close()
        return await self._connect(timeout_s)

    def _closed_by_server(self, conn: Http1Connection, at: float) -> None:
        """``conn``, kept alive after a response, was closed by its server at ``at``
        (or before): a broken keep-alive promise when that was soon after the response."""
        if conn.requests and at - conn.idle_since < SOON_AFTER_S:
            self.broken_promises += 1
            if self.broken_promises >= BROKEN_PROMISES and self.keeps_connections:
                self.keeps_connections = False
                for idle in self._idle:  # kept by the same server: as good as closed
                    idle.close()
                self._idle.clear()

    async def open_connections(self, count: int) -> None:
        """Open up to ``count`` connections now, before a run's clock starts.

        A connect (and TLS handshake) inside the run would land in the first
        requests' latency as if the server had been slow. Failures are left
        to the run's own requests to report.
        """
        count = min(count, self.max_connections - len(self._idle))
        results = await asyncio.gather(
            *(self._connect(self.connect_timeout) for _ in range(count)),
            return_exceptions=True,
        )
        now = time.monotonic()
        for conn in results:
            if isinstance(conn, Http1Connection):
                conn.reusable = True
                conn.idle_since = now
                self._idle.append(conn)

    async def _connect(self, timeout_s: float) -> Http1Connection:
        loop = asyncio.get_running_loop()
        where = f"{self.authority}{' (TLS)' if self._ssl else ''}"
        try:
            async with asyncio.timeout(timeout_s):
                _, conn = await loop.create_connection(
                    Http1Connection,
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self.host if self._ssl else None,
                )
        except TimeoutError:
            raise TransportFailure(
                ErrorKind.CONNECT_TIMEOUT, f"no connection to {where} within {timeout_s:g} s"
            ) from None
        except socket.gaierror as exc:
            raise TransportFailure(
                ErrorKind.DNS, f"cannot resolve host {self.host!r}: {exc}"
            ) from None
        except ssl.SSLError as exc:  # includes certificate verification failures
            raise TransportFailure(ErrorKind.TLS, f"TLS with {where} failed: {exc}") from None
        except OSError as exc:
            raise TransportFailure(
                ErrorKind.CONNECT, f"cannot connect to {where}: {type(exc).__name__}: {exc}"
            ) from None
        if conn.lost:  # the server hung up during the handshake
            raise TransportFailure(ErrorKind.CONNECT, f"{where} closed the connection at once")
        self._open.add(conn)
        conn.on_lost = self._open.discard
        return conn
