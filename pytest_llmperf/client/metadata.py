"""Every call outside a run, to one endpoint, under one deadline and one retry policy.

Outside a run the plugin asks a server small things: which model it serves
(``GET /v1/models``), which request fields it takes (the preflight's field
probes), how it counts tokens (``POST /tokenize``), its counters
(``GET /metrics``), what software it is (``GET /version``). Each of these once
worked out its own limit, and one (the field probe, which read a whole stream
under a per-read timeout) hung a session on a server that streams forever.
Here every such call:

- has one total deadline derived from ``--llm-timeout`` (:class:`CallLimits`)
  that covers its connect, its wait for the head, every silence and every
  retry: nothing outlives it;
- reads no more than it needs (:class:`Read`): the head only, the first SSE
  event of a stream, or the body up to a size cap, then closes the stream;
- retries what is transient (HTTP 408, 425, 429, a 5xx other than 501/505, a
  connection reset) with backoff, honouring a short ``Retry-After``, inside
  that same deadline; any other answer is the caller's at once;
- ends, when its time or its retries run out, in one
  :class:`MetadataCallError` (a usage error at ``--llm-endpoint``) naming the
  endpoint (never the key), the call and what the server did each time.

Synchronous code (the server tokenizer, tokenizer discovery, the identity
probe) uses :class:`BlockingMetadataClient`: the same client on a private
event loop, so the deadlines are the same ones, enforced by cancellation.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import json as jsonlib
import threading
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pytest_llmperf.apis.events import error_message
from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.failures import classify_transport_error
from pytest_llmperf.client.records import ErrorKind
from pytest_llmperf.client.unreachable import unreachable_message
from pytest_llmperf.errors import LlmPerfUsageError, StopCause
from pytest_llmperf.redaction import scrub

__all__ = [
    "BODY_LIMIT",
    "CALL_LIMIT_S",
    "MAX_ATTEMPTS",
    "Answer",
    "Attempt",
    "BlockingMetadataClient",
    "CallFailure",
    "CallLimits",
    "MetadataCallError",
    "MetadataClient",
    "Read",
    "is_transient",
    "server_root",
    "server_words",
]

CALL_LIMIT_S = 30.0  # beyond the connect: a metadata call answers in seconds, or something is wrong
MAX_ATTEMPTS = 3  # one call, at most two retries
BACKOFF_S = (0.5, 1.0)  # the wait before the 2nd and the 3rd attempt (no Retry-After)
MAX_RETRY_AFTER_S = 10.0  # a longer Retry-After is not waited for: the call gives up at once
BODY_LIMIT = 8 << 20  # a whole body (a model list, /metrics, a /tokenize of the corpus)
ERROR_BODY_LIMIT = 64 << 10  # the body of a non-2xx answer: its message is all we keep
FIRST_EVENT_LIMIT = 64 << 10  # a stream's start: the first event, or this many bytes
_QUIET_S = 1.5  # no byte for longer than this at the deadline: "then nothing", not "streamed"
_DEFINITIVE_5XX = frozenset({501, 505})  # not implemented / version: asking again cannot help
_TIMES = {1: "once", 2: "twice", 3: "three times"}
_GRACE_S = 5.0  # a blocking caller's own backstop beyond the call's deadline


class CallFailure(Enum):
    """How a call that settled nothing ended (:attr:`MetadataCallError.failure`)."""

    UNREACHABLE = "unreachable"  # no HTTP answer: nothing listens, no such host, TLS, not HTTP
    OUT_OF_TIME = "out of time"  # its deadline passed: no head, a stall, a body that never ends
    GAVE_UP = "gave up"  # transient answers (or resets) until its retries or their waits ran out
    TOO_LARGE = "too large"  # a body past its size cap


class Read(Enum):
    """How much of a 2xx answer a call reads (a non-2xx body is read for its message)."""

    HEAD = "head"  # status and headers: "does anything answer", any status will do
    BODY = "body"  # the whole body, up to a size cap
    FIRST_EVENT = "first event"  # a stream's first SSE event (or its first bytes): a probe


@dataclass(frozen=True, slots=True)
class CallLimits:
    """The limits of one metadata call, in seconds, all derived from ``--llm-timeout``.

    ``total_s`` bounds the whole call, retries and their waits included:
    ``min(total, connect + 30 s)``, since a metadata call answers in seconds or
    is broken. ``connect_s`` is the connect timeout, ``first_byte_s`` the wait
    for the response head after connecting (the first token's limit: a probe is
    a small generation), ``silence_s`` the longest silence between two reads
    (the stall limit); none exceeds ``total_s``.
    """

    connect_s: float
    first_byte_s: float
    silence_s: float
    total_s: float

    @classmethod
    def of(cls, timeouts: Timeouts) -> CallLimits:
        total = min(timeouts.total, timeouts.connect + CALL_LIMIT_S)
        return cls(
            connect_s=min(timeouts.connect, total),
            first_byte_s=min(timeouts.first_token, total),
            silence_s=min(timeouts.stall, total),
            total_s=total,
        )

    def within(self, seconds: float) -> CallLimits:
        """These limits, none over ``seconds`` (a best-effort call that must stay short)."""
        return CallLimits(
            connect_s=min(self.connect_s, seconds),
            first_byte_s=min(self.first_byte_s, seconds),
            silence_s=min(self.silence_s, seconds),
            total_s=min(self.total_s, seconds),
        )


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt that did not settle the call: what the server did, in words."""

    what: str  # a verb phrase: "answered HTTP 503: Loading model", "reset the connection (…)"
    status: int | None = None  # the HTTP status, when it answered one
    message: str = ""  # the server's own words for that status


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer that settled a call: a 2xx, or a status that asking again cannot change.

    ``body`` holds what was read (:class:`Read`): the whole body, a stream's
    first event, or nothing; ``complete`` says the body was read to its end.
    ``message`` is the server's own words for a non-2xx answer, scrubbed of the
    endpoint's secrets. ``attempts`` are the transient answers retried before it.
    """

    call: str
    status: int
    headers: Mapping[str, str]
    body: bytes = b""
    complete: bool = False
    message: str = ""
    attempts: tuple[Attempt, ...] = ()

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON (``ValueError`` when it is not)."""
        return jsonlib.loads(self.body)


