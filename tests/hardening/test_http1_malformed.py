"""Malformed HTTP/1.1 framing ends as one clean failed request: never a crash, never a hang.

Real sockets on 127.0.0.1 (``OddServer``), the library's own ``StreamClient``
and ``send_request`` (or, where the order of bytes on the wire matters, one
``Http1Connection`` driven by hand): bad chunk sizes that ``int(x, 16)``
would have accepted, CR/LF inside header values, lengths that contradict each
other, a response before the request, early closes in every part of a
response, bytes after a response, and answers that are not HTTP/1.x.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
from faults import FAST, SAMPLE
from odd_servers import OddServer, Request, Wire, content_chunk, finish_chunk, sse_ok

from pytest_llmperf.client.endpoint import Endpoint, normalize_base_url
from pytest_llmperf.client.http1 import (
    MAX_HEAD_BYTES,
    Http1Connection,
    check_request_headers,
    request_prefix,
)
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.errors import LlmPerfUsageError

_SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


def _body() -> bytes:
    items = [content_chunk("a "), content_chunk("b "), finish_chunk(2)]
    events = [f"data: {json.dumps(item)}\n\n".encode() for item in items]
    return b"".join(events) + b"data: [DONE]\n\n"


def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def _raw(response: bytes, *, then: str = "wait"):
    """A behaviour that writes ``response`` as is, then waits, closes, or goes on."""

    async def behaviour(req: Request, wire: Wire) -> None:
        await wire.raw(response)
        if then == "close":
            wire.cut()
        elif then == "wait":
            await asyncio.sleep(3600)

    return behaviour


async def _send(server: OddServer, count: int = 1) -> list[RequestRecord]:
    endpoint = Endpoint(normalize_base_url(server.url), model="odd-model", timeouts=FAST)
    async with StreamClient(endpoint) as client:
        return [
            await send_request(client, endpoint, SAMPLE, RequestRecord(index=i, t_sched=0))
            for i in range(count)
        ]


async def _failure_of(response: bytes, *, then: str = "wait") -> RequestRecord:
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with OddServer(_raw(response, then=then)) as server:
        (record,) = await _send(server)
    assert loop.time() - started < FAST.total + 1.0  # a failure, never a hang
    assert not record.ok
    assert record.t_end >= record.t_send > 0
    return record


# -- chunked bodies --------------------------------------------------------------


@pytest.mark.parametrize(
    "size",
    [b"0x1a", b"1_0", b"+a", b" 5", b"5 ", b"fffffffffffffffffffff", b"5;"],
    ids=["0x-prefix", "underscore", "plus-sign", "leading-space", "trailing-space",
         "overflow", "empty-extension"],
)  # fmt: skip
@pytest.mark.asyncio
async def test_chunk_sizes_int_would_accept_are_protocol_errors(size: bytes) -> None:
    head = _SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    record = await _failure_of(head + size + b"\r\ndata: {}\n\n\r\n")
    assert record.error == ErrorKind.PROTOCOL, record.error_detail
    assert record.error_detail.startswith("malformed response body: ")
    assert "chunk" in record.error_detail.lower()


@pytest.mark.asyncio
async def test_chunk_data_longer_than_its_size_is_a_protocol_error() -> None:
    head = _SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    record = await _failure_of(head + b"2\r\nabcdef\r\n0\r\n\r\n")
    assert record.error == ErrorKind.PROTOCOL
    assert "after chunk data" in record.error_detail


@pytest.mark.parametrize(
    ("coding", "ok"),
    [("gzip, chunked", True), ("notchunked", False), ("chunked, identity", False)],
)
@pytest.mark.asyncio
async def test_chunked_is_the_final_coding_not_a_substring(coding: str, ok: bool) -> None:
    """``xchunked`` or ``chunked, identity`` do not frame the body in chunks: the close does."""
    body = _body()
    framed = _chunked(body) if ok else body
    head = _SSE_HEAD + f"Transfer-Encoding: {coding}\r\n\r\n".encode()
    async with OddServer(_raw(head + framed, then="close" if not ok else "wait")) as server:
        (record,) = await _send(server)
    assert record.ok, f"{record.error}: {record.error_detail}"
    assert record.token_events == 2


@pytest.mark.asyncio
async def test_endless_chunk_extension_is_cut_off() -> None:
    head = _SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"

    async def endless(req: Request, wire: Wire) -> None:
        await wire.raw(head + b"5;name=")
        for _ in range(MAX_HEAD_BYTES // 4096 + 2):
            await wire.raw(b"v" * 4096)
        await asyncio.sleep(3600)

    async with OddServer(endless) as server:
        (record,) = await _send(server)
    assert record.error == ErrorKind.PROTOCOL
    assert "without body data" in record.error_detail


# -- heads -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (b"X-A: a\rb", "LF after header value"),
        (b"X-A: a\nb", "CR after header value"),
        (b"X-A: a\r\n b", "whitespace after header value"),  # obsolete line folding
        (b"X A: b", "header token"),
        (b"X-A : b", "header token"),
    ],
    ids=["bare-cr", "bare-lf", "obs-fold", "space-in-name", "space-before-colon"],
)
@pytest.mark.asyncio
async def test_header_injection_shapes_are_protocol_errors(header: bytes, reason: str) -> None:
    record = await _failure_of(_SSE_HEAD + header + b"\r\nContent-Length: 0\r\n\r\n")
    assert record.error == ErrorKind.PROTOCOL
    assert record.error_detail.startswith("malformed response head: ")
    assert reason in record.error_detail


@pytest.mark.parametrize(
    ("lengths", "reason"),
    [
        (b"Content-Length: 5\r\nTransfer-Encoding: chunked", "can't be present with"),
        (b"Content-Length: 5\r\nContent-Length: 6", "Duplicate Content-Length"),
        (b"Content-Length: 5x", "Content-Length"),
        (b"Content-Length: -5", "Content-Length"),
    ],
    ids=["length-and-chunked", "two-lengths", "not-a-number", "negative"],
)
@pytest.mark.asyncio
async def test_contradicting_or_bad_lengths_are_protocol_errors(lengths: bytes, reason: str):
    record = await _failure_of(_SSE_HEAD + lengths + b"\r\n\r\nhello")
    assert record.error == ErrorKind.PROTOCOL
    assert reason in record.error_detail


@pytest.mark.parametrize(
    ("answer", "detail"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP response: 'SSH-2.0"),
        (b"HTTP/2 200 OK\r\n\r\n", "malformed response head"),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", "Invalid status code"),
        (b"HTTP/1.1 200 OK\nContent-Length: 0\n\n", "malformed response head"),
        (b"\x16\x03\x01\x00\xa5\x01\x00", "not an HTTP response"),  # a TLS hello
    ],
    ids=["ssh-banner", "http2", "bad-status", "bare-lf-lines", "tls-bytes"],
)
@pytest.mark.asyncio
async def test_answers_that_are_not_http1_are_protocol_errors(answer: bytes, detail: str):
    record = await _failure_of(answer, then="close")
    assert record.error == ErrorKind.PROTOCOL
    assert detail in record.error_detail


@pytest.mark.asyncio
async def test_switching_protocols_is_a_protocol_error() -> None:
    answer = (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"
    )
    record = await _failure_of(answer + b"\x81\x05hello")
    assert record.error == ErrorKind.PROTOCOL
    assert "switched protocols" in record.error_detail


@pytest.mark.asyncio
async def test_endless_head_is_cut_off_with_bounded_memory() -> None:
    async def endless(req: Request, wire: Wire) -> None:
        await wire.raw(_SSE_HEAD + b"X-Long: ")
        for _ in range(MAX_HEAD_BYTES // 4096 + 2):
            await wire.raw(b"v" * 4096)
        await asyncio.sleep(3600)

    async with OddServer(endless) as server:
        (record,) = await _send(server)
    assert record.error == ErrorKind.PROTOCOL
    assert f"response head over {MAX_HEAD_BYTES} bytes" in record.error_detail


@pytest.mark.asyncio
async def test_interim_heads_with_headers_are_skipped_and_repeated_headers_joined() -> None:
    body = _body()
    answer = (
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n"
        b"HTTP/1.1 100 Continue\r\n\r\n"
        + _SSE_HEAD
        + b"X-Twice: a\r\nX-Twice: b\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    async with OddServer(_raw(answer)) as server:
        endpoint = Endpoint(normalize_base_url(server.url), model="odd-model", timeouts=FAST)
        async with StreamClient(endpoint) as client:
            conn = await client.acquire(1.0)
            sink = _Sink()
            conn.send(client.request_bytes("chat", b"{}"), sink)
            await asyncio.wait_for(sink.done, 2)
            client.release(conn)
    assert sink.events[0][0] == "head" and sink.events[0][1] == 200
    assert sink.events[-1][0] == "end"
    assert b"".join(e[1] for e in sink.events if e[0] == "body") == body
    assert sink.headers["x-twice"] == "a, b"
    assert "link" not in sink.headers  # the interim head's headers are not the response's


# -- early closes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("partial", "where"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Ty", "before the response head"),
        (_SSE_HEAD + b"Content-Length: 500\r\n\r\ndata: {}", "mid-body"),
        (_SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n40\r\ndata: ", "mid-body"),
        (_SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n3", "mid-body"),
        (_SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n0\r\nX-Trailer: y", "mid-body"),
    ],
    ids=["mid-head", "mid-length-body", "mid-chunk", "mid-chunk-size", "mid-trailers"],
)
@pytest.mark.asyncio
async def test_early_close_is_a_truncated_stream(partial: bytes, where: str) -> None:
    record = await _failure_of(partial, then="close")
    assert record.error == ErrorKind.TRUNCATED, record.error_detail
    assert f"closed the connection {where}" in record.error_detail


# -- bytes nobody asked for ------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [b"garbage", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b"HTTP/1.1 2"],
    ids=["garbage", "a-whole-second-response", "the-start-of-one"],
)
@pytest.mark.asyncio
async def test_bytes_after_a_response_in_the_same_write_spoil_only_that_connection(extra: bytes):
    body = _body()
    answer = _SSE_HEAD + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    async with OddServer(_raw(answer + extra, then="go on")) as server:
        records = await _send(server, 3)
    for record in records:
        assert record.ok, f"{record.error}: {record.error_detail}"
        assert record.token_events == 2
    assert server.accepted == 3


@pytest.mark.asyncio
async def test_bytes_after_a_connection_close_response_are_not_read_as_another() -> None:
    answer = _SSE_HEAD + b"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
    async with OddServer(_raw(answer + _chunked(_body()) + b"HTTP/1.1 200 OK\r\n")) as server:
        records = await _send(server, 2)
    assert all(r.ok for r in records), [r.error_detail for r in records]
    assert server.accepted == 2


class _Sink:
    """A :class:`ResponseSink` that records what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.headers: dict[str, str] = {}
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_head(self, status: int, headers: dict[str, str], now_ns: int) -> None:
        self.events.append(("head", status, now_ns))
        self.headers = headers

    def on_body(self, data: bytes, now_ns: int) -> None:
        self.events.append(("body", data, now_ns))

    def on_end(self, now_ns: int) -> None:
        self.events.append(("end", now_ns))
        self.done.set_result(None)

    def on_failure(self, kind: str, detail: str, now_ns: int) -> None:
        self.events.append(("failure", kind, detail))
        self.done.set_result(None)


