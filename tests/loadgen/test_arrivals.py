"""Open-loop schedules with stages, ramps and bursts: counts, boundaries, shapes, seeds."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest

from pytest_llmperf.loadgen.plan.arrivals import StagedSchedule, arrival_offsets_ns
from pytest_llmperf.loadgen.plan.planner import RunPlan, ScheduleShare
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec


def staged(pattern: str, **params: object) -> LoadSpec:
    return LoadSpec.parse(pattern, params)


def per_stage(schedule: StagedSchedule) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in schedule.spec.stages]
    for offset, stage in schedule.arrivals():
        if stage >= 0:
            out[stage].append(offset)
    return out


def test_constant_stages_hold_exactly_rate_times_duration_inside_their_windows() -> None:
    spec = staged("constant", stages=[{"rate": 10, "duration": 2}, {"rate": 40, "duration": 1.5}])
    schedule = StagedSchedule(spec)
    assert schedule.bounds_ns == [0, 2_000_000_000, 3_500_000_000]
    first, second = per_stage(schedule)
    assert len(first) == 20 and len(second) == 60
    assert all(0 <= t < 2e9 for t in first) and all(2e9 <= t < 3.5e9 for t in second)
    gaps = {b - a for a, b in itertools.pairwise(second)}
    assert max(gaps) - min(gaps) <= 1  # 25 ms apart, to the nanosecond's rounding
    assert second[0] == 2_000_000_000  # the level changes exactly at the boundary


def test_poisson_stages_follow_each_stages_rate_and_repeat_with_the_seed() -> None:
    spec = staged(
        "poisson", seed=3, stages=[{"rate": 50, "duration": 40}, {"rate": 200, "duration": 40}]
    )
    counts = [len(s) for s in per_stage(StagedSchedule(spec))]
    for count, expected in zip(counts, (2000, 8000), strict=True):
        assert abs(count - expected) < 4 * math.sqrt(expected)  # 4 sigma of a Poisson count
    assert list(StagedSchedule(spec).arrivals()) == list(StagedSchedule(spec).arrivals())
    other = staged(
        "poisson", seed=4, stages=[{"rate": 50, "duration": 40}, {"rate": 200, "duration": 40}]
    )
    assert list(StagedSchedule(other).arrivals())[:50] != list(StagedSchedule(spec).arrivals())[:50]


@pytest.mark.parametrize("shape", ["linear", "exponential"])
def test_a_ramp_sends_at_its_instantaneous_rate(shape: str) -> None:
    spec = staged(
        "constant", ramp={"from": 10, "to": 80, "duration": 30, "shape": shape, "steps": 6}
    )
    schedule = StagedSchedule(spec)
    stages = per_stage(schedule)
    assert len(stages) == 6
    for stage, offsets in zip(spec.stages, stages, strict=True):
        expected = (stage.mean_rate or 0) * stage.duration_s  # the rate's integral
        assert abs(len(offsets) - expected) <= 1.0, (shape, len(offsets), expected)
    # the rate at the ramp's end is 8x its start: the gaps shrink accordingly
    all_offsets = [t for s in stages for t in s]
    first_gap = (all_offsets[1] - all_offsets[0]) / 1e9
    last_gap = (all_offsets[-1] - all_offsets[-2]) / 1e9
    assert first_gap == pytest.approx(1 / 10, rel=0.05)
    assert last_gap == pytest.approx(1 / 80, rel=0.05)


def test_a_linear_ramp_may_start_from_zero() -> None:
    spec = staged("constant", ramp={"from": 0, "to": 20, "duration": 10, "steps": 2})
    offsets = [t for t, _ in StagedSchedule(spec).arrivals()]
    assert len(offsets) == 100  # the integral: 20 / 2 * 10
    assert offsets[0] == 0 and offsets[1] > 0.3e9  # the first gap is long at a low rate


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_burstiness_keeps_the_mean_gap_and_sets_its_spread(burstiness: float) -> None:
    spec = staged("poisson", rate=100, seed=1, burstiness=burstiness)
    offsets = list(itertools.islice(arrival_offsets_ns(spec), 40001))
    gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(offsets)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.01, rel=0.05)
    cv = statistics.pstdev(gaps) / mean  # a gamma's coefficient of variation is 1/sqrt(shape)
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


def test_burstiness_on_stages_keeps_each_stages_count() -> None:
    spec = staged(
        "constant",
        seed=2,
        burstiness=0.5,
        stages=[{"rate": 100, "duration": 20}, {"rate": 400, "duration": 20}],
    )
    counts = [len(s) for s in per_stage(StagedSchedule(spec))]
    for count, expected in zip(counts, (2000, 8000), strict=True):
        # gamma(0.5) gaps: variance of the count ~ expected * CV^2 = 2 * expected
        assert abs(count - expected) < 4 * math.sqrt(2 * expected)


def test_plain_schedules_are_unchanged_by_the_new_machinery() -> None:
    constant = list(itertools.islice(arrival_offsets_ns(LoadSpec("constant", rate=3.0)), 4))
    assert constant == [0, 333_333_333, 666_666_667, 1_000_000_000]
    import random

    rng = random.Random(7)
    expected, t = [], 0.0
    for _ in range(5):
        expected.append(round(t * 1e9))
        t += rng.expovariate(20.0)
    assert (
        list(itertools.islice(arrival_offsets_ns(LoadSpec("poisson", rate=20.0, seed=7)), 5))
        == expected
    )


def test_warm_up_goes_first_at_the_first_stages_rate_and_stages_start_after_it() -> None:
    spec = staged("constant", stages=[{"rate": 10, "duration": 1}, {"rate": 20, "duration": 1}])
    schedule = StagedSchedule(spec, warmup=5)
    arrivals = list(schedule.arrivals())
    assert [s for _, s in arrivals[:5]] == [-1] * 5
    assert [t for t, _ in arrivals[:5]] == [0, 100_000_000, 200_000_000, 300_000_000, 400_000_000]
    assert schedule.origin_ns == 500_000_000 == arrivals[5][0]
    assert schedule.bounds_ns == [500_000_000, 1_500_000_000, 2_500_000_000]
    assert [s for _, s in arrivals[5:]].count(0) == 10 and [s for _, s in arrivals[5:]].count(
        1
    ) == 20


def test_the_plan_tags_each_request_with_its_stage_and_ends_with_the_last_stage() -> None:
    spec = RunSpec.from_markers(
        ("synthetic",), {"input_tokens": 8, "output_tokens": 4},
        ("constant",), {"stages": [{"rate": 10, "duration": 1}, {"rate": 30, "duration": 1}]},
    )  # fmt: skip
    assert spec.requests is None and spec.duration == 2.0
    plan = list(RunPlan.from_spec(spec, ScheduleShare()).planned())
    assert [p.stage for p in plan].count(0) == 10 and [p.stage for p in plan].count(1) == 30
    assert len(plan) == 40
    halves = [list(RunPlan.from_spec(spec, ScheduleShare(i, 2)).planned()) for i in range(2)]
    assert sorted(p.position for h in halves for p in h) == [p.position for p in plan]


def test_cancel_points_are_drawn_per_position_from_the_seed() -> None:
    def cancelled(seed: int) -> list[int]:
        spec = RunSpec.from_markers(
            ("synthetic",), {"input_tokens": 8, "output_tokens": 4, "requests": 2000},
            ("constant",), {"rate": 10, "seed": seed, "cancel": {"share": 0.25, "after_tokens": 3}},
        )  # fmt: skip
        return [
            p.position
            for p in RunPlan.from_spec(spec, ScheduleShare()).planned()
            if p.cancel is not None
        ]

    picked = cancelled(1)
    assert abs(len(picked) - 500) < 4 * math.sqrt(2000 * 0.25 * 0.75)
    assert picked == cancelled(1) and picked != cancelled(2)