class MetadataCallError(LlmPerfUsageError):
    """A metadata call that settled nothing: one message, at ``--llm-endpoint``.

    ``failure`` says how it ended; ``attempts`` what the server did each time. Its
    ``cause``: nothing answered HTTP (:attr:`CallFailure.UNREACHABLE`) is the address's,
    the user's to fix; any other end means a server answered and is broken
    (:attr:`~pytest_llmperf.errors.StopCause.SERVER_REFUSED`), quoted in ``server_says``.
    """

    def __init__(
        self,
        message: str,
        *,
        call: str,
        failure: CallFailure,
        attempts: tuple[Attempt, ...] = (),
    ) -> None:
        unreachable = failure is CallFailure.UNREACHABLE
        super().__init__(
            message,
            where="--llm-endpoint",
            cause=StopCause.UNREACHABLE if unreachable else StopCause.SERVER_REFUSED,
            server_says=None if unreachable else _server_says(attempts),
        )
        self.call = call
        self.failure = failure
        self.attempts = attempts


def server_words(status: int, message: str | None) -> str:
    """A server's answer as a report quotes it (an error's ``server_says``): ``HTTP 422:
    Unexpected fields ...``, or ``HTTP 503`` where it said nothing more."""
    return f"HTTP {status}" + (f": {message}" if message else "")


def _server_says(attempts: tuple[Attempt, ...]) -> str | None:
    """The server's last words: its message for the last status it answered, else what it
    did (``never answered: no response head in 5.0 s``)."""
    if not attempts:
        return None
    last = attempts[-1]
    if last.status is not None:
        return server_words(last.status, last.message)
    return last.what


def is_transient(status: int) -> bool:
    """A status that may change if asked again shortly: 408, 425, 429, 5xx but 501/505."""
    return status in (408, 425, 429) or (500 <= status < 600 and status not in _DEFINITIVE_5XX)


