# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The client's per-read path, compiled (Cython): the API of ``_speedups_py``.

``_speedups_py.py`` says what each piece does and is the fallback; this module does the
same steps with no Python frame between the socket's read and the record: the
timestamp is ``clock_gettime(CLOCK_MONOTONIC)`` (the clock of ``time.monotonic_ns``),
llhttp (httptools) still frames the read, and a read that is nothing but whole SSE
events of the stream's learned common chunk is checked on its bytes here, in C,
with the rules of ``ChunkReader.sse_run`` (the reader's ``event_framing``). Anything
else goes to the same Python methods the pure path calls.
"""

from itertools import repeat

from libc.string cimport memcmp
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

from httptools import HttpParserError, HttpParserUpgrade

__all__ = ["COMPILED", "MAX_HEAD_BYTES", "ConnectionReads", "SinkReads", "text_events"]

COMPILED = True
MAX_HEAD_BYTES = 64 * 1024
cdef Py_ssize_t _MAX_HEAD = MAX_HEAD_BYTES


cdef inline object _now_ns():
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <long long>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef class ConnectionReads:
    """One connection's reads (``get_buffer`` / ``buffer_updated``), as in ``_speedups_py``."""

    cdef public object _buffer
    cdef public object _now
    cdef public object _parser
    cdef public object _pieces
    cdef public object _sink
    cdef public Py_ssize_t _unframed

    def get_buffer(self, sizehint):
        return self._buffer

    def buffer_updated(self, Py_ssize_t nbytes):
        now = _now_ns()
        data = self._buffer[:nbytes]
        sink = self._sink
        parser = self._parser
        if sink is None or parser is None:
            self._unasked(data)
            return
        self._now = now
        try:
            parser.feed_data(data)
        except HttpParserError as exc:
            self._parse_failed(exc, data)
            return
        except HttpParserUpgrade:
            self._upgraded(now)
            return
        cdef list pieces = self._pieces
        if pieces:
            body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            del pieces[:]
            self._unframed = 0
            sink.on_body(body, now)
        elif self._sink is not None:
            self._unframed += nbytes
            if self._unframed > _MAX_HEAD:
                self._too_long(now)

    def _unasked(self, data):
        raise NotImplementedError

    def _parse_failed(self, exc, data):
        raise NotImplementedError

    def _upgraded(self, now):
        raise NotImplementedError

    def _too_long(self, now):
        raise NotImplementedError


cdef inline bint _unsafe(const unsigned char* p, Py_ssize_t start, Py_ssize_t stop) noexcept:
    """Whether p[start:stop] holds a quote, a backslash or a control byte."""
    cdef Py_ssize_t i
    cdef unsigned char c
    for i in range(start, stop):
        c = p[i]
        if c < 0x20 or c == 0x22 or c == 0x5C:
            return True
    return False


cdef inline bint _starts(const char* p, Py_ssize_t n, bytes part) noexcept:
    cdef Py_ssize_t k = PyBytes_GET_SIZE(part)
    return n >= k and memcmp(p, PyBytes_AS_STRING(part), k) == 0


cdef inline bint _ends(const char* p, Py_ssize_t n, bytes part) noexcept:
    cdef Py_ssize_t k = PyBytes_GET_SIZE(part)
    return n >= k and memcmp(p + n - k, PyBytes_AS_STRING(part), k) == 0


cdef Py_ssize_t _sse_run(bytes read, bytes head, bytes tail, bytes end) noexcept:
    """``ChunkReader.sse_run`` on the learned framing: the same answer, on the bytes."""
    cdef const char* p = PyBytes_AS_STRING(read)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(read)
    cdef Py_ssize_t skip = PyBytes_GET_SIZE(head)
    cdef Py_ssize_t keep = PyBytes_GET_SIZE(tail)
    cdef Py_ssize_t last, start, stop, count
    if not _starts(p, n, head) or not _ends(p, n, end):
        return 0
    last = n - PyBytes_GET_SIZE(end)
    if last > skip and not _unsafe(<const unsigned char*>p, skip, last):
        return 1  # one event (a second one's blank line would be unsafe bytes here)
    # as read.split(b"\n\n") less its last part: every event must be of the shape
    count = 0
    start = 0
    while True:
        stop = start
        while stop + 1 < n and not (p[stop] == 10 and p[stop + 1] == 10):
            stop += 1
        if stop + 1 >= n:  # no blank line from here: the split's last part, dropped
            break
        last = stop - start - keep
        if (
            last <= skip
            or not _starts(p + start, stop - start, head)
            or not _ends(p + start, stop - start, tail)
            or _unsafe(<const unsigned char*>(p + start), skip, last)
        ):
            return 0
        count += 1
        start = stop + 2
    return count


def _sse_run_for_tests(bytes read, bytes head, bytes tail, bytes end):
    """The compiled count on its own (tests/client/test_speedups.py compares it with
    ``ChunkReader.sse_run``)."""
    return _sse_run(read, head, tail, end)


cdef class SinkReads:
    """A response sink's ``on_body`` fast path, as in ``_speedups_py``."""

    cdef public object _parser
    cdef public object _whole_reads
    cdef public object done
    cdef public object last_read_ns
    cdef public object record
    # the learned framing of _whole_reads (its event_framing), once it has one
    cdef bytes _head, _tail, _end
    cdef bint _output, _answer  # what its events mean (the reader's text_info)

    def on_body(self, data, now_ns):
        if self.done.done():
            return
        self.last_read_ns = now_ns
        reader = self._whole_reads
        cdef Py_ssize_t count
        if reader is not None and self._parser.idle:
            if self._end is not None and type(data) is bytes:
                count = _sse_run(<bytes>data, self._head, self._tail, self._end)
                if count:
                    _events(self.record, count, now_ns, self._output, self._answer)
                    return
            else:
                count = reader.sse_run(data)
                if count:
                    info = reader.text_info
                    if self._end is None:
                        self._learned(reader, info)
                    text_events(self.record, count, now_ns, info)
                    return
        self._on_body(data, now_ns)

    cdef _learned(self, reader, info):
        """Keep the reader's learned framing (it learns once per stream, and for good)."""
        framing = reader.event_framing
        if framing is not None:
            self._head, self._tail, self._end = framing
            self._output, self._answer = bool(info.output), bool(info.answer)

    def _on_body(self, data, now_ns):
        raise NotImplementedError


def text_events(record, Py_ssize_t count, now, info):
    """``count`` token events of one read, each meaning ``info``: as in ``_speedups_py``."""
    _events(record, count, now, bool(info.output), bool(info.answer))


cdef inline _events(record, Py_ssize_t count, now, bint output, bint answer):
    if record.t_first:
        record.gaps_ns.append(now - record.t_last)
    else:
        record.t_first = now
    if count > 1:
        record.gaps_ns.extend(repeat(0, count - 1))
    record.t_last = now
    record.token_events += count
    if output:
        record.has_output = True
    if answer and not record.t_out:
        record.t_out = now
