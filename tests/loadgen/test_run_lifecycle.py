"""LoadRun lifecycle against a real local server: phases, stops, drain, self-check."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable

import pytest

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.issue.drain import INTERRUPT_DRAIN_S
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.run import RunSpec

pytestmark = pytest.mark.asyncio


async def test_count_stop_and_warmup_is_not_tracked(
    make_spec: Callable[..., RunSpec], fast_sim: Endpoint
) -> None:
    seen = []
    run = LoadRun(
        fast_sim,
        make_spec("concurrency", concurrency=4, requests=20, warmup=6),
        observers=[seen.append],
    )
    result = await run.execute()
    assert result.counts == {
        "issued": 20,
        "completed": 20,
        "failed": 0,
        "incomplete": 0,
        "cancelled": 0,
        "connection_retries": 0,
        "invalid": 0,
        "blank": 0,
    }
    assert sum(not r.tracked for r in seen) <= 6  # warm-up is not drained: some may be cut
    assert sum(r.tracked for r in seen) == 20
    assert result.stop_reason == "completed"
    assert result.metrics["ttft"].count == 20


async def test_open_loop_duration_stop_follows_the_planned_schedule(
    make_spec: Callable[..., RunSpec], fast_sim: Endpoint
) -> None:
    # constant 100/s: planned offsets 0, 10, 20 ... ms; duration 0.3 s keeps offsets < 300 ms
    result = await LoadRun(fast_sim, make_spec("constant", rate=100, duration=0.3)).execute()
    assert result.counts["issued"] == 30
    assert result.counts["completed"] == 30
    check = result.self_check
    assert check["planned_rate"] == 100
    assert check["schedule_rate"] == pytest.approx(100, rel=1e-6)
    assert set(check) >= {"achieved_rate", "schedule_lag_p99_ms", "client_cpu_share"}


async def test_closed_loop_duration_stop(
    make_spec: Callable[..., RunSpec], fast_sim: Endpoint
) -> None:
    result = await LoadRun(
        fast_sim, make_spec("concurrency", concurrency=2, duration=0.25)
    ).execute()
    assert result.counts["issued"] > 0
    assert result.counts["failed"] == 0
    assert result.duration_s < 2.0


async def test_stop_ends_issuing_and_drains_what_is_in_flight(
    make_spec: Callable[..., RunSpec],
) -> None:
    # Stopped when the first request completes (evidence that the run is under way; a
    # timer can fire before the first send on a busy machine). First token after 100 ms
    # at 50 req/s: the requests sent since are still in flight then, and must be drained.
    at_stop: dict[str, int] = {}

    def stop_at_the_first_completion(record: RequestRecord) -> None:
        if not at_stop:
            at_stop.update(issued=run.issued_requests, in_flight=run.in_flight)
            run.stop()

    async with SimServer("fixed", ttft_ms=100.0, itl_ms=1.0) as sim:
        endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(10))
        spec = make_spec("constant", rate=50, requests=10_000)
        run = LoadRun(endpoint, spec, observers=[stop_at_the_first_completion])
        result = await asyncio.wait_for(run.execute(), 60)
    counts = result.counts
    assert at_stop["in_flight"] >= 1  # the stop came with requests in flight ...
    assert counts["issued"] == at_stop["issued"] < 10_000  # ... issued nothing after it ...
    assert counts["completed"] == counts["issued"]  # ... and drained them, nothing dropped
    assert result.stop_reason == "stop()"
    assert result.interrupted


@pytest.mark.parametrize("second", ["at-once", "during-the-drain"])
async def test_second_interrupt_abandons_the_drain_and_reports_incomplete(
    make_spec: Callable[..., RunSpec], until: Callable[..., Awaitable[None]], second: str
) -> None:
    # The server's first token takes 4 s, less than the 5 s an interrupted run drains
    # for: a drain left alone would see all three complete. The interrupts come once the
    # server has received all three requests (evidence, not a timer); the second either
    # at once (abort(): two Ctrl-C in a row, before the drain has begun) or after it.
    assert INTERRUPT_DRAIN_S > 4.0
    async with SimServer("fixed", ttft_ms=4000.0, itl_ms=1.0) as sim:
        endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(30))
        run = LoadRun(endpoint, make_spec("concurrency", concurrency=3, requests=3))
        task = asyncio.ensure_future(run.execute())
        assert sim.sim is not None
        await until(lambda: sim.sim.next_index == 3, "the server has all three requests")
        if second == "at-once":
            run.abort()
        else:
            run.interrupt()
            await until(lambda: run.share_run.drain.begun, "the drain has begun")
            run.interrupt()
        result = await asyncio.wait_for(task, 10)
    assert result.counts == {
        "issued": 3,
        "completed": 0,
        "failed": 3,
        "incomplete": 3,
        "cancelled": 0,
        "connection_retries": 0,
        "invalid": 0,
        "blank": 0,
    }
    assert result.errors == {"incomplete_at_cap": 3}
    assert result.stop_reason == "SIGINT"


async def test_sigint_stops_issuing_and_the_run_still_returns(
    make_spec: Callable[..., RunSpec], fast_sim: Endpoint
) -> None:
    # SIGINT is sent once the first request has completed: the run's handler is in place
    # and it has issued (a timer could fire before either on a busy machine).
    sent: list[int] = []

    def sigint_at_the_first_completion(record: RequestRecord) -> None:
        if not sent:
            sent.append(run.issued_requests)
            os.kill(os.getpid(), signal.SIGINT)

    run = LoadRun(
        fast_sim,
        make_spec("constant", rate=50, requests=10_000),
        observers=[sigint_at_the_first_completion],
    )
    result = await asyncio.wait_for(run.execute(), 60)
    assert result.stop_reason == "SIGINT"
    assert result.counts["completed"] == result.counts["issued"] >= sent[0] > 0
    assert result.counts["issued"] < 10_000
    assert signal.getsignal(signal.SIGINT) is not None  # handler restored, not left dangling


async def test_failed_requests_are_counted_not_timed(make_spec: Callable[..., RunSpec]) -> None:
    dead = Endpoint("http://127.0.0.1:9/v1", model="m", timeouts=Timeouts.from_seconds(2))
    result = await LoadRun(dead, make_spec("concurrency", concurrency=2, requests=4)).execute()
    assert result.counts["failed"] == 4
    assert result.metrics["ttft"].count == 0
    assert result.metrics["error_rate"] == 1.0


async def test_self_check_flags_a_generator_that_cannot_keep_up(
    make_spec: Callable[..., RunSpec], fast_sim: Endpoint
) -> None:
    result = await LoadRun(
        fast_sim, make_spec("constant", rate=100_000, requests=1500, output_tokens=1)
    ).execute()
    check = result.self_check
    assert check["generator_bound"] is True
    assert check["reasons"]
    assert check["client_cpu_share"] > 0


async def test_workload_description_records_the_sample_order(
    make_spec: Callable[..., RunSpec], fast_sim: Endpoint
) -> None:
    spec = make_spec("concurrency", concurrency=1, requests=3, sample_order="with-replacement")
    result = await LoadRun(fast_sim, spec).execute()
    assert result.workload["sample_order"] == {"mode": "with-replacement", "seed": 0, "pool": 3}
    assert result.to_dict()["stop_reason"] == "completed"


async def test_a_workload_that_fails_mid_run_stops_the_closed_loop_and_raises(
    make_spec: Callable[..., RunSpec], fast_sim: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_spec("concurrency", concurrency=4, requests=100)
    workload_type = type(spec.workload)
    built = [0]
    original = workload_type.sample

    def breaks_at_row_30(self: object, index: int) -> object:
        built[0] += 1
        if built[0] == 30:
            raise RuntimeError("dataset row 30 is broken")
        return original(self, index)  # type: ignore[arg-type]

    monkeypatch.setattr(workload_type, "sample", breaks_at_row_30)
    run = LoadRun(fast_sim, spec)
    with pytest.raises(RuntimeError, match="row 30"):
        await asyncio.wait_for(run.execute(), 10)
    counts = run.accumulator.counts()
    assert 20 <= counts["issued"] < 40  # the other slots stopped issuing too
    assert counts["completed"] == counts["issued"]  # and what was in flight was drained