def server_root(base_url: str) -> str:
    """The server's root (where ``/tokenize``, ``/metrics``, ``/version`` live): ``base_url``
    without its trailing ``/v1``."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit(parts._replace(path=path, query="", fragment=""))


def call_name(method: str, url: str, what: str = "") -> str:
    """``GET /v1/models``, ``field probe POST /v1/chat/completions``: how messages name a call."""
    path = urlsplit(url).path or "/"
    return f"{what} {method} {path}" if what else f"{method} {path}"


@dataclass(frozen=True, slots=True)
class _Answered:
    status: int
    headers: httpx.Headers
    body: bytes
    complete: bool


@dataclass(frozen=True, slots=True)
class _Ended:
    """An attempt that ended without a usable answer."""

    what: str
    failure: CallFailure
    before_answer: bool = False  # nothing of a response arrived (a kept-alive connection's race)

    @property
    def retryable(self) -> bool:
        return self.failure is CallFailure.GAVE_UP  # a reset: a new connection may be answered


class MetadataClient:
    """The metadata calls of one endpoint (``async with MetadataClient(endpoint) as meta``).

    Must be entered inside the event loop that makes the calls. ``http`` lends
    an ``httpx.AsyncClient`` of the caller's (not closed here); by default one
    of :meth:`Endpoint.client` is opened, with two connections.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        limits: CallLimits | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.limits = limits or CallLimits.of(endpoint.timeouts)
        self._http = http
        self._owned = http is None

    async def __aenter__(self) -> MetadataClient:
        self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def open(self) -> None:
        """Open the connection pool (inside the running loop); idempotent."""
        if self._http is None:
            self._http = self.endpoint.client(max_connections=2)

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None and self._owned:
            await http.aclose()

    def url(self, route: str) -> str:
        """``route`` under the endpoint's base URL (``/models`` -> ``…/v1/models``)."""
        return self.endpoint.base_url + route

    def root_url(self, route: str) -> str:
        """``route`` at the server's root (``/tokenize``, ``/metrics``), beside ``/v1``."""
        return server_root(self.endpoint.base_url) + route

    async def call(
        self,
        method: str,
        url: str,
        *,
        what: str = "",
        json: Any = None,
        read: Read = Read.BODY,
        retry: bool = True,
        max_bytes: int = BODY_LIMIT,
        hint: str = "",
    ) -> Answer:
        """One call: the :class:`Answer` that settled it, or one :class:`MetadataCallError`.

        ``what`` prefixes the call's name in messages (``"field probe"``);
        ``retry=False`` returns the first HTTP answer whatever its status (a
        reachability check); ``hint`` ends the message when the call fails
        (what the user can do instead).
        """
        self.open()
        name = call_name(method, url, what)
        deadline = time.monotonic() + self.limits.total_s
        attempts: list[Attempt] = []
        resent = False
        while True:
            got = await self._attempt(method, url, json, read, max_bytes, deadline, name)
            if isinstance(got, _Answered):
                message = self._message(got) if not 200 <= got.status < 300 else ""
                if not (retry and is_transient(got.status)):
                    return Answer(
                        name,
                        got.status,
                        got.headers,
                        got.body,
                        got.complete,
                        message,
                        tuple(attempts),
                    )
                said = f"answered HTTP {got.status}" + (f": {message}" if message else "")
                attempts.append(Attempt(said, got.status, message))
                wait = _retry_after_s(got.headers)
            else:
                if got.retryable and got.before_answer and not resent:
                    resent = True  # a kept-alive connection closed under us: once more, at once
                    continue
                attempts.append(Attempt(got.what))
                if not (retry and got.retryable):
                    raise self._error(name, attempts, hint, got.failure)
                wait = None
            gave_up = CallFailure.GAVE_UP
            if len(attempts) >= MAX_ATTEMPTS:
                raise self._error(name, attempts, hint, gave_up)
            if wait is not None and wait > MAX_RETRY_AFTER_S:
                why = f"it asked to retry after {wait:g} s (Retry-After), too long to wait"
                raise self._error(name, attempts, hint, gave_up, why=why)
            delay = BACKOFF_S[len(attempts) - 1] if wait is None else wait
            if time.monotonic() + delay >= deadline:
                limit = f"the call's {self.limits.total_s:g} s limit (from --llm-timeout)"
                why = (
                    f"no time was left to retry within {limit}"
                    if wait is None
                    else f"it asked to retry after {wait:g} s (Retry-After), past {limit}"
                )
                raise self._error(name, attempts, hint, gave_up, why=why)
            await asyncio.sleep(delay)

    # -- one attempt -------------------------------------------------------------------

    async def _attempt(
        self,
        method: str,
        url: str,
        body: Any,
        read: Read,
        max_bytes: int,
        deadline: float,
        name: str,
    ) -> _Answered | _Ended:
        assert self._http is not None
        limits = self.limits
        started = time.monotonic()
        left = deadline - started
        if left <= 0:
            return _Ended("ran out of time before it could be sent", CallFailure.OUT_OF_TIME)
        # httpx's own limits are backstops; the asyncio timeouts below end each phase
        timeout = httpx.Timeout(
            connect=min(limits.connect_s, left), read=left, write=left, pool=left
        )
        request = self._http.build_request(
            method, url, json=body, headers={"Accept-Encoding": "identity"}, timeout=timeout
        )
        head_limit = min(limits.connect_s + limits.first_byte_s, left)
        try:
            async with asyncio.timeout(head_limit):
                response = await self._http.send(request, stream=True)
        except TimeoutError:
            waited = time.monotonic() - started
            what = f"never answered: no response head in {waited:.1f} s"
            return _Ended(what, CallFailure.OUT_OF_TIME)
        except (httpx.HTTPError, OSError) as exc:
            kind, detail = classify_transport_error(exc)
            if kind is ErrorKind.TRUNCATED:
                what = f"closed the connection before answering ({detail})"
                what = scrub(what, *self.endpoint.secrets)
                return _Ended(what, CallFailure.GAVE_UP, before_answer=True)
            message = unreachable_message(self.endpoint, exc, call=name)
            raise MetadataCallError(message, call=name, failure=CallFailure.UNREACHABLE) from None
        try:
            return await self._read(response, read, max_bytes, deadline)
        finally:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await response.aclose()

    async def _read(
        self, response: httpx.Response, read: Read, max_bytes: int, deadline: float
    ) -> _Answered | _Ended:
        status = response.status_code
        ok = 200 <= status < 300
        if ok and read is Read.HEAD:
            return _Answered(status, response.headers, b"", False)
        first_event = ok and read is Read.FIRST_EVENT
        limit = max_bytes if ok else ERROR_BODY_LIMIT  # of an error, its message is all we keep
        if first_event:
            limit = FIRST_EVENT_LIMIT
        head_at = last = time.monotonic()
        buf = bytearray()
        chunks: AsyncIterator[bytes] = response.aiter_bytes()
        while True:
            left = deadline - time.monotonic()
            wait = min(self.limits.silence_s, left)
            try:
                if wait <= 0:
                    raise TimeoutError
                async with asyncio.timeout(wait):
                    chunk = await anext(chunks, None)
            except TimeoutError:
                now = time.monotonic()
                what = _late(status, len(buf), now - head_at, now - last, first_event)
                return _Ended(what, CallFailure.OUT_OF_TIME)
            except httpx.HTTPError as exc:
                _, detail = classify_transport_error(exc)
                what = f"sent the head (HTTP {status}), then closed the connection ({detail})"
                return _Ended(scrub(what, *self.endpoint.secrets), CallFailure.GAVE_UP)
            if chunk is None:
                return _Answered(status, response.headers, bytes(buf), True)
            buf += chunk
            last = time.monotonic()
            if first_event and (b"\n\n" in buf or b"\r\n\r\n" in buf):
                return _Answered(status, response.headers, bytes(buf), False)
            if len(buf) >= limit:
                if ok and not first_event:
                    what = f"answered HTTP {status} with more than {_size(limit)}"
                    return _Ended(what, CallFailure.TOO_LARGE)
                return _Answered(status, response.headers, bytes(buf[:limit]), False)

    # -- messages ----------------------------------------------------------------------

    def _message(self, got: _Answered) -> str:
        """The server's words for a non-2xx answer (its error message, or its body's start)."""
        try:
            text = error_message(jsonlib.loads(got.body))
        except ValueError:
            text = got.body[:300].decode("utf-8", "replace")
        return scrub(" ".join(text.split()), *self.endpoint.secrets)

    def _error(
        self,
        name: str,
        attempts: list[Attempt],
        hint: str,
        failure: CallFailure,
        *,
        why: str = "",
    ) -> MetadataCallError:
        text = f"{name} at {self.endpoint.label} {_story(attempts)}"
        if why:
            text += f"; {why}"
        if failure is CallFailure.OUT_OF_TIME:
            text += f" (the call's limit: {self.limits.total_s:g} s, from --llm-timeout)"
        if hint:
            text += f"; {hint}"
        return MetadataCallError(
            scrub(text, *self.endpoint.secrets),
            call=name,
            failure=failure,
            attempts=tuple(attempts),
        )


