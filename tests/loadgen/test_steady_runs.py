"""Steady-state windows on whole runs: a ramp is left out of the throughput.

The acceptance run (issue 39: "a run with a 30 s ramp reports the same steady-state
throughput, within 5%, as one without a ramp") is in virtual time: the load
generator's own plan (its drawn Poisson schedule, its stage bounds) is served by the
simulator's continuous-batching engine on its simulated clock, and the requests it
served become the records the run's accumulator reads, through the same window gate the
share run uses. Deterministic and fast (~1 s); the other tests send real requests over
loopback and check the window's place, not timing precision.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.issue.steady_gate import SteadyGate, level_offset_ns
from pytest_llmperf.loadgen.plan.planner import RunPlan
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.results import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.sim.engine import Engine
from pytest_llmperf.sim.profiles import load_profile
from pytest_llmperf.sim.request import FINISHED
from pytest_llmperf.sim.virtual import _EventLoop  # the virtual driver, fed our own plan
from pytest_llmperf.sim.virtual_inputs import VirtualWorkload
from pytest_llmperf.slo.verdicts import Verdict, evaluate, evaluate_runs
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.specs.slo import parse_slo

BASE_NS = 10**12  # the run's t0 on a made-up monotonic clock
RATE = 20.0  # req/s: below llama-3.1-8b-h100's saturation (docs/simulator.md, ~28 req/s)


def spec(pattern: str, load: dict[str, Any], **run: Any) -> RunSpec:
    return RunSpec.from_markers(
        ("synthetic",), {"input_tokens": 16, "output_tokens": 8, **run}, (pattern,), load
    )


def virtual_run(run: RunSpec, sizes: int) -> RunResult:
    """``run``'s planned open loop served in virtual time, measured as the run measures
    (``sizes`` seeds each request's prompt and output lengths)."""
    plan = RunPlan.from_spec(run)
    items = list(plan.planned())
    prof = load_profile("llama-3.1-8b-h100")
    rng = np.random.default_rng(sizes)
    workload = VirtualWorkload(prof, (800, 1200), (64, 192), 0, rng)
    loop = _EventLoop(prof, Engine(prof, track_emitted=False), workload, 1e9, closed=False)
    for item in items:
        assert item.offset_ns is not None
        loop.plan_request(item.offset_ns / 1e9)
    loop.run()
    acc = MetricsAccumulator()
    steady = run.load.steady
    assert steady is not None
    # the share run's gate (loadgen/issue/local.py), noted at each tracked send
    gate = SteadyGate(
        steady,
        acc.declare_steady(steady.mode.value, latency=steady.latency),
        level_offset_ns=level_offset_ns(plan.load, plan.stage_bounds_ns),
    )
    records = []
    for item, req in zip(items, loop.requests, strict=True):
        t_sched = BASE_NS + round(req.arrival * 1e9)
        if gate.pending:
            gate.note(t_sched, item.offset_ns, 0)
        assert req.state == FINISHED
        record = RequestRecord(index=item.sample_index, t_sched=t_sched, t_send=t_sched)
        record.stage = item.stage
        record.t_first = BASE_NS + round(req.first_token_time * 1e9)
        record.t_last = record.t_end = BASE_NS + round(req.finish_time * 1e9)
        record.token_events = record.usage_completion_tokens = req.generated
        record.usage_prompt_tokens = req.prompt_len
        records.append(record)
    for record in sorted(records, key=lambda r: r.t_end):  # delivered as they end
        acc.add(record)
    return RunResult(
        workload={},
        load=run.load.describe(),
        endpoint={},
        accumulator=acc,
        stage_plan=run.load.stages,
    )


def test_a_30s_ramp_reports_the_steady_throughput_of_a_run_without_one() -> None:
    # a 30 s ramp up to RATE in ten 3 s steps (stages: ramp= alone is the whole run), then
    # 120 s at RATE; against 120 s at RATE from the first request
    # (constant arrivals: a Poisson draw's own count noise over 120 s, ±√2400 ≈ 2%, is
    # no part of what is compared; the two runs' request sizes are drawn apart)
    steps = [{"rate": RATE * k / 11, "duration": 3} for k in range(1, 11)]
    stages = [*steps, {"rate": RATE, "duration": 120}]
    ramped = virtual_run(spec("constant", {"stages": stages, "steady": "auto"}), sizes=3)
    flat = virtual_run(spec("constant", {"rate": RATE, "steady": "auto"}, duration=120), sizes=4)
    ramp_window, flat_window = ramped.steady, flat.steady
    assert ramp_window is not None and flat_window is not None
    # the window opens where the ramp reaches its level, and leaves the ramp's requests out
    assert ramp_window["start_s"] == pytest.approx(30.0, abs=0.2), ramp_window
    assert ramp_window["out_ramp"] > 250 and ramp_window["state"] == "open"
    assert flat_window["start_s"] == 0.0 and flat_window["out_ramp"] == 0
    for name in ("output_throughput", "request_throughput"):
        steady_ramped, steady_flat = ramped.rate(name), flat.rate(name)
        assert steady_ramped == pytest.approx(steady_flat, rel=0.05), name
        # ... where the whole ramped run (ramp and drain in) is well below it
        whole = ramp_window["whole_run"][name]
        assert whole < steady_flat * 0.92, (name, whole, steady_flat)
    judged = evaluate(parse_slo(f"request_throughput > {RATE * 0.9:g} req/s"), ramped)
    assert judged.verdict is Verdict.PASS, judged


@pytest.mark.asyncio
async def test_a_closed_loop_window_opens_once_its_slots_are_all_in_flight(
    fast_sim: Endpoint,
) -> None:
    stages = [{"concurrency": 1, "duration": 0.6}, {"concurrency": 4, "duration": 1.2}]
    result = await LoadRun(
        fast_sim, spec("concurrency", {"stages": stages, "steady": "auto"})
    ).execute()
    report = result.to_dict()
    window = report["steady"]
    assert report["load"]["steady"] == "auto"
    # 4 in flight only in the second stage, which starts 0.6 s after the first send
    assert window["state"] == "open" and window["start_s"] >= 0.59, window
    assert window["end_s"] <= result.duration_s
    # out: the first stage's requests, and the second's sent before its slots all woke
    first = report["stages"][0]["counts"]["issued"]
    assert 0 < first <= window["out_ramp"] < first + 12, (first, window)
    assert window["requests_in"] + window["requests_out"] == report["counts"]["issued"]
    # the run's throughput is the window's: its requests over its length
    part = result.accumulator.steady_part
    assert part is not None and part.issued == window["requests_in"]
    assert report["metrics"]["request_throughput"] == pytest.approx(
        part.completed / window["duration_s"], rel=1e-3
    )
    assert window["whole_run"]["request_throughput"] < report["metrics"]["request_throughput"]


@pytest.mark.asyncio
async def test_a_run_that_never_reaches_its_level_has_no_steady_window(fast_sim: Endpoint) -> None:
    run = spec("concurrency", {"concurrency": 8, "steady": "auto"}, requests=5)
    result = await LoadRun(fast_sim, run).execute()
    report = result.to_dict()
    assert report["counts"]["completed"] == 5
    assert report["steady"]["state"] == "never_opened" and report["steady"]["requests_in"] == 0
    assert report["metrics"]["output_throughput"] is None
    verdict = evaluate(parse_slo("output_throughput > 0 tok/s"), result)
    assert verdict.verdict is Verdict.INCONCLUSIVE and "no steady window" in verdict.reason


def test_a_staged_runs_throughput_slo_is_judged_on_its_window_not_per_stage() -> None:
    """Without steady=, every SLO is judged on every stage (the ramp's steps fail a
    throughput target); with it, a throughput is judged once, on the window."""
    steps = [{"rate": RATE * k / 4, "duration": 5} for k in range(1, 4)]
    stages = [*steps, {"rate": RATE, "duration": 30}]
    windowed = virtual_run(spec("constant", {"stages": stages, "steady": "auto"}), sizes=5)
    slos = [parse_slo(f"request_throughput > {RATE * 0.9:g} req/s"), parse_slo("ttft.p50 < 5s")]
    verdicts = evaluate_runs(slos, [windowed])
    throughput = [v for v in verdicts if v.expr.startswith("request_throughput")]
    assert [(v.stage, v.verdict) for v in throughput] == [(None, Verdict.PASS)], throughput
    latency = [v for v in verdicts if v.expr.startswith("ttft")]
    assert [v.stage for v in latency] == [0, 1, 2, 3]  # latency: per stage, as ever


@pytest.mark.asyncio
async def test_worker_processes_each_open_their_share_of_the_window(fast_sim: Endpoint) -> None:
    """Two workers, 2 slots each after a 1-slot-each first stage: each share opens its own
    window at its own level; the run's merges them (earliest start, latest end)."""
    stages = [{"concurrency": 2, "duration": 0.6}, {"concurrency": 4, "duration": 1.0}]
    run = spec("concurrency", {"stages": stages, "steady": "auto"})
    result = await LoadRun(fast_sim, run, workers=2).execute()
    window = result.to_dict()["steady"]
    assert window["state"] == "open" and window["start_s"] >= 0.59, window
    assert window["requests_in"] + window["requests_out"] == result.counts["issued"]
    assert window["out_ramp"] >= result.to_dict()["stages"][0]["counts"]["issued"] > 0
    part = result.accumulator.steady_part
    assert part is not None and part.issued == window["requests_in"] > 0


def test_an_open_loop_the_server_cannot_keep_up_with_shows_in_the_drain() -> None:
    """Counting by start, an overloaded open loop's window reports the offered load
    (docs/measurement.md says so); ``drain_s``, the time its last request took past the
    window's end, is what gives it away: about one latency when the server keeps up."""
    kept_up = virtual_run(spec("constant", {"rate": RATE, "steady": "auto"}, duration=60), 1)
    over = virtual_run(spec("constant", {"rate": 40.0, "steady": "auto"}, duration=60), 1)
    assert kept_up.steady is not None and over.steady is not None
    assert kept_up.steady["drain_s"] < 2.0, kept_up.steady
    assert over.steady["drain_s"] > 10.0, over.steady
    # the offered 40 req/s, though the server finished fewer per second over the run
    assert over.rate("request_throughput") == pytest.approx(40.0, rel=0.01)
    assert over.steady["whole_run"]["request_throughput"] < 36.0
