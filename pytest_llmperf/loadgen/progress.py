"""Live progress of a running load: a timer samples the run's counters into snapshots.

A ten-minute load test that prints nothing cannot be told from a hung one,
so while a run goes a :class:`ProgressWatch` wakes every few seconds, reads
counters the run keeps anyway (sends, deliveries, failures, requests in
flight) and hands a :class:`ProgressSnapshot` to a :class:`ProgressSink`
(the plugin's terminal line or CI log line, :mod:`pytest_llmperf.reports.live`
formats it). Why a timer and not a callback per request: the hot path stays
exactly as it was (nothing is added to a send or a delivery), and the cost
is one small read per tick, whatever the request rate.

Counts are this process's: a run issued by worker processes
(``--llm-workers`` > 1) reports its phase, elapsed time and, for a timed
run, its ETA, never counts it cannot see (:attr:`Phase.REMOTE`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from pytest_llmperf.results.progress import Phase, ProgressSink, ProgressSnapshot

if TYPE_CHECKING:
    from pytest_llmperf.loadgen.issue.stats import IssueStats
    from pytest_llmperf.loadgen.plan.planner import RunPlan
    from pytest_llmperf.results.accumulator import MetricsAccumulator
    from pytest_llmperf.results.run_result import StopReason

__all__ = [
    "RATE_WINDOW_S",
    "ProgressSampler",
    "ProgressWatch",
    "WatchedRun",
    "watch_progress",
]


class WatchedRun(Protocol):
    """What the progress line reads of a run (a :class:`~pytest_llmperf.loadgen.run.LoadRun`):
    its plan and plain counters, on a timer, never per request."""

    label: str

    @property
    def workers(self) -> int: ...

    @property
    def plan(self) -> RunPlan: ...

    @property
    def issues_here(self) -> bool: ...

    @property
    def issued_requests(self) -> int: ...

    @property
    def in_flight(self) -> int: ...

    @property
    def stats(self) -> IssueStats: ...

    @property
    def accumulator(self) -> MetricsAccumulator: ...

    @property
    def stop_reason(self) -> StopReason | None: ...


RATE_WINDOW_S = 10.0  # req/s is measured over about this many recent seconds


class ProgressSampler:
    """Turns a run's counters into snapshots; keeps the recent ones for req/s.

    Reads only: the counters are plain integers the run updates anyway
    (:class:`~pytest_llmperf.loadgen.issue.stats.IssueStats`, the accumulator's
    counts, the book's requests in flight), and every read happens on the
    run's event loop, between its callbacks.
    """

    def __init__(self, run: WatchedRun, *, started_ns: int | None = None) -> None:
        self.run = run
        self.started_ns = started_ns if started_ns is not None else time.monotonic_ns()
        self._finished: deque[tuple[int, int]] = deque()  # (time, requests finished)

    def sample(self, now_ns: int | None = None) -> ProgressSnapshot:
        run = self.run
        plan = run.plan
        now = now_ns if now_ns is not None else time.monotonic_ns()
        elapsed = (now - self.started_ns) / 1e9
        stages = len(plan.load.stages)
        if not run.issues_here:
            return ProgressSnapshot(
                run.label,
                Phase.REMOTE,
                elapsed,
                planned=plan.requests,
                planned_s=plan.duration,
                eta_s=max(0.0, plan.duration - elapsed) if plan.duration else None,
                stages=stages,
                workers=run.workers,
            )
        sent_all, in_flight = run.issued_requests, run.in_flight
        tracked_sent = run.stats.tracked_issued
        rate = self._rate(now, sent_all - in_flight)
        measure_s = (now - run.stats.first_send_ns) / 1e9 if tracked_sent else 0.0
        done, planned = run.accumulator.issued, plan.requests
        eta: float | None = None
        if sent_all == 0:
            phase = Phase.STARTING
        elif not tracked_sent and plan.warmup:
            phase, done, planned = Phase.WARMUP, sent_all, plan.warmup
            rest = plan.duration or (plan.requests / rate if plan.requests and rate else None)
            if rate and rest is not None:
                eta = max(0, plan.warmup - sent_all) / rate + rest
        elif (
            run.stop_reason is not None
            or (plan.requests is not None and tracked_sent >= plan.requests)
            or (plan.duration is not None and measure_s >= plan.duration)
        ):
            phase = Phase.DRAIN
        else:
            phase = Phase.MEASURE
            etas = [max(0.0, plan.duration - measure_s)] if plan.duration is not None else []
            if plan.requests is not None and rate:
                etas.append(max(0, plan.requests - done) / rate)
            eta = min(etas, default=None)
        return ProgressSnapshot(
            run.label,
            phase,
            elapsed,
            done=done,
            planned=planned,
            planned_s=plan.duration,
            measure_s=measure_s,
            rate=rate,
            in_flight=in_flight,
            errors=run.accumulator.failed,
            blank=run.accumulator.blank,
            invalid=run.accumulator.invalid,
            eta_s=eta,
            stage=_stage_at(run, measure_s) if stages and tracked_sent else 0,
            stages=stages,
        )

    def _rate(self, now: int, finished: int) -> float | None:
        """Requests finished per second over the last :data:`RATE_WINDOW_S` seconds."""
        window = self._finished
        window.append((now, finished))
        horizon = now - int(RATE_WINDOW_S * 1e9)
        while len(window) > 2 and window[1][0] <= horizon:
            window.popleft()
        if len(window) < 2:
            since = (now - self.started_ns) / 1e9
            return finished / since if since > 0 else None
        t_old, n_old = window[0]
        span = (now - t_old) / 1e9
        return (finished - n_old) / span if span > 0 else None


def _stage_at(run: WatchedRun, measure_s: float) -> int:
    """The 1-based stage whose window (on the run's clock) holds ``measure_s``."""
    edge = 0.0
    stages = run.plan.load.stages
    for k, stage in enumerate(stages, start=1):
        edge += stage.duration_s
        if measure_s < edge:
            return k
    return len(stages)


class ProgressWatch:
    """A timer task that shows a snapshot every ``sink.every_s`` seconds while a run goes."""

    def __init__(self, run: WatchedRun, sink: ProgressSink) -> None:
        self.sampler = ProgressSampler(run)
        self.sink = sink
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        every = max(0.05, self.sink.every_s)
        while True:
            await asyncio.sleep(every)
            try:
                self.sink.show(self.sampler.sample())
            except Exception:  # a display must never fail a measurement
                return

    async def stop(self) -> None:
        """Stop the timer and end the display (first: a cancelled test still clears its line)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()  # it cannot show again: it only runs at its sleep's end
        with contextlib.suppress(Exception):
            self.sink.end()
        if task is not None:
            await asyncio.wait([task])  # a cancellation of the caller still propagates


@contextlib.asynccontextmanager
async def watch_progress(run: WatchedRun, sink: ProgressSink | None) -> AsyncIterator[None]:
    """Show ``run``'s progress on ``sink`` while the block runs (nothing when ``sink`` is None)."""
    if sink is None:
        yield
        return
    watch = ProgressWatch(run, sink)
    watch.start()
    try:
        yield
    finally:
        await watch.stop()
