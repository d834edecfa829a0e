"""The client on uvloop, for suites that run their tests on it: the same truth as on asyncio.

uvloop is not adopted by the project (issue 42, benchmarks/README.md: no gain
in client CPU per token event beyond the noise, more system time per event),
but a suite may set uvloop's loop for its own reasons. These run the client's
timing-truth test (the strict server's own send times,
``test_real_server_shapes.py``) and a load run against the simulator on
uvloop, over real loopback sockets, and check that uvloop reads into the
connection's buffer (``get_buffer``/``buffer_updated``, the path
``client/http1.py`` is built on).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
import test_real_server_shapes as shapes
from loopback import running_in_thread

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.http1 import Http1Connection
from pytest_llmperf.loadgen.run import run_load
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.run import RunSpec

uvloop = pytest.importorskip("uvloop")
T = TypeVar("T")


def on_uvloop(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_token_events_and_ttft_ttfo_match_the_servers_send_times_on_uvloop(api: str) -> None:
    shapes_test = shapes.test_every_token_event_counts_and_ttft_ttfo_match_the_servers_send_times
    on_uvloop(shapes_test(api, True))


def test_a_load_run_against_the_simulator_reads_through_the_buffer_on_uvloop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads = {"get_buffer": 0, "buffer_updated": 0}
    get_buffer, buffer_updated = Http1Connection.get_buffer, Http1Connection.buffer_updated

    def counted_get_buffer(self: Http1Connection, sizehint: int) -> memoryview:
        reads["get_buffer"] += 1
        return get_buffer(self, sizehint)

    def counted_buffer_updated(self: Http1Connection, nbytes: int) -> None:
        reads["buffer_updated"] += 1
        buffer_updated(self, nbytes)

    monkeypatch.setattr(Http1Connection, "get_buffer", counted_get_buffer)
    monkeypatch.setattr(Http1Connection, "buffer_updated", counted_buffer_updated)

    async def main(url: str) -> tuple[Any, type]:
        endpoint = Endpoint(url + "/v1", timeouts=Timeouts.from_seconds(10))
        spec = RunSpec.from_markers(
            ("synthetic",),
            {"requests": 12, "output_tokens": 16},
            ("concurrency",),
            {"concurrency": 4},
        )
        return await run_load(endpoint, spec), type(asyncio.get_running_loop())

    # The simulator on asyncio's loop in a thread, as the plugin runs it in a process of
    # its own: on uvloop its token clock steps by libuv's whole milliseconds
    # (benchmarks/README.md), which is the simulator's business, not the client's.
    sim = SimServer("fixed", ttft_ms=5.0, itl_ms=1.0)
    with running_in_thread(lambda: sim, "simulator"):
        result, loop_type = on_uvloop(main(sim.url))
    assert loop_type is uvloop.Loop
    assert result.counts["completed"] == 12
    assert result.metrics["itl"].count == 12 * 15  # one gap per token event after the first
    assert reads["buffer_updated"] >= 12 and reads["get_buffer"] >= reads["buffer_updated"]
