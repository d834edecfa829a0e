"""Live progress of a real run: a timer samples the run's counters; the run is unchanged by it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.loadgen.progress import ProgressSampler, watch_progress
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.results.progress import Phase, ProgressSnapshot
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

_PHASE_ORDER = [Phase.STARTING, Phase.WARMUP, Phase.MEASURE, Phase.DRAIN]


class Collect:
    """A sink that keeps what it is shown (and can be told to break)."""

    def __init__(self, every_s: float, *, broken: bool = False) -> None:
        self.every_s = every_s
        self.broken = broken
        self.seen: list[ProgressSnapshot] = []
        self.ended = 0

    def show(self, snapshot: ProgressSnapshot) -> None:
        self.seen.append(snapshot)
        if self.broken:
            raise RuntimeError("a broken display")

    def end(self) -> None:
        self.ended += 1


@pytest.mark.asyncio
async def test_an_open_loop_run_is_sampled_through_its_phases(
    fast_sim: Endpoint, make_spec: Callable[..., RunSpec]
) -> None:
    spec = make_spec("poisson", rate=60, seed=3, requests=90, warmup=20)
    run = LoadRun(fast_sim, spec, handle_sigint=False, label="run0")
    sink = Collect(0.1)
    async with watch_progress(run, sink):
        result = await run.execute()
    assert sink.ended == 1
    seen = sink.seen
    assert len(seen) >= 8, seen
    phases = [s.phase for s in seen]
    assert phases == sorted(phases, key=_PHASE_ORDER.index), phases  # never goes back
    assert Phase.WARMUP in phases and Phase.MEASURE in phases
    warm = [s for s in seen if s.phase is Phase.WARMUP]
    assert all(s.planned == 20 and 0 < s.done <= 20 for s in warm)
    measuring = [s for s in seen if s.phase is Phase.MEASURE]
    assert all(s.planned == 90 and s.label == "run0" for s in measuring)
    done = [s.done for s in measuring]
    assert done == sorted(done) and done[-1] > done[0]
    assert all(s.done <= result.counts["completed"] for s in seen if s.phase is not Phase.WARMUP)
    # about 60 req/s finish once the run is going; the ETA shrinks as requests finish
    late = measuring[len(measuring) // 2 :]
    assert all(s.rate is not None and 20 < s.rate < 120 for s in late), late
    assert all(s.eta_s is not None and 0 <= s.eta_s < 3 for s in late)
    assert [s.elapsed_s for s in seen] == sorted(s.elapsed_s for s in seen)
    assert result.counts["completed"] == 90


@pytest.mark.asyncio
async def test_a_staged_closed_loop_shows_its_stage(
    fast_sim: Endpoint, make_spec: Callable[..., RunSpec]
) -> None:
    load = LoadSpec.parse(
        "concurrency",
        {"stages": [{"concurrency": 2, "duration": 0.6}, {"concurrency": 4, "duration": 0.6}]},
    )
    spec = RunSpec("synthetic", {"input_tokens": 8, "output_tokens": 4}, 0, load, None, 1.2)
    run = LoadRun(fast_sim, spec, handle_sigint=False)
    sink = Collect(0.1)
    async with watch_progress(run, sink):
        await run.execute()
    staged = [s for s in sink.seen if s.phase is Phase.MEASURE]
    assert {s.stages for s in staged} == {2}
    stages = [s.stage for s in staged]
    assert stages == sorted(stages) and set(stages) == {1, 2}, stages
    assert all(s.planned is None and s.planned_s == 1.2 for s in staged)
    assert all(s.eta_s is not None and s.eta_s <= 1.2 for s in staged)
    assert max(s.in_flight for s in staged if s.stage == 2) > 2  # stage 2 keeps 4 in flight


@pytest.mark.asyncio
async def test_a_broken_display_never_fails_the_run(
    fast_sim: Endpoint, make_spec: Callable[..., RunSpec]
) -> None:
    run = LoadRun(fast_sim, make_spec("constant", rate=50, requests=30), handle_sigint=False)
    sink = Collect(0.05, broken=True)
    async with watch_progress(run, sink):
        result = await run.execute()
    assert result.counts["completed"] == 30
    assert len(sink.seen) == 1 and sink.ended == 1  # it stopped showing after the failure


def test_a_run_issued_by_worker_processes_shows_no_counts(
    make_spec: Callable[..., RunSpec],
) -> None:
    spec = make_spec("poisson", rate=10, duration=30.0)
    run = LoadRun(Endpoint("http://127.0.0.1:9/v1"), spec, workers=3, handle_sigint=False)
    sampler = ProgressSampler(run, started_ns=0)
    snapshot = sampler.sample(now_ns=12_000_000_000)
    assert snapshot.phase is Phase.REMOTE and snapshot.workers == 3
    assert snapshot.eta_s == pytest.approx(18.0) and snapshot.elapsed_s == pytest.approx(12.0)
    assert snapshot.rate is None and snapshot.done == 0 and snapshot.in_flight == 0


def test_req_s_is_measured_over_the_recent_window(make_spec: Callable[..., RunSpec]) -> None:
    """Finished requests per second over the last ten seconds, not since the start."""
    run = LoadRun(Endpoint("http://127.0.0.1:9/v1"), make_spec("poisson", rate=10, requests=10**6))
    sampler = ProgressSampler(run, started_ns=0)
    book = run.book
    s = 1_000_000_000
    rates = []
    for second, finished in [(10, 100), (20, 200), (30, 1200), (40, 2200), (50, 2300)]:
        book.issued = finished  # what the book counts as it sends (none in flight)
        run.stats.tracked_issued = finished
        rates.append(sampler.sample(now_ns=second * s).rate)
    assert rates == pytest.approx([10.0, 10.0, 100.0, 100.0, 10.0])


def test_invalid_and_blank_outputs_are_sampled_as_failures_are(
    make_spec: Callable[..., RunSpec],
) -> None:
    """The run's counts of completed requests with an output that failed its check and
    with no visible text reach the snapshot beside its failures."""
    run = LoadRun(Endpoint("http://127.0.0.1:9/v1"), make_spec("poisson", rate=10, requests=100))
    sampler = ProgressSampler(run, started_ns=0)
    acc = run.accumulator
    acc.failed, acc.invalid, acc.blank = 1, 3, 2
    snapshot = sampler.sample(now_ns=5_000_000_000)
    assert (snapshot.errors, snapshot.invalid, snapshot.blank) == (1, 3, 2)
