"""Pooled connections against servers that close them: never reused, or sent once more.

Real sockets on 127.0.0.1 (``closing_servers.ClosingServer``, served from a
thread so its closes race with the client as a real server's do). The rule
(docs/measurement.md, "Connections"): a connection its server closed, told
the client to close, or whose ``Keep-Alive`` timeout or max has passed is
never reused; a request lost on a *reused* connection before any byte of its
response is sent once more on a new connection and counted in
``connection_retries``; never after a response byte, never on a fresh
connection, never for a timeout. The servers count the requests they reset
unanswered (``refused``), so a test compares the client's count with what the
server forced.

No assertion here is about how fast anything is: where time matters (an idle
connection past its server's keep-alive timeout, a timer that keeps counting
through a retry) the test waits at least as long as the rule needs, and a
slow machine only waits longer.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import pytest
from closing_servers import Action, After, ClosingServer, serving

from pytest_llmperf.client import resolve_model
from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.client.endpoint import Endpoint, Timeouts, normalize_base_url
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import BROKEN_PROMISES, StreamClient
from pytest_llmperf.loadgen import run_load
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads.base import Sample

pytestmark = pytest.mark.asyncio

SAMPLE = Sample(index=0, prompt="hello", input_tokens=1, max_tokens=3)
LIMITS = Timeouts(connect=5.0, first_token=10.0, stall=10.0, total=20.0)
PROMISE = {"Connection": "keep-alive", "Keep-Alive": "timeout=5, max=100"}
# llama-server's streamed-response head, as seen on the wire (/work/notes/llama-server.md)
LLAMA_HEAD = {
    "Server": "llama.cpp",
    "Access-Control-Allow-Origin": "",
    "X-Accel-Buffering": "no",
    "Keep-Alive": "timeout=5, max=100",
}


def _endpoint(server: ClosingServer, timeouts: Timeouts = LIMITS) -> Endpoint:
    return Endpoint(normalize_base_url(server.url), model="m", timeouts=timeouts)


async def _send(
    client: StreamClient, endpoint: Endpoint, index: int = 0, cancel: CancelAt | None = None
) -> RequestRecord:
    record = RequestRecord(index=index, t_sched=time.monotonic_ns())
    return await send_request(client, endpoint, SAMPLE, record, cancel=cancel)


async def _one_by_one(server: ClosingServer, count: int) -> list[RequestRecord]:
    endpoint = _endpoint(server)
    async with StreamClient(endpoint) as client:
        return [await _send(client, endpoint, i) for i in range(count)]


async def _run(server: ClosingServer | SimServer, concurrency: int, requests: int) -> RunResult:
    """A closed-loop run through the load generator; every record's retries are checked."""
    endpoint = Endpoint(normalize_base_url(server.url), timeouts=LIMITS)
    endpoint = await resolve_model(endpoint)
    spec = RunSpec.from_markers(
        ("synthetic",),
        {"requests": requests, "input_tokens": 4, "output_tokens": 3},
        ("concurrency",),
        {"concurrency": concurrency},
    )
    retries: list[int] = []
    result = await run_load(
        endpoint, spec, observers=[lambda r: retries.append(r.connection_retries)]
    )
    assert set(retries) <= {0, 1}, "a request is sent at most twice"
    assert sum(retries) == result.counts["connection_retries"]
    return result


def _ok(record: RequestRecord) -> None:
    assert record.ok, f"{record.error}: {record.error_detail}"
    assert record.token_events == 3 and record.usage_completion_tokens == 3


def _every(connection_from: int, request: int, action: Action) -> Callable[[int, int], Action]:
    """A script: ``action`` for the ``request``-th request of every connection from the
    ``connection_from``-th accepted on; answers the rest."""

    def script(connection: int, n: int) -> Action:
        return action if connection >= connection_from and n == request else Action.ANSWER

    return script