@contextlib.asynccontextmanager
async def _speaks_first(greeting: bytes) -> AsyncIterator[int]:
    """A server that writes ``greeting`` as soon as it accepts, before any request."""

    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        writer.write(greeting)
        with contextlib.suppress(Exception):
            await writer.drain()
            await reader.read(1 << 16)  # the request, then the client's close

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for writer in writers:
            writer.transport.abort()
        await server.wait_closed()


@pytest.mark.parametrize(
    ("greeting", "detail"),
    [
        (b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n", "before the request"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "not an HTTP response: 'SSH-2.0"),
    ],
    ids=["a-response", "a-banner"],
)
@pytest.mark.asyncio
async def test_an_answer_before_the_request_was_sent_is_a_protocol_error(greeting, detail):
    async with _speaks_first(greeting) as port:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(Http1Connection, "127.0.0.1", port)
        for _ in range(200):  # until the greeting has been read (and the connection spoiled)
            if conn._early:
                break
            await asyncio.sleep(0.005)
        assert not conn.reusable
        sink = _Sink()
        t_send = conn.send(b"POST /v1/chat/completions HTTP/1.1\r\n\r\n", sink)
        await asyncio.wait_for(sink.done, 2)
        conn.close()
        await conn.wait_closed()
    ((what, kind, text),) = sink.events
    assert (what, kind) == ("failure", ErrorKind.PROTOCOL)
    assert detail in text
    assert t_send > 0


@pytest.mark.asyncio
async def test_one_timestamp_per_read_for_every_piece_that_read_delivered() -> None:
    """Head, body and end that arrive in one read carry that read's single instant."""
    body = _body()
    answer = (
        _SSE_HEAD
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in body.splitlines(keepends=True))
    )
    async with OddServer(_raw(answer + b"0\r\n\r\n")) as server:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(Http1Connection, "127.0.0.1", server.port)
        sink = _Sink()
        conn.send(request_prefix("POST", "/v1/x", "h", {}) + b"2\r\n\r\n{}", sink)
        await asyncio.wait_for(sink.done, 2)
        conn.close()
        await conn.wait_closed()
    kinds = [e[0] for e in sink.events]
    assert kinds == ["head", "body", "end"]  # many chunks, one read: one on_body
    assert len({e[-1] for e in sink.events}) == 1
    assert sink.events[1][1] == body


