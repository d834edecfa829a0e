"""A paced request is written in its pacer's own step, and an open loop's pool dials ahead.

``start_request`` writes the request before it returns when a kept-alive
connection is idle: the pacer that calls it at the planned instant sends then,
not a loop turn later. The server here runs on its own loop in a thread, so the
test can hold the client's loop still and see the request arrive all the same.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from closing_servers import After, ClosingServer, serving

from pytest_llmperf.client.endpoint import Endpoint, Timeouts, normalize_base_url
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.client.request import request_data, start_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.workloads.base import Sample

pytestmark = pytest.mark.asyncio

SAMPLE = Sample(index=0, prompt="hello", input_tokens=1, max_tokens=3)
LIMITS = Timeouts(connect=5.0, first_token=10.0, stall=10.0, total=20.0)


def _endpoint(server: ClosingServer) -> Endpoint:
    return Endpoint(normalize_base_url(server.url), model="m", timeouts=LIMITS)


def _hold_loop_until(check: Callable[[], bool], what: str) -> None:
    """Block this thread (the client's loop does not turn) until ``check()`` holds."""
    end = time.monotonic() + 30.0
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within 30 s: {what}")
        time.sleep(0.001)


async def test_a_request_on_an_idle_connection_is_out_before_its_coroutine_runs() -> None:
    with serving(ClosingServer()) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint) as client:
            await client.open_connections(1)
            record = RequestRecord(index=0, t_sched=time.monotonic_ns())
            data = request_data(client, endpoint, SAMPLE)  # built ahead, as the open loop does
            reading = start_request(client, endpoint, SAMPLE, record, data=data)
            sent = record.t_send
            _hold_loop_until(lambda: server.used == 1, "the server reads the request")
            done = await reading
    assert done.error is None and done.status == 200
    assert done.t_send == sent and done.t_first > sent  # t_send: the write, before any read
    assert done.output_tokens == 3


async def test_without_an_idle_connection_the_coroutine_connects_then_writes() -> None:
    with serving(ClosingServer()) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint) as client:
            record = RequestRecord(index=0, t_sched=time.monotonic_ns())
            done = await start_request(client, endpoint, SAMPLE, record)
    assert done.error is None and done.output_tokens == 3
    assert server.accepted == 1


async def test_an_open_loop_pool_dials_a_spare_when_its_last_idle_connection_goes() -> None:
    with serving(ClosingServer()) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint, spares=True) as client:
            first = RequestRecord(index=0, t_sched=time.monotonic_ns())
            assert (await start_request(client, endpoint, SAMPLE, first)).error is None
            assert client.kept_one and client.idle == 1  # the server keeps connections
            taken = client.take_idle()
            assert taken is not None and client.dialling_spare
            deadline = time.monotonic() + 30.0
            while client.idle == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.001)
            spare = client.take_idle()  # the next paced request finds one
            assert spare is not None and spare is not taken
            while client.dialling_spare:  # (the next spare: not cut off at the exit)
                await asyncio.sleep(0.001)
            client.release(taken)
            client.release(spare)
        assert server.accepted >= 2


async def test_no_spare_for_a_server_that_closes_every_connection() -> None:
    # "Connection: close" on every answer: each request connects, as every user's does
    with serving(ClosingServer(after=After.CLOSE, headers={"Connection": "close"})) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint, spares=True) as client:
            for index in range(3):
                record = RequestRecord(index=index, t_sched=time.monotonic_ns())
                done = await start_request(client, endpoint, SAMPLE, record)
                assert done.error is None and done.output_tokens == 3
                assert client.take_idle() is None and not client.dialling_spare
    assert server.accepted == 3


async def test_no_spare_for_a_server_that_keeps_no_connection_nor_without_spares() -> None:
    with serving(ClosingServer()) as server:
        endpoint = _endpoint(server)
        async with StreamClient(endpoint, spares=True) as client:
            client.keeps_connections = False  # as after llama-server's broken promises
            assert client.take_idle() is None and not client.dialling_spare
        async with StreamClient(endpoint) as client:
            await client.open_connections(1)
            taken = client.take_idle()
            assert taken is not None and not client.dialling_spare
            client.release(taken)