def _late(status: int, size: int, since_head: float, silent: float, first_event: bool) -> str:
    """What a server did that sent a head and then did not finish in time."""
    head = f"sent the head (HTTP {status})"
    if not size:
        return f"{head}, then nothing for {silent:.1f} s"
    if silent >= _QUIET_S:
        return f"{head} and {_size(size)}, then nothing for {silent:.1f} s"
    if first_event:
        return f"{head}, then sent {_size(size)} in {since_head:.1f} s without ending an event"
    return f"{head}, then streamed for {since_head:.1f} s without ending ({_size(size)})"


def _story(attempts: list[Attempt]) -> str:
    """The attempts in order: ``answered HTTP 503 three times, each: Loading model``."""
    statuses = {a.status for a in attempts}
    if len(attempts) > 1 and len(statuses) == 1 and None not in statuses:
        told = f"answered HTTP {attempts[0].status} {_TIMES.get(len(attempts), 'several times')}"
        messages = [a.message for a in attempts]
        if len(set(messages)) == 1:
            return f"{told}, each: {messages[0]}" if messages[0] else told
        return f"{told}: " + "; ".join(m or "(no message)" for m in messages)
    return ", then ".join(a.what for a in attempts)


def _size(n: int) -> str:
    if n == 1:
        return "1 byte"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.3g} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.3g} KiB"
    return f"{n} bytes"


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` in seconds (a number or an HTTP date), or None."""
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class BlockingMetadataClient:
    """:class:`MetadataClient` for synchronous code, on a private event loop in a daemon thread.

    Synchronous callers (the server tokenizer sizing prompts, tokenizer
    discovery, the identity probe) may run inside another event loop's thread,
    where no loop can be started; the calls run on this client's own loop
    instead, so their deadlines are enforced by cancellation exactly as for
    async callers, and one connection pool serves many calls. Pickles as its
    endpoint and limits (a worker process opens its own loop when it calls).
    """

    def __init__(self, endpoint: Endpoint, *, limits: CallLimits | None = None) -> None:
        self.endpoint = endpoint
        self.limits = limits or CallLimits.of(endpoint.timeouts)
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: list[MetadataClient] = []  # the one client living on the loop, once made
        self._stop: weakref.finalize[Any, Any] | None = None

    def __enter__(self) -> BlockingMetadataClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "limits": self.limits}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.endpoint = state["endpoint"]
        self.limits = state["limits"]
        self._reset()

    def with_limits(self, limits: CallLimits) -> BlockingMetadataClient:
        """A client of the same endpoint under other limits (its own loop)."""
        return BlockingMetadataClient(self.endpoint, limits=limits)

    def url(self, route: str) -> str:
        return self.endpoint.base_url + route

    def root_url(self, route: str) -> str:
        return server_root(self.endpoint.base_url) + route

    def call(
        self,
        method: str,
        url: str,
        *,
        what: str = "",
        json: Any = None,
        read: Read = Read.BODY,
        retry: bool = True,
        max_bytes: int = BODY_LIMIT,
        hint: str = "",
    ) -> Answer:
        """:meth:`MetadataClient.call`, waited for (same arguments, same errors)."""
        loop = self._running()
        kwargs: dict[str, Any] = {
            "what": what,
            "json": json,
            "read": read,
            "retry": retry,
            "max_bytes": max_bytes,
            "hint": hint,
        }
        future = asyncio.run_coroutine_threadsafe(self._call(method, url, kwargs), loop)
        try:
            return future.result(timeout=self.limits.total_s + _GRACE_S)
        except concurrent.futures.TimeoutError:  # the call's own deadline failed: a bug
            future.cancel()
            name = call_name(method, url, what)
            raise MetadataCallError(
                f"{name} at {self.endpoint.label} did not end within its "
                f"{self.limits.total_s:g} s limit",
                call=name,
                failure=CallFailure.OUT_OF_TIME,
            ) from None

    async def _call(self, method: str, url: str, kwargs: dict[str, Any]) -> Answer:
        if not self._clients:
            self._clients.append(MetadataClient(self.endpoint, limits=self.limits))
        return await self._clients[0].call(method, url, **kwargs)

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_serve, args=(loop,), name="llmperf-metadata", daemon=True
                )
                thread.start()
                self._loop, self._clients = loop, []
                # closed when this client is (or is collected, or at exit): never a stray socket
                self._stop = weakref.finalize(self, _shut_down, loop, thread, self._clients)
            return self._loop

    def close(self) -> None:
        """Close the connections and stop the loop (idempotent; a later call starts anew)."""
        with self._lock:
            stop, self._loop, self._stop = self._stop, None, None
        if stop is not None:
            stop()


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The loop thread: run until stopped, then close the loop (its own thread closes it)."""
    try:
        loop.run_forever()
    finally:
        loop.close()


def _shut_down(
    loop: asyncio.AbstractEventLoop, thread: threading.Thread, clients: list[MetadataClient]
) -> None:
    """Close the loop's client, stop the loop, join its thread (from any thread)."""
    if loop.is_closed():
        return
    if threading.current_thread() is thread:  # collected on the loop itself: no waiting there
        task = loop.create_task(_close(clients))
        task.add_done_callback(lambda _: loop.stop())
        return
    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(_close(clients), loop).result(timeout=_GRACE_S)
    with contextlib.suppress(RuntimeError):  # closed meanwhile
        loop.call_soon_threadsafe(loop.stop)
    thread.join(_GRACE_S)


async def _close(clients: list[MetadataClient]) -> None:
    for client in clients:
        with contextlib.suppress(Exception):
            await client.aclose()
