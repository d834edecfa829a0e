"""The closed loop: its clock and slots (duration, stages, warm-up and stop), and the plain one.

Closed-loop slots (``concurrency``, ``max-throughput``) issue the next request
as soon as their previous one ends. A staged closed loop keeps each stage's
concurrency in flight: slot ``j`` works while the current stage has more than
``j`` slots and rests otherwise.

The plain closed loop (:func:`issue_closed_loop`) and the conversation loop
(:mod:`~pytest_llmperf.loadgen.issue.conversations`) send different things from
each slot, but keep time the same way (:class:`ClosedLoop`):

- ``duration`` runs from the first tracked send (or from ``t0`` when there is
  no warm-up); a slot that finds it over stops with ``StopReason.DURATION``;
- with stages, slot ``j`` works while the current stage has more than ``j``
  slots and rests until a stage that uses it (warm-up runs at the first
  stage's level); a request already in flight is never cut;
- a slot awaits its request inline (no task per request: that was 5% of the
  client's CPU at max throughput); while it is in flight its record sits in
  the book's in-flight map under the slot's task, so a stop leaves it to
  the drain, and past the drain's cap it is recorded as incomplete;
- a slot that raises (a workload that fails to build) stops every slot and
  fails the run;
- slots freed together send, and account for their finished requests, a few per
  turn of the event loop (:mod:`~pytest_llmperf.loadgen.issue.turn_budget`), so the
  reads of the answers already coming are not held behind the burst.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.issue.turn_budget import TurnBudget
from pytest_llmperf.results.run_result import StopReason
from pytest_llmperf.workloads.base import Sample

if TYPE_CHECKING:  # handed in: the book it keeps time for, the plan's requests
    from pytest_llmperf.loadgen.issue.book import IssueBook
    from pytest_llmperf.loadgen.plan.planner import PlannedRequest

__all__ = ["ClosedLoop", "issue_closed_loop"]

_WARMUP_POLL_NS = 50_000_000  # a slot above the first stage's level re-checks warm-up this often


class ClosedLoop:
    """The clock of one closed loop over ``book`` from ``t0``.

    The book's plan says this process's slots (``concurrency``) and its slots
    per stage (``stage_levels``; None: no stages); ``slots`` is how many slot
    tasks :meth:`run` starts.
    """

    def __init__(self, book: IssueBook, t0: int) -> None:
        plan = book.plan
        concurrency = plan.concurrency
        stage_concurrency = plan.stage_levels
        self.book = book
        self.t0 = t0
        self.duration_ns = plan.duration * 1e9 if plan.duration is not None else None
        self.deadline: list[float] = (
            [t0 + self.duration_ns] if self.duration_ns and not plan.warmup else []
        )
        self.staged = bool(stage_concurrency) and bool(plan.load.stages)
        self.levels = list(stage_concurrency or ())
        self.ends: list[int] = []  # each stage's end, from the stages' start
        self.slots = max(1, concurrency)
        self.budget = TurnBudget()
        if self.staged:
            durations = (st.duration_s for st in plan.load.stages)
            self.ends = [round(e * 1e9) for e in itertools.accumulate(durations)]
            book.stage_bounds = [0, *self.ends]
            self.slots = max(1, *self.levels)

    # -- time ------------------------------------------------------------------

    async def rest_until(self, at_ns: float) -> None:
        """Idle until ``at_ns`` on the monotonic clock, or until the run stops."""
        with contextlib.suppress(TimeoutError):
            wait = max(0.0, (at_ns - time.monotonic_ns()) / 1e9)
            await asyncio.wait_for(self.book.stopping.wait(), wait)

    def over(self) -> None:
        """The loop's clock ran out: stop for ``duration`` (unless stopped already)."""
        self.book.settle(StopReason.DURATION)

    async def admit(self, j: int) -> int | None:
        """When slot ``j`` may send: the current stage (-1: no stages, or warm-up), or None
        when it must stop (the stages are over, or the run is stopping)."""
        await self.budget.take()
        if not self.staged:
            return None if self.book.stopping.is_set() else -1
        levels, ends, deadline = self.levels, self.ends, self.deadline
        while not self.book.stopping.is_set():
            now = time.monotonic_ns()
            if not deadline:  # warm-up runs at the first stage's level
                if j < levels[0]:
                    return -1
                await self.rest_until(now + _WARMUP_POLL_NS)
                continue
            start = deadline[0] - ends[-1]
            stage = bisect.bisect_right(ends, now - start)
            if stage >= len(levels):
                self.over()
                return None
            if j < levels[stage]:
                return stage
            later = [k for k in range(stage + 1, len(levels)) if levels[k] > j]
            await self.rest_until(start + (ends[later[0] - 1] if later else ends[-1]))
        return None

    def start_or_check_duration(self, item: PlannedRequest, now: int, stage: int) -> int | None:
        """Start ``duration`` at the first tracked request, or say it is over (None).

        Returns the request's stage: the first tracked request opens stage 0.
        """
        if not item.tracked or self.duration_ns is None:
            return stage
        if not self.deadline:
            self.deadline.append(now + self.duration_ns)
            return 0 if self.staged else stage
        if now >= self.deadline[0]:
            self.over()
            return None
        return stage

    # -- one request -------------------------------------------------------------

    async def send(
        self,
        http: StreamClient,
        endpoint: Endpoint,
        sample: Sample,
        record: RequestRecord,
        stage: int,
        cancel: CancelAt | None,
    ) -> None:
        """Send one request from the current slot, await it, and deliver its record."""
        book = self.book
        if self.staged and record.tracked:
            record.stage = stage
            book.stats.stage_sends[stage] += 1
        task = asyncio.current_task()
        assert task is not None
        inflight = book.inflight
        inflight[task] = record
        try:
            await send_request(http, endpoint, sample, record, cancel=cancel)
        except Exception as exc:  # a client bug: this request fails, the run goes on
            record.fail(ErrorKind.CLIENT, f"{type(exc).__name__}: {exc}", now=time.monotonic_ns())
        try:
            await self.budget.take()  # its accounting waits its turn, not the reads
        finally:  # (cancelled meanwhile: it ended all the same; the drain leaves it)
            del inflight[task]
            book.delivery.deliver(record)

    # -- the slots ---------------------------------------------------------------

    async def run(self, slot: Callable[[int], Awaitable[None]]) -> None:
        """Start ``slots`` tasks of ``slot(j)`` at ``t0`` and wait until every one ends."""
        book = self.book
        while time.monotonic_ns() < self.t0:  # workers start together on the shared clock
            await asyncio.sleep(min(0.05, (self.t0 - time.monotonic_ns()) / 1e9))
        done = book.closed_loop_over = asyncio.get_running_loop().create_future()
        running = self.slots

        def slot_ended(task: asyncio.Future[None]) -> None:
            nonlocal running
            running -= 1
            if not task.cancelled() and task.exception() is not None:
                book.stopping.set()  # the other slots stop issuing too
                book.pacer.cancel()  # (and stop waiting: a conversation's think time)
                book.end_closed_loop(task.exception())
            elif not running:
                book.end_closed_loop()

        for j in range(self.slots):
            asyncio.ensure_future(slot(j)).add_done_callback(slot_ended)
        await done


