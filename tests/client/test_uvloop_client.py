"""The client on uvloop (``--llm-event-loop=uvloop``, the ``uvloop`` extra): the same truth.

Issue 42, item 2: a loop is adopted only where every conformance and timing
check holds on it. These run the client's timing-truth test (the strict
server's own send times, ``test_real_server_shapes.py``) and a load run against
the simulator on uvloop, over real loopback sockets, and check that uvloop
reads into the connection's buffer (``get_buffer``/``buffer_updated``, the
path ``client/http1.py`` is built on) rather than some other way.
"""

from __future__ import annotations

import pytest
import test_real_server_shapes as shapes
from loopback import running_in_thread

from pytest_llmperf.client.http1 import Http1Connection
from pytest_llmperf.loadgen.event_loops import (
    EventLoopChoice,
    loop_factory,
    parse_event_loop,
    run_on,
)
from pytest_llmperf.loadgen.run import run_load
from pytest_llmperf.specs.run import RunSpec

uvloop = pytest.importorskip("uvloop")


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_token_events_and_ttft_ttfo_match_the_servers_send_times_on_uvloop(api: str) -> None:
    shapes_test = shapes.test_every_token_event_counts_and_ttft_ttfo_match_the_servers_send_times
    run_on(shapes_test(api, True), EventLoopChoice.UVLOOP)


def test_a_load_run_against_the_simulator_reads_through_the_buffer_on_uvloop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_llmperf.client.endpoint import Endpoint, Timeouts
    from pytest_llmperf.sim import SimServer

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

    async def main(url: str) -> tuple[object, type]:
        import asyncio

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
        result, loop_type = run_on(main(sim.url), "uvloop")
    assert loop_type is uvloop.Loop
    assert result.counts["completed"] == 12  # type: ignore[attr-defined]
    assert result.metrics["itl"].count == 12 * 15  # type: ignore[attr-defined]
    assert reads["buffer_updated"] >= 12 and reads["get_buffer"] >= reads["buffer_updated"]


def test_the_choice_of_loop_parses_and_says_what_is_wrong() -> None:
    assert parse_event_loop(" UVloop ") is EventLoopChoice.UVLOOP
    assert parse_event_loop(None) is EventLoopChoice.ASYNCIO
    assert loop_factory("asyncio") is None
    assert loop_factory("uvloop") is uvloop.new_event_loop
    assert loop_factory("auto") is uvloop.new_event_loop  # installed here
    with pytest.raises(ValueError, match=r"--llm-event-loop.*auto, asyncio, uvloop.*'trio'"):
        parse_event_loop("trio")


def test_uvloop_missing_auto_falls_back_and_uvloop_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_llmperf.errors import LlmPerfUsageError
    from pytest_llmperf.loadgen import event_loops

    monkeypatch.setattr(event_loops, "uvloop_installed", lambda: False)
    assert loop_factory("auto") is None
    with pytest.raises(LlmPerfUsageError, match=r"pytest-llmperf\[uvloop\]") as caught:
        loop_factory("uvloop", where="llm_event_loop")
    assert "llm_event_loop" in str(caught.value)


def test_a_worker_process_runs_on_the_kind_of_loop_its_parent_ran() -> None:
    """``--llm-workers=N``: the payload names the parent's loop, the worker runs on it."""
    import asyncio

    from pytest_llmperf.loadgen.event_loops import running_loop_choice
    from pytest_llmperf.loadgen.scale_out.worker_share import ShareRunner

    async def choice() -> EventLoopChoice:
        return running_loop_choice()

    assert running_loop_choice() is EventLoopChoice.ASYNCIO  # no loop running
    assert run_on(choice(), "uvloop") is EventLoopChoice.UVLOOP
    assert asyncio.run(choice()) is EventLoopChoice.ASYNCIO

    class Share(ShareRunner):
        def __init__(self, loop: str) -> None:  # no plan: only the loop is under test
            self.payload = {"event_loop": loop}

        async def execute(self, t0_ns: int, shift_ns: int = 0) -> dict[str, str]:
            return {"loop": running_loop_choice().value}

    assert Share("uvloop").run(0) == {"loop": "uvloop"}
    assert Share("asyncio").run(0) == {"loop": "asyncio"}