async def _until(condition: Callable[[], bool]) -> None:
    """Let the client's loop run until ``condition`` holds (a bound only against a hang)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in 10 s"
        await asyncio.sleep(0.001)


# -- servers that keep their promises: no retries ----------------------------------------


async def test_a_keep_alive_server_serves_everything_on_one_connection() -> None:
    with serving(ClosingServer(headers=PROMISE)) as server:
        records = await _one_by_one(server, 8)
    for record in records:
        _ok(record)
        assert record.connection_retries == 0 and record.t_resend == 0
    assert server.accepted == 1 and server.refused == 0


@pytest.mark.parametrize("concurrency", [1, 2, 8])
async def test_a_keep_alive_server_needs_no_retries_at_any_concurrency(concurrency: int) -> None:
    with serving(ClosingServer(headers=PROMISE)) as server:
        result = await _run(server, concurrency, 24)
    assert result.counts["completed"] == 24
    assert result.counts["connection_retries"] == 0
    assert server.used <= concurrency  # each connection carried many requests


async def test_the_simulator_needs_no_retries() -> None:
    async with SimServer("fixed", ttft_ms=1, itl_ms=1) as sim:
        result = await _run(sim, 4, 24)
    assert result.counts["completed"] == 24
    assert result.counts["connection_retries"] == 0


# -- a server that closes after each streamed answer, promising keep-alive ---------------


@pytest.mark.parametrize("concurrency", [1, 2, 8])
@pytest.mark.parametrize(
    ("after", "headers"),
    [(After.CLOSE, PROMISE), (After.SHUT_AND_DRAIN, LLAMA_HEAD)],
    ids=["close", "llama-server"],
)
async def test_a_server_that_closes_after_each_answer_gets_every_request_answered(
    concurrency: int, after: After, headers: dict[str, str]
) -> None:
    """llama-server's way: ``Keep-Alive: timeout=5, max=100`` in the head, then a FIN at
    the end of every streamed answer, which races with the client's reuse (a request
    that arrives in its 100 ms drain is read and dropped unanswered). Whether the client
    sees the close before reusing is up to the race; no request may fail for it, and
    each one the server dropped was sent once more."""
    with serving(ClosingServer(after, headers)) as server:
        result = await _run(server, concurrency, 24)
    assert result.counts["completed"] == 24, result.errors
    assert server.answered == 24 and server.used == 24  # one answer per connection
    assert server.refused <= result.counts["connection_retries"] <= 24


@pytest.mark.parametrize("concurrency", [1, 2, 8])
async def test_a_server_that_closes_a_moment_later_forces_a_retry_per_lost_race(
    concurrency: int,
) -> None:
    """The close comes after the client has reused the connection: the server resets the
    request unanswered (the race always lost). Each such request is sent once more on a
    new connection, which the server answers: retries equal the requests it refused.
    After BROKEN_PROMISES of them the pool keeps no connection any more, so only the
    requests already under way on a kept one (one per worker at most) lose the race
    after that."""
    with serving(ClosingServer(After.CONDEMN, PROMISE)) as server:
        result = await _run(server, concurrency, 24)
    assert result.counts["completed"] == 24, result.errors
    assert result.counts["connection_retries"] == server.refused
    assert BROKEN_PROMISES <= server.refused <= BROKEN_PROMISES + concurrency - 1


async def test_a_server_that_breaks_its_keep_alive_promise_gets_a_connection_per_request() -> None:
    """One by one: requests 2, 3 and 4 lose the race and are retried; from then on the pool
    keeps no connection, and every request connects before it is sent."""
    with serving(ClosingServer(After.CONDEMN, PROMISE)) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint) as client:
            records = [await _send(client, endpoint, i) for i in range(10)]
            kept = client.keeps_connections
    for record in records:
        _ok(record)
    assert [r.connection_retries for r in records] == [0, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    assert not kept and server.refused == BROKEN_PROMISES and server.used == 10


async def test_a_server_that_closes_idle_connections_later_is_not_distrusted() -> None:
    """A close 0.5 s into the idle time (an idle timeout shorter than the client's 4 s
    default, unannounced) is not a broken promise: the pool keeps connections."""
    with serving(ClosingServer(idle_close_s=0.5)) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint) as client:
            records = []
            for i in range(BROKEN_PROMISES + 1):
                records.append(await _send(client, endpoint, i))
                await _until(lambda: not client._idle or client._idle[0].lost)
            kept = client.keeps_connections
    for record in records:
        _ok(record)
        assert record.connection_retries == 0
    assert kept and client.broken_promises == 0


async def test_a_close_a_little_later_is_either_seen_or_retried() -> None:
    with serving(ClosingServer(After.CONDEMN, PROMISE, hold_s=0.02)) as server:
        records = await _one_by_one(server, 12)
    for record in records:
        _ok(record)
    retries = sum(r.connection_retries for r in records)
    assert server.refused <= retries <= 11  # a close seen in time needs no retry


# -- what the server announces -----------------------------------------------------------


async def test_an_idle_connection_past_its_keep_alive_timeout_is_not_reused() -> None:
    """``timeout=1``: idle for at most 0.5 s (a margin for the server's clock, which starts
    before the client's); the server closes at 1 s. Without the header the 4 s default
    would have reused it."""
    server = ClosingServer(headers={"Keep-Alive": "timeout=1"}, idle_close_s=1.0)
    with serving(server):
        endpoint = _endpoint(server)
        async with StreamClient(endpoint) as client:
            first = await _send(client, endpoint)
            await asyncio.sleep(0.7)  # past the client's 0.5 s, before the server's 1 s
            second = await _send(client, endpoint)
            third = await _send(client, endpoint)  # at once: reused
            await asyncio.sleep(1.5)  # past the server's 1 s: closed by the server
            fourth = await _send(client, endpoint)
    for record in (first, second, third, fourth):
        _ok(record)
        assert record.connection_retries == 0
    assert server.accepted == 3 and server.refused == 0


async def test_without_a_keep_alive_header_the_default_idle_limit_holds() -> None:
    with serving(ClosingServer()) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint) as client:
            first = await _send(client, endpoint)
            await asyncio.sleep(0.7)  # well under KEEPALIVE_S (4 s)
            second = await _send(client, endpoint)
    _ok(first)
    _ok(second)
    assert server.accepted == 1


@pytest.mark.parametrize("concurrency", [1, 2, 8])
async def test_keep_alive_max_is_never_exceeded(concurrency: int) -> None:
    """``max=2``: the server condemns a connection after its second answer (and would
    reset a third request on it); the client opens a new one instead."""
    server = ClosingServer(headers={"Keep-Alive": "timeout=5, max=2"}, max_per_connection=2)
    with serving(server):
        result = await _run(server, concurrency, 24)
    assert result.counts["completed"] == 24, result.errors
    assert server.refused == 0 and result.counts["connection_retries"] == 0
    assert server.used >= 12


async def test_without_max_the_same_server_forces_retries() -> None:
    """The control for the test above: the server's behaviour does force retries when
    the client is not told."""
    with serving(ClosingServer(max_per_connection=2)) as server:
        records = await _one_by_one(server, 6)
    for record in records:
        _ok(record)
    assert server.refused == 2 == sum(r.connection_retries for r in records)


@pytest.mark.parametrize(
    ("value", "reused"),
    [
        ("timeout=0", False),
        ("max=1", False),
        ('timeout="30", max="5"', True),
        ("TIMEOUT=30;MAX=5", True),
        ("timeout=-1, max=abc", True),  # bad values: ignored, the default applies
        ("timeout=nan, max=1.5", True),
        ("timeout=30, timeout=0", False),  # a repeated header: the smaller value
    ],
)
async def test_keep_alive_values_are_read_leniently(value: str, reused: bool) -> None:
    with serving(ClosingServer(headers={"Keep-Alive": value})) as server:
        records = await _one_by_one(server, 2)
    for record in records:
        _ok(record)
    assert server.accepted == (1 if reused else 2)


# -- closes the loop has not seen yet --------------------------------------------------------


@pytest.mark.parametrize("after", [After.CLOSE, After.RESET_IDLE])
async def test_a_close_waiting_in_the_socket_is_seen_before_reuse(after: After) -> None:
    """The FIN or RST reached the client's socket while its loop was busy (blocked here on
    purpose): the pool's check before reuse sees it, so no request is written into it."""
    with serving(ClosingServer(after, PROMISE, hold_s=0.01)) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint) as client:
            first = await _send(client, endpoint)
            assert server.closed.wait(10)  # blocks the client's loop: nothing reads the close
            second = await _send(client, endpoint)
    _ok(first)
    _ok(second)
    assert second.connection_retries == 0
    assert server.accepted == 2 and server.refused == 0


