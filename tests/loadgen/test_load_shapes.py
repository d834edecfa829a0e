"""Production load shapes against a real local server: stages, ramps, a capped open loop.

These are the issue's acceptance runs; each sends real requests over
loopback to the simulator and checks what the run *measured*.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.slo.verdicts import Verdict, evaluate
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.specs.slo import parse_slo

pytestmark = pytest.mark.asyncio


def spec(pattern: str, load: dict[str, Any], **workload: Any) -> RunSpec:
    return RunSpec.from_markers(
        ("synthetic",), {"input_tokens": 16, "output_tokens": 4, **workload}, (pattern,), load
    )


@pytest_asyncio.fixture
async def slow_first_token() -> AsyncIterator[Endpoint]:
    """A server whose first token takes 100 ms, then one token per ms."""
    async with SimServer("fixed", ttft_ms=100.0, itl_ms=1.0) as sim:
        yield Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(30))


async def test_two_poisson_stages_report_their_achieved_rates(fast_sim: Endpoint) -> None:
    stages = [{"rate": 10, "duration": 6}, {"rate": 40, "duration": 6}]
    result = await LoadRun(fast_sim, spec("poisson", {"stages": stages, "seed": 1})).execute()
    report = result.to_dict()
    assert [s["planned_rate"] for s in report["stages"]] == [10, 40]
    for stage in report["stages"]:
        assert stage["achieved_rate"] == pytest.approx(stage["planned_rate"], rel=0.2), stage
        assert stage["counts"]["completed"] == stage["counts"]["issued"] > 0
        assert stage["metrics"]["ttft"]["count"] == stage["counts"]["completed"]
    per_stage = sum(s["counts"]["issued"] for s in report["stages"])
    assert per_stage == report["counts"]["issued"]  # every tracked request is in one stage
    assert not result.self_check["generator_bound"], result.self_check
    assert 11.0 <= result.duration_s <= 14.0


async def test_a_capped_open_loop_counts_the_queue_in_latency_not_against_the_generator(
    slow_first_token: Endpoint,
) -> None:
    run = spec("poisson", {"rate": 50, "max_concurrency": 2, "seed": 5}, requests=60)
    result = await LoadRun(slow_first_token, run).execute()
    assert result.counts["completed"] == 60
    queue, ttft = result.histogram("queue_wait"), result.histogram("ttft")
    assert queue.count == 60 and queue.p(50) > 300
    # the users waited in the queue: TTFT counts from the planned send
    assert ttft.p(50) >= 500
    assert ttft.p(50) >= queue.p(50) + 100 - 5
    # ... and the generator kept its schedule: the queue is the load shape, not a fault
    assert not result.self_check["generator_bound"], result.self_check
    assert result.histogram("schedule_lag").p(50) < 10 < queue.p(50)
    verdict = evaluate(parse_slo("ttft.p50 < 60s"), result)
    assert verdict.verdict is Verdict.PASS, verdict


async def test_without_a_cap_the_same_load_has_no_queue(slow_first_token: Endpoint) -> None:
    result = await LoadRun(slow_first_token, spec("poisson", {"rate": 50}, requests=30)).execute()
    assert result.histogram("queue_wait").count == 0
    assert result.histogram("ttft").p(50) < 150
    assert "queue_wait" in result.to_dict()["metrics"]


async def test_concurrency_stages_hold_each_stages_level(slow_first_token: Endpoint) -> None:
    stages = [{"concurrency": 1, "duration": 1.5}, {"concurrency": 4, "duration": 1.5}]
    result = await LoadRun(slow_first_token, spec("concurrency", {"stages": stages})).execute()
    first, second = result.to_dict()["stages"]
    assert (first["concurrency"], second["concurrency"]) == (1, 4)
    # ~105 ms a request: one slot sends ~14 in 1.5 s, four send ~4x that
    assert 8 <= first["counts"]["issued"] <= 16
    assert second["counts"]["issued"] >= 3 * first["counts"]["issued"]
    assert second["achieved_rate"] == pytest.approx(4 * first["achieved_rate"], rel=0.3)
    assert result.stop_reason == "duration"
    assert 2.9 <= result.duration_s <= 3.6


async def test_a_rate_ramp_is_reported_as_its_windows(fast_sim: Endpoint) -> None:
    ramp = {"from": 5, "to": 45, "duration": 4, "steps": 4}
    result = await LoadRun(fast_sim, spec("constant", {"ramp": ramp})).execute()
    stages = result.to_dict()["stages"]
    assert [s["planned_rate"] for s in stages] == [10, 20, 30, 40]
    assert [s["counts"]["issued"] for s in stages] == [10, 20, 30, 40]
    assert stages[0]["rate_from"] == 5 and stages[-1]["rate_to"] == 45


async def test_stages_split_across_worker_processes_merge_exactly(fast_sim: Endpoint) -> None:
    stages = [{"rate": 20, "duration": 1}, {"rate": 60, "duration": 1}]
    run = spec("constant", {"stages": stages})
    result = await LoadRun(fast_sim, run, workers=2).execute()
    report = result.to_dict()
    assert [s["counts"]["issued"] for s in report["stages"]] == [20, 60]
    assert [s["achieved_rate"] for s in report["stages"]] == pytest.approx([20, 60], rel=0.2)
