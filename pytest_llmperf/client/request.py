"""Send one streaming request and fill its :class:`RequestRecord`.

Every failure mode of a real server ends here as ``record.error`` with a
reason category; nothing raises out of :func:`send_request` except
cancellation. The connection (:mod:`~pytest_llmperf.client.http1`) takes one
``monotonic_ns`` reading per read from the socket, in ``buffer_updated``, and
every event that read completed is stamped with it: that is when the client
could first have seen those bytes. ``t_send`` is taken as the request's bytes
are handed to the socket.

The per-request limits (:class:`~pytest_llmperf.client.endpoint.Timeouts`)
are watched by one timer per request, re-armed only when it fires early:
``first_token`` and ``total`` count from the start of the request (connect
included), ``stall`` from the last read. A :class:`~pytest_llmperf.client.cancel.
CancelAt` point in time (``after_ms``, from ``t_send``) is the same timer's third
deadline; its token count is checked per event, on a path of its own that
requests without one never take.

A request lost on a *reused* connection before a single byte of its response
arrived (the server closed the idle connection just as it was reused: EOF or
RST before the head, or a failed write) is sent once more, on a new
connection, and counted (``record.connection_retries``). Only then: never
after any byte of a response (the server may have started on it), never when
a fresh connection fails (the server really refused), never for a timeout or
a cancel. The retry changes none of the request's clocks: ``t_sched`` and
``t_send`` (the first write) stay, the same timer keeps its limits and cancel
point, and the retry's own write is ``record.t_resend``.

Three things are done only for the requests that ask for them, decided once per
request: a cancel point in tokens, collecting the answer's text
(``record.reply`` is a list when the request starts: a session turn whose
reply a later turn quotes), and collecting the output a sample's
:class:`~pytest_llmperf.workloads.output_contract.OutputContract` keeps (a
schema or tools to check it against, greedy decoding to fingerprint it:
:mod:`~pytest_llmperf.client.outputs`), which is checked once, after the
stream ended well (:mod:`~pytest_llmperf.client.output_check`). The common
request pays one attribute check per read for all three.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine
from enum import Enum
from itertools import repeat
from typing import TYPE_CHECKING, Any

from pytest_llmperf.apis.events import ChunkInfo, error_message
from pytest_llmperf.apis.format import AnswerFault, ApiFormat, RunReader, WholeAnswer
from pytest_llmperf.apis.registry import api_format
from pytest_llmperf.client.affinity import NO_AFFINITY, Affinity
from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.http1 import Http1Connection
from pytest_llmperf.client.output_check import settle_output
from pytest_llmperf.client.outputs import CollectedOutput
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.server_timing import apply_server_timing
from pytest_llmperf.client.sse import SSEParser
from pytest_llmperf.client.stream_client import StreamClient, TransportFailure
from pytest_llmperf.redaction import scrub
from pytest_llmperf.workloads.base import Sample

if TYPE_CHECKING:
    from pytest_llmperf.workloads.output_contract import OutputContract

__all__ = ["CancelAt", "request_data", "request_model", "send_request", "start_request"]

_ERROR_BODY_LIMIT = 64 * 1024
_JSON_BODY_LIMIT = 64 * 1024 * 1024


class _Body(Enum):
    """What the response turned out to be, from its status and content type."""

    STREAM = "a stream of events, read by the format's event reader"
    ERROR = "an error answer (status 300 or more), read whole for its message"
    WHOLE = "one JSON answer, read whole (the format's answer check, or its event reader)"


# bound once: the reading loop compares them per read (``is``, no attribute look-up)
_STREAM, _ERROR, _WHOLE = _Body.STREAM, _Body.ERROR, _Body.WHOLE
_NEVER = 1 << 62  # a deadline that does not come (monotonic ns)


async def send_request(
    client: StreamClient,
    endpoint: Endpoint,
    sample: Sample,
    record: RequestRecord,
    *,
    cancel: CancelAt | None = None,
) -> RequestRecord:
    """Stream ``sample`` to ``endpoint``; the record says how it went.

    ``cancel``: abandon the request at that point (``record.cancelled``, no
    error; its connection is closed, never reused). ``record.reply``, when it
    is a list as the request starts, collects the answer's text pieces.
    ``sample.headers`` go into this request's head; a bad one fails the
    request as a ``client_error`` before anything is sent. A request the
    server's close overtook on a reused connection, before any byte of its
    response, goes out once more on a new one (``record.connection_retries``;
    see the module's docstring). ``sample.model`` (when not None) names the served
    model (``record.model``); ``sample.contract`` adds its request fields and, on a
    completed request, its output's check and fingerprint (``record.invalid``,
    ``record.output_digest``).
    """
    return await start_request(client, endpoint, sample, record, cancel=cancel)


def start_request(
    client: StreamClient,
    endpoint: Endpoint,
    sample: Sample,
    record: RequestRecord,
    *,
    cancel: CancelAt | None = None,
    data: bytes | None = None,
) -> Coroutine[Any, Any, RequestRecord]:
    """:func:`send_request`, begun in the caller's own step: when a kept-alive connection
    is idle in the pool, the request is written before this returns, and the coroutine
    returned only reads the response; otherwise the coroutine connects first.

    An open loop's pacer calls this at the planned instant, so the request leaves
    then, not a loop turn later when a task of its own first runs (the reads ready
    meanwhile come first: that turn was most of the schedule lag). ``data``: the
    request's bytes built ahead (:func:`request_data`), or None to build them here.
    """
    record.t_send = time.monotonic_ns()  # replaced by the socket write's instant
    try:
        _note_sample(endpoint, sample, record)
        if data is None:
            data = request_data(client, endpoint, sample)
    except ValueError as exc:  # a per-request header the workload should have refused
        record.fail(ErrorKind.CLIENT, f"request not sent: {exc}", now=record.t_send)
        return _settled(record)
    reading = _reading_for(endpoint, sample, record, record.t_send, cancel)
    conn = client.take_idle()
    if conn is None:
        return _connect_and_send(client, endpoint, data, reading)
    _write_or_release(client, endpoint, conn, data, reading)
    return _response(client, endpoint, conn, data, reading)


def request_data(client: StreamClient, endpoint: Endpoint, sample: Sample) -> bytes:
    """The whole request's bytes (``ValueError``: a bad per-request header).

    ``json.dumps`` of a long prompt takes tens of µs: an open loop builds them
    before the planned instant and hands them to :func:`start_request`.
    """
    api = endpoint.api
    build = api_format(api).build_body
    body = json.dumps(build(_served_model(endpoint, sample), sample, endpoint.fields)).encode()
    return client.request_bytes(api, body, sample.headers)


def request_model(sample: Sample, endpoint_model: str) -> str:
    """The ``model`` a request of ``sample`` names: the adapter (or base model) the
    sample drew (``llm_workload(adapters=...)``: ``""`` is the base model, by the
    endpoint's name for it), else the endpoint's model."""
    return sample.model or endpoint_model


def _served_model(endpoint: Endpoint, sample: Sample) -> str:
    """The model ``sample`` is sent to (its own, an adapter, or the endpoint's)."""
    if endpoint.model is None:
        raise RuntimeError("endpoint model is not resolved; call resolve_model() first")
    return request_model(sample, endpoint.model)


def _note_sample(endpoint: Endpoint, sample: Sample, record: RequestRecord) -> None:
    """What the record keeps of the sample sent: its served model, its images."""
    if sample.model is not None:
        record.model = _served_model(endpoint, sample)
    if sample.images and api_format(endpoint.api).takes_images:
        record.images = len(sample.images)
        record.image_bytes = sum(image.nbytes for image in sample.images)


def _reading_for(
    endpoint: Endpoint,
    sample: Sample,
    record: RequestRecord,
    start_ns: int,
    cancel: CancelAt | None,
) -> _Reading:
    reading = _Reading(
        record,
        endpoint.timeouts,
        start_ns,
        cancel,
        api=endpoint.api,
        contract=sample.contract,
        affinity=endpoint.affinity,
    )
    check = reading.format.answer_check
    if check is not None:  # an answer read whole (embeddings): checked against the sample
        reading.check_answer = check(sample)
    if not reading.format.streams_tokens:
        record.output_requested = 0  # nothing is generated: no output length was asked for
    return reading


def _write_or_release(
    client: StreamClient,
    endpoint: Endpoint,
    conn: Http1Connection,
    data: bytes,
    reading: _Reading,
) -> None:
    """The request's first write: ``t_send`` is its instant; the limits' timer starts.
    Should it raise (a bug), the connection goes back before the error goes on."""
    try:
        if conn.reused:
            reading.resend_on = conn
        reading.record.t_send = conn.send(data, reading)
        reading.watch()
    except BaseException:
        _ended(client, endpoint, conn, reading)
        raise


async def _connect_and_send(
    client: StreamClient, endpoint: Endpoint, data: bytes, reading: _Reading
) -> RequestRecord:
    """Take a connection (a new one, or wait for a pool slot), write, read the response."""
    record = reading.record
    timeouts = endpoint.timeouts
    try:
        conn = await client.acquire(min(timeouts.connect, timeouts.first_token))
    except TransportFailure as exc:
        record.fail(exc.kind, exc.detail, now=time.monotonic_ns())
        return _ended(client, endpoint, None, reading)
    except BaseException:  # cancelled while connecting
        _ended(client, endpoint, None, reading)
        raise
    _write_or_release(client, endpoint, conn, data, reading)
    return await _response(client, endpoint, conn, data, reading)


async def _response(
    client: StreamClient,
    endpoint: Endpoint,
    conn: Http1Connection,
    data: bytes,
    reading: _Reading,
) -> RequestRecord:
    """Await the response of a request written on ``conn``; then give the connection back."""
    record = reading.record
    try:
        if await reading.done:  # lost on a reused connection before any response byte
            record.connection_retries += 1
            conn = await client.redial(conn, reading.connect_budget_s())
            if not reading.done.done():  # a limit may have passed while connecting
                record.t_resend = conn.send(data, reading)
                await reading.done
    except TransportFailure as exc:
        record.fail(exc.kind, exc.detail, now=time.monotonic_ns())
    finally:
        _ended(client, endpoint, conn, reading)
    return record


def _ended(
    client: StreamClient, endpoint: Endpoint, conn: Http1Connection | None, reading: _Reading
) -> RequestRecord:
    """The request is over (or never went): its timer, its connection, its end time."""
    record = reading.record
    reading.stop_watching()
    if conn is not None:
        conn.detach()  # closes it unless its response was read to the end
        if record.cancelled or (record.status or 0) >= 500:
            # cancelled: the user went away, and so does the connection (even if the
            # read that reached the cancel point happened to hold the response's end).
            # 5xx: uvicorn answers an unhandled error without "Connection: close" and
            # then resets the socket (seen on transformers serve): never reuse such a one
            conn.close()
        client.release(conn)
    if not record.t_end:
        record.t_end = time.monotonic_ns()
    if record.error is not None:  # failure path only: servers may echo the key back
        record.error_detail = scrub(record.error_detail, *endpoint.secrets)
    return record


async def _settled(record: RequestRecord) -> RequestRecord:
    return record


class _Reading:
    """The response sink of one request (see :class:`~pytest_llmperf.client.http1.ResponseSink`).

    Runs inside the connection's ``buffer_updated``: it must not raise (a
    bug becomes a ``client_error`` of this request) and it resolves
    :attr:`done` once the request's outcome is known, with ``False``. The one
    exception: while ``resend_on`` is the (reused) connection the request went
    out on, losing that connection before any byte of the response resolves
    :attr:`done` with ``True`` instead — "send it again" — and puts a fresh
    future in its place for the second attempt, which the same timer watches.

    ``api`` names the wire format (:attr:`format`, from the registry), which decides
    everything that differs between APIs: the reader of the stream's events (a
    :class:`~pytest_llmperf.apis.format.RunReader` also takes a read's run of its
    stream's common event at once), whether a ``finish_reason`` ends the stream or
    only the terminal event (``done``) does, what a cut stream lacked, and, for a
    format that streams no tokens, the check of its answer read whole
    (:attr:`check_answer`, set by :func:`start_request` from the sample). ``contract``: the
    sample's output contract; when it keeps the output, every event (and a
    whole answer) is collected and the output settled once the request completed.
    """

    __slots__ = (
        "_answer_text",
        "_blank_finish_ns",
        "_body",
        "_cancel",
        "_cancel_ns",
        "_cancel_tokens",
        "_contract",
        "_finish_ends",
        "_finished",
        "_headers",
        "_mode",
        "_output",
        "_parse",
        "_parser",
        "_per_event",
        "_reader",
        "_start_ns",
        "_timeouts",
        "_timer",
        "_whole_reads",
        "affinity",
        "check_answer",
        "done",
        "format",
        "last_read_ns",
        "record",
        "resend_on",
    )

    def __init__(
        self,
        record: RequestRecord,
        timeouts: Timeouts,
        start_ns: int,
        cancel: CancelAt | None = None,
        *,
        api: str = "chat",
        contract: OutputContract | None = None,
        affinity: Affinity = NO_AFFINITY,
    ) -> None:
        self.record = record
        # the response head's replica and router token (once per response)
        self.affinity = affinity
        self.format: ApiFormat = api_format(api)
        reader = self.format.event_reader
        self._parse: Callable[[str], ChunkInfo] = _no_events if reader is None else reader()
        # a reader that learns its stream's common event: _events takes its runs at once
        self._reader = self._parse if isinstance(self._parse, RunReader) else None
        self._answer_text: Callable[[str], str] = self.format.answer_text
        self._finish_ends = self.format.finish_ends
        # the check of an answer read whole (a format that streams no tokens)
        self.check_answer: Callable[[bytes], WholeAnswer | AnswerFault] | None = None
        self.done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.resend_on: Http1Connection | None = None
        self.last_read_ns = start_ns
        self._start_ns = start_ns
        self._timeouts = timeouts
        self._timer: asyncio.TimerHandle | None = None
        self._mode = _STREAM
        self._parser = SSEParser()
        self._finished = False
        self._blank_finish_ns = 0
        self._body = bytearray()
        self._headers: dict[str, str] = {}
        self._cancel = cancel
        self._cancel_ns = _NEVER  # set by watch(), once t_send is known
        self._cancel_tokens = 0 if cancel is None else cancel.after_tokens or 0
        if contract is not None and (not contract.keeps_output or not self.format.collects_output):
            contract = None
        self._contract = contract
        self._output = None if contract is None else CollectedOutput(api, marks=contract.greedy)
        # Events go through _events_watched (per event: the cancel count, the reply text,
        # the output) only for the requests that need it; the rest keep the plain loop.
        self._per_event = (
            bool(self._cancel_tokens) or record.reply is not None or contract is not None
        )
        # a read that is a run of the common chunk, taken from its bytes (not per event)
        self._whole_reads = None if self._per_event else self._reader

    # -- limits ------------------------------------------------------------------

    def watch(self) -> None:
        """Arm the request's one timer; ``record.t_send`` is the socket write's instant."""
        cancel = self._cancel
        if cancel is not None and cancel.after_ms is not None:
            self._cancel_ns = self.record.t_send + int(cancel.after_ms * 1e6)
        self._arm(min(self._limit_ns(), self._stall_ns(), self._cancel_ns))

    def stop_watching(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def connect_budget_s(self) -> float:
        """How long a retry's connect may take: the connect limit, or what is left of
        the request's first-token limit if less (the timer fails the request then)."""
        left = (self._limit_ns() - time.monotonic_ns()) / 1e9
        return max(0.0, min(self._timeouts.connect, left))

    def _limit_ns(self) -> int:
        """When the first-token limit (before the first token) or the total limit ends."""
        t = self._timeouts
        return self._start_ns + int((t.total if self.record.t_first else t.first_token) * 1e9)

    def _stall_ns(self) -> int:
        return self.last_read_ns + int(self._timeouts.stall * 1e9)

    def _arm(self, at_ns: int) -> None:
        # loop.time() is time.monotonic(): the same clock as monotonic_ns on every platform.
        self._timer = asyncio.get_running_loop().call_at(at_ns / 1e9, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.done.done():
            return
        now = time.monotonic_ns()
        t = self._timeouts
        limit, stall, cancel = self._limit_ns(), self._stall_ns(), self._cancel_ns
        if now >= cancel and cancel <= limit and cancel <= stall:  # the first reached wins
            if self._mode == _ERROR:  # the head already said the request failed
                self._http_error(now)
            else:
                self._cancelled(now)
        elif now >= limit:
            if self.record.t_first:
                self._fail(ErrorKind.TOTAL_TIMEOUT, f"no end of stream within {t.total:g} s", now)
            elif not self.format.streams_tokens:  # no token ever comes: the answer is the first
                detail = f"no answer within {t.first_token:g} s"
                self._fail(ErrorKind.FIRST_TOKEN_TIMEOUT, detail, now)
            else:
                detail = f"no first token within {t.first_token:g} s"
                self._fail(ErrorKind.FIRST_TOKEN_TIMEOUT, detail, now)
        elif now >= stall:
            self._fail(ErrorKind.READ_TIMEOUT, f"no bytes for {t.stall:g} s (stall)", now)
        else:
            self._arm(min(limit, stall, cancel))

    # -- ResponseSink ------------------------------------------------------------

    def on_head(self, status: int, headers: dict[str, str], now_ns: int) -> None:
        self.last_read_ns = now_ns
        self.record.status = status
        self.affinity.capture(headers, self.record)
        if status >= 300:  # redirects are not followed: a wrong URL
            self._mode, self._headers = _ERROR, headers
        elif not self.format.streams_tokens or headers.get("content-type", "").startswith(
            "application/json"
        ):
            self._mode = _WHOLE

    def on_body(self, data: bytes, now_ns: int) -> None:
        if self.done.done():
            return
        self.last_read_ns = now_ns
        if self._mode == _STREAM:
            reader = self._whole_reads
            if reader is not None and self._parser.idle and (count := reader.sse_run(data)):
                # the read is nothing but text tokens of the stream's common chunk
                _text_events(self.record, count, now_ns, reader.text_info)  # type: ignore[arg-type]
                return
            try:
                if self._per_event:
                    self._events_watched(self._parser.feed(data), now_ns)
                else:
                    self._events(self._parser.feed(data), now_ns)
            except ValueError as exc:  # an SSE line past the size bound
                self._fail(ErrorKind.PROTOCOL, str(exc), now_ns)
            except Exception as exc:  # a bug here must not take the connection's loop down
                self._fail(ErrorKind.CLIENT, f"{type(exc).__name__}: {exc}", now_ns)
            return
        self._body += data
        if self._mode == _ERROR and len(self._body) > _ERROR_BODY_LIMIT:
            self._http_error(now_ns)
        elif self._mode == _WHOLE and len(self._body) > _JSON_BODY_LIMIT:
            self._fail(ErrorKind.PROTOCOL, f"JSON answer over {_JSON_BODY_LIMIT} bytes", now_ns)

    def on_end(self, now_ns: int) -> None:
        if self.done.done():
            return
        if self._mode == _ERROR:
            self._http_error(now_ns)
            return
        if self._mode == _WHOLE:
            check = self.check_answer
            if check is not None:
                _apply_answer(check(bytes(self._body)), now_ns, self.record)
            else:
                raw, output = bytes(self._body), self._output
                _apply_whole(raw, now_ns, self.record, self._parse, self._answer_text, output)
                self._settle()
            self._resolve()
            return
        record = self.record
        try:
            if self._per_event:
                self._events_watched(self._parser.close(), now_ns)
            else:
                self._events(self._parser.close(), now_ns)
        except Exception as exc:
            self._fail(ErrorKind.CLIENT, f"{type(exc).__name__}: {exc}", now_ns)
            return
        if self.done.done():  # the last events failed the request, or reached its cancel point
            return
        if record.error is None:
            record.t_end = now_ns
            if self._blank_finish_ns and record.usage_completion_tokens == record.token_events + 1:
                # vLLM: the last token was a partial character, sent as "" with the finish
                _token_event(record, self._blank_finish_ns)
                if self._output is not None:
                    self._output.mark("")
            if not self._finished:
                record.fail(ErrorKind.TRUNCATED, f"stream ended without {self.format.stream_end}")
            elif not record.has_output and not _generated(record):
                # Nothing says a token was generated: no event, and no usage counting one.
                record.fail(ErrorKind.EMPTY, _empty_detail(record))
            else:
                # Generated but blank (tokens that decode to no visible text) is completed,
                # and counted blank (docs/measurement.md, "Blank replies").
                record.blank = not record.has_output
                self._settle()
        self._resolve()

    def on_failure(self, kind: ErrorKind, detail: str, now_ns: int) -> None:
        if self.done.done():
            return
        conn = self.resend_on
        if conn is not None and kind is ErrorKind.TRUNCATED and not conn.answered:
            # The server closed the reused connection as the request went out: once more,
            # on a new connection (send_request), under the same timer.
            self.resend_on = None
            done, self.done = self.done, asyncio.get_running_loop().create_future()
            done.set_result(True)
            return
        self._fail(kind, detail, now_ns)

    # -- outcomes ----------------------------------------------------------------

    def _events(self, payloads: list[str], now: int) -> None:
        record = self.record
        parse = self._parse
        reader = self._reader
        start, count = 0, len(payloads)
        while start < count:
            if reader is not None:  # a run of the stream's common text chunk: taken at once
                run = reader.plain_run(payloads, start)
                if run:
                    info = reader.text_info
                    assert info is not None
                    _text_events(record, run, now, info)
                    start += run
                    if start == count:
                        return
            info = _on_event(payloads[start], now, record, parse)
            start += 1
            if info is None:
                self._resolve()
                return
            if info.done or (info.finish_reason and self._finish_ends):
                self._finished = True
                if info.blank_finish:
                    self._blank_finish_ns = now

    def _events_watched(self, payloads: list[str], now: int) -> None:
        """:meth:`_events` with the per-event work of a cancel count or a collected reply.

        The read that completes the ``after_tokens``-th token event cancels the
        request there: later events of that read are not applied, so a cancelled
        request has exactly that many token events. An event that also ends the
        stream (``finish_reason`` on the last token's chunk) completes it instead.
        """
        record = self.record
        reply = record.reply
        output = self._output
        stop_at = self._cancel_tokens
        parse, answer_text = self._parse, self._answer_text
        for data in payloads:
            info = _on_event(data, now, record, parse)
            if info is None:
                self._resolve()
                return
            if info.done or (info.finish_reason and self._finish_ends):
                self._finished = True
                if info.blank_finish:
                    self._blank_finish_ns = now
            if info.answer and reply is not None and (text := answer_text(data)):
                reply.append(text)
            if output is not None:
                output.feed(data, info.event)
            if info.event and record.token_events == stop_at and not self._finished:
                self._cancelled(now)
                return

    def _settle(self) -> None:
        """A completed request's output: checked and fingerprinted as its contract says."""
        if self._output is not None and self._contract is not None and self.record.error is None:
            settle_output(self.record, self._contract, self._output)

    def _cancelled(self, now: int) -> None:
        """The cancel point is reached: stop reading (send_request closes the connection)."""
        self.record.cancelled = True
        self.record.t_end = now
        self._resolve()

    def _http_error(self, now: int) -> None:
        raw = bytes(self._body[:_ERROR_BODY_LIMIT])
        try:
            detail = error_message(json.loads(raw))
        except ValueError:
            detail = raw[:200].decode("utf-8", "replace")
        status = self.record.status or 0
        kind = ErrorKind.RATE_LIMITED if status == 429 else ErrorKind.HTTP
        extra = ""
        if retry_after := self._headers.get("retry-after"):
            extra = f" (Retry-After: {retry_after[:40]})"
        elif status < 400 and (location := self._headers.get("location")):
            extra = f" (redirect to {location[:200]}; redirects are not followed)"
        self._fail(kind, f"HTTP {status}: {detail or '(empty body)'}{extra}", now)

    def _fail(self, kind: ErrorKind, detail: str, now: int) -> None:
        self.record.fail(kind, detail, now=now)
        self._resolve()

    def _resolve(self) -> None:
        if not self.done.done():
            self.done.set_result(False)


def _no_events(data: str) -> ChunkInfo:
    """The event reader of a format that streams none (its answers are read whole)."""
    raise ValueError("this API streams no events")


def _on_event(
    data: str, now: int, record: RequestRecord, parse: Callable[[str], ChunkInfo]
) -> ChunkInfo | None:
    """Apply one event (read by its format's ``parse``); ``None`` when it failed the request."""
    try:
        info = parse(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # JSON of the wrong shape
        why = exc if isinstance(exc, ValueError) else repr(exc)
        record.fail(ErrorKind.PROTOCOL, f"malformed stream chunk: {why}", now=now)
        return None
    if info.error:
        record.fail(ErrorKind.STREAM_ERROR, info.error, now=now)
        return None
    if info.usage:
        _apply_usage(record, info.usage)
    if info.timing is not None:  # only ever on the usage chunk or the finish chunk
        apply_server_timing(record, info.timing)
    if info.event:
        _token_event(record, now)
        if info.output:
            record.has_output = True
        if info.answer and not record.t_out:
            record.t_out = now
        if info.reasoning:
            record.reasoning_events += 1
    if info.finish_reason:
        record.finish_reason = info.finish_reason
    return info


def _text_events(record: RequestRecord, count: int, now: int, info: ChunkInfo) -> None:
    """``count`` token events of one read, each meaning ``info`` (a plain text token): what
    :func:`_on_event` does for each of them, done once (the gaps within a read are 0)."""
    if record.t_first:
        record.gaps_ns.append(now - record.t_last)
    else:
        record.t_first = now
    if count > 1:
        record.gaps_ns.extend(repeat(0, count - 1))
    record.t_last = now
    record.token_events += count
    if info.output:
        record.has_output = True
    if info.answer and not record.t_out:
        record.t_out = now


def _token_event(record: RequestRecord, now: int) -> None:
    if record.t_first:
        record.gaps_ns.append(now - record.t_last)
    else:
        record.t_first = now
    record.t_last = now
    record.token_events += 1


def _apply_whole(
    raw: bytes,
    now: int,
    record: RequestRecord,
    parse: Callable[[str], ChunkInfo],
    answer_text: Callable[[str], str],
    output: CollectedOutput | None = None,
) -> None:
    """A server that ignored ``stream: true``: one timestamp for the whole answer
    (collected into ``output`` when the request keeps it)."""
    text = raw.decode("utf-8", "replace")
    try:
        info = parse(text)
    except (ValueError, TypeError, KeyError, AttributeError):  # not JSON, or the wrong shape
        record.fail(ErrorKind.PROTOCOL, f"response is not JSON: {raw[:80]!r}", now=now)
        return
    if info.error:
        record.fail(ErrorKind.STREAM_ERROR, info.error, now=now)
        return
    _apply_usage(record, info.usage)
    if info.timing is not None:
        apply_server_timing(record, info.timing)
    if not info.output and not _generated(record):  # no text, and no usage counting tokens
        record.fail(ErrorKind.EMPTY, _empty_detail(record, whole=True), now=now)
        return
    if info.answer and record.reply is not None and (answer := answer_text(text)):
        record.reply.append(answer)
    if output is not None:
        output.whole(text)
    record.finish_reason = info.finish_reason
    if not info.output:  # blank: the usage counts tokens, none visible; no event to time
        record.blank = True
        record.t_end = now
        return
    record.has_output = True
    record.t_first = record.t_last = record.t_end = now
    if info.answer:
        record.t_out = now
    record.token_events = 1


def _apply_answer(answer: WholeAnswer | AnswerFault, now: int, record: RequestRecord) -> None:
    """An answer read whole at ``now`` and checked by its format (embeddings: one vector
    per input, all of one length): completed with its sizes and usage, or failed saying
    what was wrong.

    No token streams, so ``t_first``/``t_out`` stay 0; ``t_last`` = ``t_end`` = ``now``.
    """
    if isinstance(answer, AnswerFault):
        kind = ErrorKind.STREAM_ERROR if answer.server_error else ErrorKind.PROTOCOL
        record.fail(kind, answer.message, now=now)
        return
    record.t_last = record.t_end = now
    record.embedding_inputs = answer.inputs
    record.embedding_dimensions = answer.dimensions
    if answer.prompt_tokens is not None:
        record.usage_prompt_tokens = answer.prompt_tokens
    record.has_output = True


def _generated(record: RequestRecord) -> bool:
    """Whether anything says the server generated tokens for a reply with no visible text:
    its usage's count of output tokens where it gave one (0 outweighs empty deltas: the
    server's own count says nothing was generated), else a token event (empty included)."""
    counted = record.usage_completion_tokens
    if counted is not None:
        return counted > 0
    return record.token_events > 0


def _empty_detail(record: RequestRecord, *, whole: bool = False) -> str:
    """Why a reply is ``empty_response``: no text, and nothing that says tokens were
    generated (no token event and no usage, or a usage that counts none)."""
    what = "response" if whole else "stream"
    detail = f"{what} carried no generated text (no text, reasoning or tool-call arguments"
    if record.usage_completion_tokens is not None:
        detail += f"; its usage counts {record.usage_completion_tokens} completion tokens"
        if record.token_events:
            detail += f" beside {record.token_events} empty delta(s)"
    else:
        detail += "; no token event and no usage"
    return detail + ")"


def _apply_usage(record: RequestRecord, usage: dict[str, Any] | None) -> None:
    if not usage:
        return
    completion = usage.get("completion_tokens")
    if completion.__class__ is int:
        record.usage_completion_tokens = completion
    prompt = usage.get("prompt_tokens")
    if prompt.__class__ is int:
        record.usage_prompt_tokens = prompt
    details = usage.get("prompt_tokens_details")
    if details.__class__ is dict and details.get("cached_tokens").__class__ is int:
        record.usage_cached_tokens = details["cached_tokens"]
    details = usage.get("completion_tokens_details")
    if details.__class__ is dict and details.get("reasoning_tokens").__class__ is int:
        record.usage_reasoning_tokens = details["reasoning_tokens"]