async def issue_closed_loop(
    book: IssueBook, http: StreamClient, endpoint: Endpoint, t0: int
) -> None:
    """Keep the plan's ``concurrency`` requests in flight: each slot sends its next as one ends.

    A slot awaits its requests inline (no task per request: that was 5% of
    the client's CPU at max throughput). While a request is in flight its
    record is in the book's ``inflight`` under the slot's task, so a stop leaves
    it to the drain, and past the drain's cap it is cancelled and recorded
    as incomplete. With stages (the plan's ``stage_levels``: this process's
    slots per stage) slot ``j`` sends only while the current stage has
    more than ``j`` slots; the stages' clock starts at the first tracked
    send and the run ends with the last stage (the clock is :class:`ClosedLoop`).
    """
    loop = ClosedLoop(book, t0)
    plan = book.plan.planned()
    workload = book.plan.workload

    async def slot(j: int) -> None:
        while (stage := await loop.admit(j)) is not None:
            item = next(plan, None)
            if item is None:
                return
            now = time.monotonic_ns()
            stage = loop.start_or_check_duration(item, now, stage)
            if stage is None:
                return
            sample = workload.sample(item.sample_index)
            record = book.new_record(item, sample, now)
            await loop.send(http, endpoint, sample, record, stage, item.cancel)

    await loop.run(slot)
