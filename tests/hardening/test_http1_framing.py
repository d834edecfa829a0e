"""The load generator's HTTP/1.1 connection against every body framing servers use.

Real sockets on 127.0.0.1 (``OddServer``), the library's own ``StreamClient``
and ``send_request``: chunked with extensions and trailers, byte-by-byte
splits, interim ``100 Continue`` heads, ``Content-Length`` bodies, bodies
ended by closing the connection, and when a connection may be reused.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from faults import FAST, SAMPLE
from odd_servers import OddServer, Request, Wire, content_chunk, finish_chunk, sse_ok

from pytest_llmperf.client.endpoint import Endpoint, normalize_base_url
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import StreamClient

pytestmark = pytest.mark.asyncio


def _events(tokens: int = 3) -> list[bytes]:
    items = [content_chunk(f"t{i} ") for i in range(tokens)] + [finish_chunk(tokens)]
    return [f"data: {json.dumps(item)}\n\n".encode() for item in items] + [b"data: [DONE]\n\n"]


async def _send_many(url: str, count: int) -> list[RequestRecord]:
    endpoint = Endpoint(normalize_base_url(url), model="odd-model", timeouts=FAST)
    records = []
    async with StreamClient(endpoint) as client:
        for i in range(count):
            record = RequestRecord(index=i, t_sched=0)
            records.append(await send_request(client, endpoint, SAMPLE, record))
    return records


def _assert_measured(record: RequestRecord, tokens: int = 3) -> None:
    assert record.ok, f"{record.error}: {record.error_detail}"
    assert record.token_events == tokens
    assert record.usage_completion_tokens == tokens
    assert len(record.gaps_ns) == tokens - 1
    assert record.t_send <= record.t_first <= record.t_last <= record.t_end


async def test_keep_alive_connections_are_reused() -> None:
    async with OddServer(sse_ok) as server:
        records = await _send_many(server.url, 5)
    for record in records:
        _assert_measured(record)
    assert server.accepted == 1


async def test_connection_close_header_means_a_new_connection_each_time() -> None:
    async def close_after(req: Request, wire: Wire) -> None:
        await wire.head(headers={"Connection": "close"})
        for event in _events():
            await wire.body_chunk(event)
        await wire.end()
        wire.cut()

    async with OddServer(close_after) as server:
        records = await _send_many(server.url, 3)
    for record in records:
        _assert_measured(record)
    assert server.accepted == 3


async def test_body_ended_by_closing_the_connection() -> None:
    """HTTP/1.0 style: no Content-Length, no chunking; the close ends the body."""

    async def until_close(req: Request, wire: Wire) -> None:
        await wire.head(chunked=False)
        for event in _events():
            await wire.raw(event)
        wire.writer.close()
        wire.keep_alive = False

    async with OddServer(until_close) as server:
        records = await _send_many(server.url, 2)
    for record in records:
        _assert_measured(record)
    assert server.accepted == 2


async def test_chunks_split_byte_by_byte_with_extensions_and_trailers() -> None:
    async def dribble(req: Request, wire: Wire) -> None:
        await wire.head()
        body = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(e), e) for e in _events())
        body += b"0\r\nX-Trailer: yes\r\n\r\n"
        for i in range(len(body)):
            await wire.raw(body[i : i + 1])

    async with OddServer(dribble) as server:
        records = await _send_many(server.url, 2)
    for record in records:
        _assert_measured(record)
    assert server.accepted == 1  # the trailers were consumed: the connection stayed usable


async def test_interim_100_continue_head_is_skipped() -> None:
    async def with_continue(req: Request, wire: Wire) -> None:
        await wire.raw(b"HTTP/1.1 100 Continue\r\n\r\n")
        await sse_ok(req, wire)

    async with OddServer(with_continue) as server:
        (record,) = await _send_many(server.url, 1)
    _assert_measured(record)


async def test_sse_body_with_content_length() -> None:
    async def sized(req: Request, wire: Wire) -> None:
        body = b"".join(_events())
        await wire.raw(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        await wire.raw(body[:50])
        await asyncio.sleep(0.01)
        await wire.raw(body[50:])

    async with OddServer(sized) as server:
        records = await _send_many(server.url, 2)
    for record in records:
        _assert_measured(record)
    assert server.accepted == 1


async def test_non_streamed_json_answer_is_one_chunk() -> None:
    async def whole(req: Request, wire: Wire) -> None:
        answer = {
            "choices": [{"index": 0, "message": {"content": "hi there"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
        }
        await wire.whole(200, json.dumps(answer).encode())

    async with OddServer(whole) as server:
        (record,) = await _send_many(server.url, 1)
    assert record.ok, record.error_detail
    assert record.token_events == 1
    assert record.usage_completion_tokens == 2


@pytest.mark.parametrize(
    ("size_line", "detail"),
    [
        (b"zz", "Invalid character in chunk size"),
        (b"-5", "Invalid character in chunk size"),
        (b"5;", "Invalid character in chunk extensions"),
    ],
)
async def test_broken_chunk_framing_is_a_protocol_error(size_line: bytes, detail: str) -> None:
    async def broken(req: Request, wire: Wire) -> None:
        await wire.head()
        await wire.raw(size_line + b"\r\ndata: {}\n\n\r\n")
        await asyncio.sleep(3600)

    async with OddServer(broken) as server:
        (record,) = await _send_many(server.url, 1)
    assert record.error == ErrorKind.PROTOCOL
    assert "malformed response body" in record.error_detail
    assert detail in record.error_detail


async def test_bytes_after_a_complete_response_spoil_only_that_connection() -> None:
    async def trailing_garbage(req: Request, wire: Wire) -> None:
        await sse_ok(req, wire)
        await wire.raw(b"garbage")

    async with OddServer(trailing_garbage) as server:
        records = await _send_many(server.url, 3)
    for record in records:
        _assert_measured(record)
    assert server.accepted == 3


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def answer_then_hang_up(req: Request, wire: Wire) -> None:
        await sse_ok(req, wire)
        wire.cut()  # no "Connection: close": the client learns of it from the socket

    async with OddServer(answer_then_hang_up) as server:
        endpoint = Endpoint(normalize_base_url(server.url), model="odd-model", timeouts=FAST)
        async with StreamClient(endpoint) as client:
            first = await send_request(client, endpoint, SAMPLE, RequestRecord(0, 0))
            while server.open_connections:  # until the server side has really closed
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.05)  # and its FIN has been read by the client's loop
            second = await send_request(client, endpoint, SAMPLE, RequestRecord(1, 0))
    _assert_measured(first)
    _assert_measured(second)
    assert server.accepted == 2


async def test_requests_beyond_the_pool_wait_for_a_connection() -> None:
    async with OddServer(sse_ok) as server:
        endpoint = Endpoint(normalize_base_url(server.url), model="odd-model", timeouts=FAST)
        async with StreamClient(endpoint, max_connections=2) as client:
            records = await asyncio.gather(
                *(send_request(client, endpoint, SAMPLE, RequestRecord(i, 0)) for i in range(8))
            )
    for record in records:
        _assert_measured(record)
    assert server.accepted == 2


@pytest.mark.parametrize(("connection", "reused"), [("", False), ("keep-alive", True)])
async def test_http10_keeps_a_connection_only_when_it_says_so(connection: str, reused: bool):
    async def http10(req: Request, wire: Wire) -> None:
        body = b"".join(_events())
        extra = f"Connection: {connection}\r\n" if connection else ""
        await wire.raw(
            b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n%sContent-Length: %d\r\n\r\n%s"
            % (extra.encode(), len(body), body)
        )
        # A 1.0 server that does not promise keep-alive may close at any moment; this one
        # keeps the socket open, so only the client's reading of the head decides.

    async with OddServer(http10) as server:
        records = await _send_many(server.url, 3)
    for record in records:
        _assert_measured(record)
    assert server.accepted == (1 if reused else 3)
