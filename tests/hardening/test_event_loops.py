"""The load generator's client on uvloop, for users whose tests run on it.

uvloop is not a dependency (measured: no gain for the client or the
simulator, see benchmarks/README.md), but a suite may set uvloop's policy for
its own reasons; the client must not assume asyncio's transport classes.
"""

from __future__ import annotations

import asyncio

import pytest
from faults import FAST, SAMPLE
from odd_servers import OddServer

from pytest_llmperf.client.endpoint import Endpoint, normalize_base_url
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import StreamClient


def test_a_streamed_request_on_uvloop_is_measured() -> None:
    uvloop = pytest.importorskip("uvloop")

    async def main() -> list[RequestRecord]:
        async with OddServer() as server:
            endpoint = Endpoint(normalize_base_url(server.url), model="odd-model", timeouts=FAST)
            async with StreamClient(endpoint) as client:
                return [
                    await send_request(client, endpoint, SAMPLE, RequestRecord(i, 0))
                    for i in range(3)
                ]

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        records = runner.run(main())
    for record in records:
        assert record.ok, f"{record.error}: {record.error_detail}"
        assert record.token_events == 3