# -- the request side ------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer sk-secret\n"},
        {"Authorization": "Bearer sk-secret\r\nX-Evil: 1"},
        {"X-A": "a\x00b"},
        {"Bad Name": "x"},
        {"X-A": "snow ☃"},
    ],
    ids=["trailing-newline", "injected-header", "nul", "space-in-name", "not-latin-1"],
)
def test_request_headers_that_would_break_framing_are_refused_without_the_value(headers):
    with pytest.raises(ValueError) as info:
        check_request_headers(headers)
    assert "sk-secret" not in str(info.value)
    with pytest.raises(ValueError):
        request_prefix("POST", "/v1/chat/completions", "h", headers)


@pytest.mark.parametrize("target", ["v1/x", "/v1/a b", "/v1/x\r\nX: y", "/v1/é"])
def test_a_request_path_that_would_break_framing_is_refused(target: str) -> None:
    with pytest.raises(ValueError, match="request path"):
        request_prefix("POST", target, "h", {})


@pytest.mark.asyncio
async def test_an_api_key_with_a_newline_is_a_usage_error_naming_no_secret() -> None:
    endpoint = Endpoint("http://127.0.0.1:9/v1", model="m", api_key="sk-secret-123\n")
    with pytest.raises(LlmPerfUsageError) as info:
        StreamClient(endpoint)
    assert "Authorization" in str(info.value) and "newline" in str(info.value)
    assert "sk-secret-123" not in str(info.value)
    with pytest.raises(LlmPerfUsageError) as info:
        endpoint.client()
    assert "sk-secret-123" not in str(info.value)


@pytest.mark.asyncio
async def test_the_query_string_of_the_base_url_is_kept_in_the_request_path() -> None:
    async with OddServer(sse_ok) as server:
        endpoint = Endpoint(f"{server.url}/v1?api-version=2024-10-21", model="m", timeouts=FAST)
        async with StreamClient(endpoint) as client:
            record = await send_request(client, endpoint, SAMPLE, RequestRecord(0, 0))
    assert record.ok, record.error_detail
    (request,) = [r for r in server.requests if r.method == "POST"]
    assert request.path == "/v1/chat/completions?api-version=2024-10-21"
