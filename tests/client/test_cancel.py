"""Cancelled requests (``send_request(..., cancel=CancelAt(...))``) over real sockets.

A cancelled request stops reading at its cancel point, is ``cancelled`` and not
failed, and its connection is closed (the server sees the disconnect) and never
reused: the next request goes out on a fresh connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from scripted_server import Script, ScriptedServer, chat_chunk, sse
from strict_server import StrictServer, serve

from pytest_llmperf.client import Endpoint, ErrorKind, RequestRecord, Timeouts, send_request
from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.workloads import Sample

pytestmark = pytest.mark.asyncio

SAMPLE = Sample(index=0, prompt="Tell me about harbours.", input_tokens=5, max_tokens=8)
USAGE = {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13}


@dataclass
class CountingServer(StrictServer):
    """A :class:`StrictServer` that counts the connections it accepted and saw end."""

    connections: int = 0
    ended: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await super().handle(reader, writer)
        finally:
            self.ended += 1
            with contextlib.suppress(RuntimeError):  # a loop closed under a handler still out
                writer.close()


def _endpoint(url: str, api: str = "chat", timeouts: Timeouts | None = None) -> Endpoint:
    return Endpoint.from_env(
        url, api_key_env=None, model="m", api=api, timeouts=timeouts or Timeouts()
    )  # type: ignore[arg-type]


async def _send(
    http: StreamClient, endpoint: Endpoint, cancel: CancelAt | None, *, reply: bool = False
) -> RequestRecord:
    record = RequestRecord(index=0, t_sched=time.monotonic_ns())
    if reply:
        record.reply = []
    return await send_request(http, endpoint, SAMPLE, record, cancel=cancel)


async def _until(check: Callable[[], bool], what: str, deadline_s: float = 5.0) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {deadline_s} s: {what}")
        await asyncio.sleep(0.005)


def _long_server() -> CountingServer:
    # 200 tokens 5 ms apart: about a second of stream, far beyond any cancel point below
    return CountingServer(
        reasoning=3, answer=197, gap_s=0.005, allowed_extra=frozenset({"ignore_eos"})
    )


# -- cancel after N token events ---------------------------------------------------


async def test_cancel_after_tokens_stops_at_exactly_n_events_and_drops_the_connection() -> None:
    with serve(_long_server()) as server:
        endpoint = _endpoint(server.url)
        async with StreamClient(endpoint) as http:
            record = await _send(http, endpoint, CancelAt(after_tokens=5))
            assert record.cancelled and record.error is None and record.ok
            assert record.token_events == 5  # 3 reasoning, then answer deltas ("" included)
            assert record.reasoning_events == 3
            assert len(record.gaps_ns) == 4
            assert record.status == 200
            assert record.finish_reason is None and record.usage_completion_tokens is None
            assert record.t_send <= record.t_first <= record.t_last == record.t_end
            # the client closed the connection; the server saw it while still streaming
            await _until(lambda: server.ended == 1, "the server sees the connection end")
            assert server.served[0].events < server.tokens
            # the next request goes out on a fresh connection and completes
            after = await _send(http, endpoint, None)
            assert after.ok and not after.cancelled, after.error_detail
            assert after.token_events == server.tokens
            assert server.connections == 2


async def test_a_cancelled_connection_is_not_reused_even_when_its_response_had_ended() -> None:
    # The whole response arrives in one read: the cancel point (3rd of 5 events) comes
    # before its end, and the connection is closed all the same, never pooled.
    pieces = [chat_chunk("", role="assistant")] + [chat_chunk(f"w{i} ") for i in range(5)]
    steps = [(0, b"".join([*pieces, chat_chunk("", finish="length"), sse("[DONE]")]))]
    async with ScriptedServer(Script(steps)) as srv:
        endpoint = _endpoint(srv.url)
        async with StreamClient(endpoint) as http:
            record = await _send(http, endpoint, CancelAt(after_tokens=3), reply=True)
            assert record.cancelled and record.error is None
            assert record.token_events == 3  # the later events of that read are not applied
            assert record.reply == ["w0 ", "w1 ", "w2 "]
            assert record.finish_reason is None
            assert not http._idle  # closed, not pooled
            again = await _send(http, endpoint, CancelAt(after_tokens=100))
            assert again.ok and not again.cancelled and again.token_events == 5
            assert len(http._idle) == 1  # an ordinary request's connection is pooled


async def test_several_events_in_one_read_count_up_to_the_cancel_point() -> None:
    steps = [
        (0, chat_chunk("", role="assistant")),
        (0.01, chat_chunk("a") + chat_chunk("b")),  # events 1-2
        (0.01, chat_chunk("c") + chat_chunk("d") + chat_chunk("e")),  # events 3-5: cut at 4
        (0.5, chat_chunk("f", finish="length") + sse("[DONE]")),
    ]
    async with ScriptedServer(Script(steps)) as srv:
        endpoint = _endpoint(srv.url)
        async with StreamClient(endpoint) as http:
            record = await _send(http, endpoint, CancelAt(after_tokens=4))
    assert record.cancelled and record.error is None
    assert record.token_events == 4
    assert len(record.gaps_ns) == 3 and record.gaps_ns[2] == 0  # events 3 and 4: one read
    assert (record.t_end - record.t_send) / 1e6 < 500  # before the last step's 0.5 s wait


# -- cancel after a time -----------------------------------------------------------


async def test_cancel_after_ms_counts_from_the_send() -> None:
    steps = [(0, chat_chunk("", role="assistant"))]
    steps += [(0.02, chat_chunk(f"w{i} ")) for i in range(100)]  # 2 s of stream
    steps += [(0, chat_chunk("", finish="length")), (0, sse("[DONE]"))]
    async with ScriptedServer(Script(steps)) as srv:
        endpoint = _endpoint(srv.url)
        async with StreamClient(endpoint) as http:
            record = await _send(http, endpoint, CancelAt(after_ms=150))
    assert record.cancelled and record.error is None
    elapsed_ms = (record.t_end - record.t_send) / 1e6
    # never early; late only by the loop's lag, which is scheduling noise (tens of ms on a
    # busy machine): the upper bound only says the cancel, not the stream's 2 s end, ended it
    assert 150 <= elapsed_ms < 1000, elapsed_ms
    assert 1 <= record.token_events < 50
    assert record.t_last <= record.t_end


async def test_cancel_after_ms_before_the_first_token() -> None:
    steps = [(0.6, chat_chunk("late")), (0, chat_chunk("", finish="stop")), (0, sse("[DONE]"))]
    async with ScriptedServer(Script(steps)) as srv:
        endpoint = _endpoint(srv.url)
        async with StreamClient(endpoint) as http:
            record = await _send(http, endpoint, CancelAt(after_ms=50))
    assert record.cancelled and record.error is None
    assert record.token_events == 0 and record.t_first == 0
    assert 50 <= (record.t_end - record.t_send) / 1e6 < 600  # before the first token's 0.6 s


@pytest.mark.parametrize(
    ("cancel", "by"),
    [
        (CancelAt(after_tokens=3, after_ms=60_000), "tokens"),
        (CancelAt(after_tokens=10_000, after_ms=120), "time"),
    ],
)
async def test_the_first_cancel_point_reached_wins(cancel: CancelAt, by: str) -> None:
    with serve(_long_server()) as server:
        endpoint = _endpoint(server.url)
        async with StreamClient(endpoint) as http:
            record = await _send(http, endpoint, cancel)
            # the server sees the disconnect before the test lets it go
            await _until(lambda: server.ended == 1, "the server sees the connection end")
    assert record.cancelled and record.error is None
    elapsed_ms = (record.t_end - record.t_send) / 1e6
    if by == "tokens":
        assert record.token_events == 3 and elapsed_ms < 1000
    else:
        assert elapsed_ms >= 120 and 1 <= record.token_events < server.tokens


async def test_the_cancel_timer_does_not_fire_the_limits_early() -> None:
    # The cancel point is the timer's earliest deadline; the stall limit (0.3 s) is not
    # reached when it fires, and the request is cancelled, not failed.
    timeouts = Timeouts(stall=0.3)
    steps = [(0, chat_chunk("a")), (2.0, chat_chunk("b", finish="stop")), (0, sse("[DONE]"))]
    async with ScriptedServer(Script(steps)) as srv:
        endpoint = _endpoint(srv.url, timeouts=timeouts)
        async with StreamClient(endpoint) as http:
            cancelled = await _send(http, endpoint, CancelAt(after_ms=100))
            stalled = await _send(http, endpoint, CancelAt(after_ms=1000))
    assert cancelled.cancelled and cancelled.error is None and cancelled.token_events == 1
    # a stall before the cancel point is an ordinary failure
    assert not stalled.cancelled and stalled.error == ErrorKind.READ_TIMEOUT


# -- never reached -----------------------------------------------------------------


async def test_a_cancel_point_never_reached_leaves_an_ordinary_request() -> None:
    with serve(
        CountingServer(reasoning=3, answer=9, allowed_extra=frozenset({"ignore_eos"}))
    ) as server:
        endpoint = _endpoint(server.url)
        async with StreamClient(endpoint) as http:
            first = await _send(http, endpoint, CancelAt(after_tokens=13, after_ms=30_000))
            second = await _send(http, endpoint, CancelAt(after_tokens=100))
            assert server.connections == 1  # completed: the connection was kept and reused
    for record in (first, second):
        assert record.ok and not record.cancelled, record.error_detail
        assert record.token_events == 12 and record.usage_completion_tokens == 12
        assert record.finish_reason == "length"


async def test_the_last_token_with_its_finish_reason_completes_the_request() -> None:
    # finish_reason rides on the 12th token's chunk: reaching after_tokens=12 there
    # ends the stream, so the request completed; it was not cancelled.
    server = CountingServer(
        reasoning=3, answer=9, finish_on_last=True, allowed_extra=frozenset({"ignore_eos"})
    )
    with serve(server):
        endpoint = _endpoint(server.url)
        async with StreamClient(endpoint) as http:
            record = await _send(http, endpoint, CancelAt(after_tokens=12))
    assert record.ok and not record.cancelled, record.error_detail
    assert record.token_events == 12 and record.finish_reason == "length"


async def test_a_failure_before_the_cancel_point_is_a_failure() -> None:
    # the head (with the body's first bytes) at once, the rest of the body 0.3 s later
    pieces = [(0, b'{"error": '), (0.3, b'{"message": "boom", "type": "server_error"}}')]
    slow_error = Script(pieces, status=500, content_type="application/json")
    async with ScriptedServer(slow_error) as srv:
        endpoint = _endpoint(srv.url)
        async with StreamClient(endpoint) as http:
            # the head said 500 before the cancel point: the failure wins
            record = await _send(http, endpoint, CancelAt(after_ms=50))
    assert record.error == ErrorKind.HTTP and not record.cancelled
    assert "HTTP 500" in record.error_detail

    steps = [(0, chat_chunk("Hi")), (0, sse({"error": {"message": "engine overloaded"}}))]
    async with ScriptedServer(Script(steps)) as srv:
        endpoint = _endpoint(srv.url)
        async with StreamClient(endpoint) as http:
            record = await _send(http, endpoint, CancelAt(after_tokens=2))
    assert record.error == ErrorKind.STREAM_ERROR and not record.cancelled


# -- CancelAt ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"after_tokens": 0},
        {"after_tokens": -1},
        {"after_tokens": 2.0},
        {"after_tokens": True},
        {"after_ms": 0},
        {"after_ms": -5.0},
        {"after_ms": float("nan")},
        {"after_ms": float("inf")},
        {"after_ms": "100"},
    ],
)
async def test_cancel_at_refuses_meaningless_points(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="CancelAt"):
        CancelAt(**kwargs)  # type: ignore[arg-type]


async def test_cancel_at_is_a_frozen_value() -> None:
    cancel = CancelAt(after_tokens=5, after_ms=250)
    assert cancel == CancelAt(after_tokens=5, after_ms=250.0)
    with pytest.raises(AttributeError):
        cancel.after_tokens = 6  # type: ignore[misc]
    assert not hasattr(cancel, "__dict__")