async def test_a_reset_while_idle_retires_the_connection() -> None:
    with serving(ClosingServer(After.RESET_IDLE, hold_s=0.01)) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint) as client:
            first = await _send(client, endpoint)
            await _until(lambda: not client._idle or client._idle[0].lost)
            second = await _send(client, endpoint)
    _ok(first)
    _ok(second)
    assert second.connection_retries == 0 and server.accepted == 2


# -- what is never retried -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "where"),
    [
        (Action.HEAD_THEN_CLOSE, "mid-body"),
        (Action.PARTIAL_HEAD_THEN_CLOSE, "before the response head"),  # bytes of a head came
    ],
)
async def test_no_retry_once_a_response_byte_arrived(action: Action, where: str) -> None:
    with serving(ClosingServer(script=_every(1, 2, action))) as server:
        first, second = await _one_by_one(server, 2)
    _ok(first)
    assert second.error == ErrorKind.TRUNCATED and where in second.error_detail
    assert second.connection_retries == 0 and server.accepted == 1


@pytest.mark.parametrize("action", [Action.RESET, Action.HEAD_THEN_CLOSE])
async def test_no_retry_on_a_fresh_connection(action: Action) -> None:
    with serving(ClosingServer(script=_every(1, 1, action))) as server:
        (record,) = await _one_by_one(server, 1)
    assert record.error == ErrorKind.TRUNCATED
    assert record.connection_retries == 0 and server.accepted == 1


