"""Issuing one process's share of the plan, on the pattern's clock, and draining at the end.

Open-loop sends are paced against absolute planned times (``t0 +
offset_i``), never "previous send + delay", so the schedule cannot drift; a
send that happens late still counts its latency from its planned time
(:mod:`~pytest_llmperf.loadgen.pacing` wakes up early and finishes on the
monotonic clock, because asyncio's timers are only millisecond-accurate).
Closed-loop slots (``concurrency``, ``max-throughput``) issue the next
request as soon as their previous one ends.

An open loop under ``max_concurrency`` sends each request at its planned
time only if a slot is free; otherwise it waits in arrival order
(:mod:`~pytest_llmperf.loadgen.concurrency_cap`), the wait is its
``queue_wait``, and its latency still counts from the plan. A staged
closed loop keeps each stage's concurrency in flight: slot ``j`` works
while the current stage has more than ``j`` slots and rests otherwise.

A workload that runs multi-turn sessions (``conversation`` with
``sessions=True``, a trace with ``session_id`` rows) is issued by
:mod:`~pytest_llmperf.loadgen.sessions` instead, with this issuer's
bookkeeping; ``share`` (set by the run) says which sessions are this process's.

Stopping: when the plan runs out, after a closed loop's ``duration``, or on
:meth:`Issuer.stop`. Every issued request ends in exactly one record: the
drain waits for tracked requests up to a cap, and any still in flight then
are recorded as ``incomplete_at_cap`` failures rather than dropped from the
tail. Records go to a :class:`~pytest_llmperf.loadgen.delivery.Delivery`.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.arrivals import StagedSchedule
from pytest_llmperf.loadgen.closed_loop import ClosedLoop
from pytest_llmperf.loadgen.concurrency_cap import SlotGate
from pytest_llmperf.loadgen.delivery import Delivery
from pytest_llmperf.loadgen.gc_pauses import collect_if_due
from pytest_llmperf.loadgen.pacing import Pacer
from pytest_llmperf.loadgen.plan import PlannedRequest, ScheduleShare
from pytest_llmperf.loadgen.result import StopReason
from pytest_llmperf.loadgen.sessions import issue_session_closed_loop, issue_session_open_loop
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads.base import Sample
from pytest_llmperf.workloads.sessions import sessions_of

__all__ = ["DRAIN_GRACE_S", "INTERRUPT_DRAIN_S", "IssueStats", "Issuer"]

DRAIN_GRACE_S = 5.0  # past the per-request total timeout, before in-flight = incomplete
INTERRUPT_DRAIN_S = 5.0  # after Ctrl-C / SIGTERM / cancellation: then in-flight = incomplete


@dataclass
class IssueStats:
    """What the issuing side did, for the self-check; merges across workers."""

    tracked_issued: int = 0
    first_send_ns: int = 0
    last_send_ns: int = 0
    first_planned_ns: int = 0
    last_planned_ns: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    worker_cpu_s: list[float] = field(default_factory=list)
    stage_sends: list[int] = field(default_factory=list)  # tracked sends on each stage's clock

    def note(self, planned_ns: int, send_ns: int) -> None:
        if not self.tracked_issued:
            self.first_send_ns, self.first_planned_ns = send_ns, planned_ns
        self.tracked_issued += 1
        self.last_send_ns, self.last_planned_ns = send_ns, planned_ns

    def merge(self, other: IssueStats) -> None:
        if other.tracked_issued:
            if not self.tracked_issued:
                self.first_send_ns, self.first_planned_ns = (
                    other.first_send_ns,
                    other.first_planned_ns,
                )
                self.last_send_ns, self.last_planned_ns = other.last_send_ns, other.last_planned_ns
            else:
                self.first_send_ns = min(self.first_send_ns, other.first_send_ns)
                self.first_planned_ns = min(self.first_planned_ns, other.first_planned_ns)
                self.last_send_ns = max(self.last_send_ns, other.last_send_ns)
                self.last_planned_ns = max(self.last_planned_ns, other.last_planned_ns)
        self.tracked_issued += other.tracked_issued
        if len(self.stage_sends) < len(other.stage_sends):
            self.stage_sends += [0] * (len(other.stage_sends) - len(self.stage_sends))
        for k, n in enumerate(other.stage_sends):
            self.stage_sends[k] += n
        self.cpu_s += other.cpu_s
        self.worker_cpu_s.append(round(other.cpu_s, 4))

    def to_state(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> IssueStats:
        return cls(**state)


class Issuer:
    """Sends planned requests and drains them; :meth:`stop` ends issuing early.

    ``stop_reason`` says why issuing ended (first reason wins): ``stop()``,
    ``SIGINT``, ``cancelled``, ``duration`` (a closed loop's clock ran out),
    or None while nothing stopped it.
    """

    def __init__(self, spec: RunSpec, delivery: Delivery, stats: IssueStats) -> None:
        self.spec = spec
        self.delivery = delivery
        self.stats = stats
        self.stop_reason: StopReason | None = None
        self.share = ScheduleShare()  # this process's share (sessions: which ones it runs)
        self._sessions = sessions_of(spec.workload)  # before the clock: a trace is scanned
        self._stopping = asyncio.Event()
        self._abort_drain: asyncio.Future[None] | None = None
        self._drain_ended = False  # end_drain() came: the drain waits for nothing
        self._pacer = Pacer()
        self._inflight: dict[asyncio.Task[Any], RequestRecord] = {}
        self._issued = 0
        self._closed_loop_over: asyncio.Future[None] | None = None
        cap = spec.load.max_concurrency
        self._gate = SlotGate(cap) if cap and spec.load.open_loop else None
        self._t0 = 0
        # where each stage starts and ends on the run's clock (offsets from t0); an open
        # loop's are planned, a closed loop's begin with its first tracked send
        self._stage_bounds: list[int] = []
        if spec.load.stages:
            self.stats.stage_sends = [0] * len(spec.load.stages)
            if spec.load.open_loop:
                self._stage_bounds = StagedSchedule(spec.load, spec.warmup).bounds_ns

    # -- control -----------------------------------------------------------------

    def stop(self, reason: StopReason) -> None:
        """Stop issuing; requests in flight are still awaited and delivered."""
        if not self.stop_reason:
            self.stop_reason = reason
        self._stopping.set()
        self._pacer.cancel()
        self._end_closed_loop()

    def end_drain(self) -> None:
        """Stop waiting for requests in flight: they are recorded as incomplete now (or,
        called before the drain has begun, as soon as it begins)."""
        self._drain_ended = True
        if self._abort_drain is not None and not self._abort_drain.done():
            self._abort_drain.set_result(None)

    def _end_closed_loop(self, error: BaseException | None = None) -> None:
        over = self._closed_loop_over
        if over is not None and not over.done():
            if error is None:
                over.set_result(None)
            else:
                over.set_exception(error)

    # -- one request -------------------------------------------------------------

    def _new_record(self, item: PlannedRequest, sample: Sample, t_sched: int) -> RequestRecord:
        """The record of a request about to be issued, counted as issued."""
        record = RequestRecord(
            index=item.sample_index,
            t_sched=t_sched,
            category=sample.category,
            tracked=item.tracked,
            input_requested=sample.input_tokens,
            output_requested=sample.max_tokens,
            stage=item.stage,
        )
        if item.tracked:
            now = time.monotonic_ns()
            self.stats.note(t_sched, now)
            if self._stage_bounds:
                self._count_stage_send(now)
        self._issued += 1
        collect_if_due(self._issued)
        self.delivery.issued(record, item.position)
        return record

    def _count_stage_send(self, now: int) -> None:
        """Count a tracked send in the stage whose window (on the clock) it happened in."""
        k = bisect.bisect_right(self._stage_bounds, now - self._t0) - 1
        sends = self.stats.stage_sends
        if 0 <= k < len(sends):
            sends[k] += 1

    def _launch(
        self,
        http: StreamClient,
        endpoint: Endpoint,
        item: PlannedRequest,
        sample: Sample,
        t_sched: int,
    ) -> asyncio.Task[RequestRecord]:
        """Open loop: the request runs in a task of its own (many overlap)."""
        record = self._new_record(item, sample, t_sched)
        if self._gate is None:
            coro = send_request(http, endpoint, sample, record, cancel=item.cancel)
        else:
            coro = self._send_capped(self._gate, http, endpoint, sample, record, item.cancel)
        task = asyncio.create_task(coro)
        self._inflight[task] = record
        task.add_done_callback(self._finished)
        return task

    @staticmethod
    async def _send_capped(
        gate: SlotGate,
        http: StreamClient,
        endpoint: Endpoint,
        sample: Sample,
        record: RequestRecord,
        cancel: CancelAt | None,
    ) -> RequestRecord:
        """Wait for a slot under ``max_concurrency`` (the wait is ``queue_wait``), then send."""
        if gate.try_acquire():
            record.queue_wait_ns = 0
        else:
            queued = time.monotonic_ns()
            await gate.acquire()
            record.queue_wait_ns = time.monotonic_ns() - queued
        try:
            return await send_request(http, endpoint, sample, record, cancel=cancel)
        finally:
            gate.release()

    def _finished(self, task: asyncio.Task[RequestRecord]) -> None:
        record = self._inflight.pop(task)
        if task.cancelled():
            return  # recorded by drain() as incomplete
        exc = task.exception()
        if exc is not None:
            record.fail(ErrorKind.CLIENT, f"{type(exc).__name__}: {exc}", now=time.monotonic_ns())
        self.delivery.deliver(record)

    # -- issuing -----------------------------------------------------------------

    async def issue_open_loop(
        self, http: StreamClient, endpoint: Endpoint, plan: Iterator[PlannedRequest], t0: int
    ) -> None:
        """Send each planned request at ``t0 + offset``, each in a task of its own."""
        if self._sessions is not None:
            await issue_session_open_loop(self, http, endpoint, plan, t0, self._sessions)
            return
        self._t0 = t0
        workload = self.spec.workload
        pacer = self._pacer
        behind = 0
        for item in plan:
            if self._stopping.is_set():
                break
            assert item.offset_ns is not None
            planned = t0 + item.offset_ns
            sample = workload.sample(item.sample_index)  # prepared before the wait
            behind = await pacer.due(planned, behind)
            if behind < 0:
                break
            self._launch(http, endpoint, item, sample, planned)

    async def issue_closed_loop(
        self,
        http: StreamClient,
        endpoint: Endpoint,
        plan: Iterator[PlannedRequest],
        concurrency: int,
        t0: int,
        stage_concurrency: Sequence[int] | None = None,
    ) -> None:
        """Keep ``concurrency`` requests in flight: each slot sends its next as one ends.

        A slot awaits its requests inline (no task per request: that was 5% of
        the client's CPU at max throughput). While a request is in flight its
        record is in ``_inflight`` under the slot's task, so a stop leaves it
        to the drain, and past the drain's cap it is cancelled and recorded
        as incomplete. With stages (``stage_concurrency``: this process's
        slots per stage) slot ``j`` sends only while the current stage has
        more than ``j`` slots; the stages' clock starts at the first tracked
        send and the run ends with the last stage (the clock is
        :class:`~pytest_llmperf.loadgen.closed_loop.ClosedLoop`).
        """
        if self._sessions is not None:
            await issue_session_closed_loop(
                self, http, endpoint, plan, concurrency, t0, stage_concurrency, self._sessions
            )
            return
        loop = ClosedLoop(self, t0, concurrency, stage_concurrency)
        workload = self.spec.workload

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
                record = self._new_record(item, sample, now)
                await loop.send(http, endpoint, sample, record, stage, item.cancel)

        await loop.run(slot)

    # -- the end -----------------------------------------------------------------

    async def drain(self, cap_s: float) -> None:
        """Wait up to ``cap_s`` for tracked requests in flight; record the rest as incomplete.

        Warm-up requests are not waited for (the performance phase began
        while they were in flight); cut ones are not delivered.
        """
        pending = [t for t, r in self._inflight.items() if r.tracked]
        if pending and not self._drain_ended:
            self._abort_drain = asyncio.get_running_loop().create_future()
            all_done = asyncio.ensure_future(asyncio.wait(pending))
            await asyncio.wait(
                (all_done, self._abort_drain), timeout=cap_s, return_when=asyncio.FIRST_COMPLETED
            )
            all_done.cancel()
            if not self._abort_drain.done():
                self._abort_drain.cancel()
        leftovers = list(self._inflight.items())
        for task, _ in leftovers:
            task.cancel()
        if leftovers:
            await asyncio.wait([t for t, _ in leftovers])
        now = time.monotonic_ns()
        for _, record in leftovers:
            if record.tracked:
                record.fail(ErrorKind.INCOMPLETE, "still in flight when the run ended", now=now)
                self.delivery.deliver(record)
            else:
                self.delivery.discard(record)
