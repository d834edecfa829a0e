"""The client's per-read path in pure Python: the fallback of the compiled ``_speedups``.

Everything a read of a streamed response runs through before its token events are
on the record, when the read is nothing but whole events of the stream's common
chunk (nearly every read of a long stream): the connection's timestamp and llhttp
framing (:class:`ConnectionReads`, the base of
:class:`~pytest_llmperf.client.http1.Http1Connection`), the response sink's check
that the read is such a run (:class:`SinkReads`, the base of the request's reading
sink in :mod:`~pytest_llmperf.client.request`) and the record's update
(:func:`text_events`). Anything else leaves this path through a method the
subclass defines (``_unasked``, ``_parse_failed``, ``_upgraded``, ``_too_long``;
``_on_body``), so the rare cases are written once, in Python.

``pytest_llmperf/client/_speedups.pyx`` is the same API compiled (Cython): the same
steps with no Python frame between the socket's read and the record. Which one the
client uses is decided once, at import (:mod:`~pytest_llmperf.client.speedups`);
the tests run both on the same bytes and compare the records.
"""

from __future__ import annotations

import time
from itertools import repeat
from typing import TYPE_CHECKING, Any

from httptools import HttpParserError, HttpParserUpgrade

if TYPE_CHECKING:
    from pytest_llmperf.apis.events import ChunkInfo
    from pytest_llmperf.apis.format import RunReader
    from pytest_llmperf.client.records import RequestRecord
    from pytest_llmperf.client.sse import SSEParser

__all__ = ["COMPILED", "MAX_HEAD_BYTES", "ConnectionReads", "SinkReads", "text_events"]

COMPILED = False  # this module is the pure-Python one
MAX_HEAD_BYTES = 64 * 1024  # a head, or framing bytes without body data between; more is not sane


class ConnectionReads:
    """One connection's reads: ``get_buffer`` / ``buffer_updated`` of an asyncio
    ``BufferedProtocol``, one ``monotonic_ns`` per read, the read framed by llhttp and
    its body handed to the sink in one piece (client/http1.py says why)."""

    __slots__ = ("_buffer", "_now", "_parser", "_pieces", "_sink", "_unframed")

    _buffer: memoryview  # the thread's read buffer
    _now: int  # the instant of the read being parsed (0: nothing of the response read)
    _parser: Any  # httptools.HttpResponseParser | None (None once the connection is lost)
    _pieces: list[bytes]  # body bytes of this read (llhttp's on_body is its append)
    _sink: Any  # the current response's ResponseSink, or None
    _unframed: int  # bytes read since the last head or body data (bounded)

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
            self._upgraded(now)
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

    # -- what the connection defines (the rare cases) ------------------------------

    def _unasked(self, data: memoryview) -> None:
        raise NotImplementedError

    def _parse_failed(self, exc: HttpParserError, data: memoryview) -> None:
        raise NotImplementedError

    def _upgraded(self, now: int) -> None:
        raise NotImplementedError

    def _too_long(self, now: int) -> None:
        raise NotImplementedError


class SinkReads:
    """A response sink's ``on_body``: a read that is nothing but text tokens of the
    stream's common chunk goes on the record from its bytes (the reader's
    :meth:`~pytest_llmperf.apis.format.RunReader.sse_run`); anything else to
    ``_on_body``. ``_whole_reads`` is that reader while the response is a stream whose
    events need no look of their own (else None); ``_parser`` the response's SSE parser
    (a read is taken whole only when it holds nothing of an earlier one)."""

    __slots__ = ("_parser", "_whole_reads", "done", "last_read_ns", "record")

    _parser: SSEParser
    _whole_reads: RunReader | None
    done: Any  # asyncio.Future[bool]: resolved once the request's outcome is known
    last_read_ns: int  # the instant of the response's last read (the stall limit's start)
    record: RequestRecord

    def on_body(self, data: bytes, now_ns: int) -> None:
        if self.done.done():
            return
        self.last_read_ns = now_ns
        reader = self._whole_reads
        if reader is not None and self._parser.idle and (count := reader.sse_run(data)):
            # the read is nothing but text tokens of the stream's common chunk
            text_events(self.record, count, now_ns, reader.text_info)  # type: ignore[arg-type]
            return
        self._on_body(data, now_ns)

    def _on_body(self, data: bytes, now_ns: int) -> None:
        raise NotImplementedError


def text_events(record: RequestRecord, count: int, now: int, info: ChunkInfo) -> None:
    """``count`` token events of one read, each meaning ``info`` (a plain text token): what
    the client does for each token event, done once (the gaps within a read are 0)."""
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