@pytest.mark.parametrize(
    ("action", "where"),
    [(Action.RESET, "before the response head"), (Action.HEAD_THEN_CLOSE, "mid-body")],
)
async def test_a_retry_that_fails_too_is_not_retried_again(action: Action, where: str) -> None:
    """The second request is refused on its reused connection, and its retry's new
    connection fails as well: one retry, counted, and the request fails."""
    server = ClosingServer(After.CONDEMN, script=_every(2, 1, action))
    with serving(server):
        first, second = await _one_by_one(server, 2)
    _ok(first)
    assert second.error == ErrorKind.TRUNCATED and where in second.error_detail
    assert second.connection_retries == 1 and server.accepted == 2


async def test_no_retry_for_a_timeout_on_a_reused_connection() -> None:
    fast = Timeouts(connect=5.0, first_token=0.3, stall=5.0, total=5.0)
    with serving(ClosingServer(script=_every(1, 2, Action.STALL))) as server:
        endpoint = _endpoint(server, fast)
        async with StreamClient(endpoint) as client:
            first = await _send(client, endpoint)
            second = await _send(client, endpoint)
    _ok(first)
    assert second.error == ErrorKind.FIRST_TOKEN_TIMEOUT
    assert second.connection_retries == 0 and server.accepted == 1


async def test_a_retry_whose_connect_is_refused_fails_as_a_connect_error() -> None:
    """The reused connection is reset unanswered, and the new one cannot be made (the
    client is pointed at a port nobody listens on once its connection is pooled)."""
    with socket.socket() as probe:  # a port of 127.0.0.1 that nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    with serving(ClosingServer(After.CONDEMN)) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint) as client:
            first = await _send(client, endpoint)
            client.port = dead_port
            second = await _send(client, endpoint)
    _ok(first)
    assert second.error == ErrorKind.CONNECT, second.error_detail
    assert second.connection_retries == 1 and server.refused == 1


# -- the retry changes no clock ----------------------------------------------------------


async def test_the_first_token_limit_counts_from_the_first_attempt() -> None:
    """Each attempt alone would be within the 2 s limit (1 s held then reset, 1.2 s to
    the first token on the new connection); together they are not."""
    limits = Timeouts(connect=5.0, first_token=2.0, stall=5.0, total=10.0)
    server = ClosingServer(After.CONDEMN, tokens=1, refuse_delay_s=1.0)
    with serving(server):
        endpoint = _endpoint(server, limits)
        async with StreamClient(endpoint) as client:
            first = await _send(client, endpoint)
            server.token_gap_s = 1.2
            second = await _send(client, endpoint)
    assert first.ok
    assert second.error == ErrorKind.FIRST_TOKEN_TIMEOUT, second.error_detail
    assert second.connection_retries == 1
    assert second.t_resend - second.t_send >= 1.0e9  # t_send stays the first write


async def test_a_cancel_point_counts_from_the_first_write() -> None:
    """Cancel 2 s after the send. The reused connection is reset 1 s after it (well before
    the cancel point), and the retried stream ends no sooner than 2.6 s after the first
    write (four tokens 0.4 s apart), so it is cancelled mid-stream; counted from the
    second write (about 3 s) the cancel would have come after the stream's end."""
    server = ClosingServer(After.CONDEMN, tokens=4, refuse_delay_s=1.0)
    with serving(server):
        endpoint = _endpoint(server)
        async with StreamClient(endpoint) as client:
            first = await _send(client, endpoint)
            server.token_gap_s = 0.4
            second = await _send(client, endpoint, cancel=CancelAt(after_ms=2000))
    assert first.ok
    assert second.cancelled and second.ok and second.connection_retries == 1
    assert second.t_end - second.t_send >= 2.0e9
    assert second.token_events < 4


async def test_a_retried_request_counts_its_latency_from_its_planned_send() -> None:
    server = ClosingServer(After.CONDEMN, refuse_delay_s=0.3)
    with serving(server):
        first, second = await _one_by_one(server, 2)
    _ok(first)
    _ok(second)
    assert second.connection_retries == 1
    assert second.t_sched <= second.t_send < second.t_resend < second.t_first
    assert second.t_first - second.t_sched >= 0.3e9  # the lost attempt is in its ttft
