"""One process's issuing state, public: the owner of its plan and its stop reason.

The open loop (:mod:`~pytest_llmperf.loadgen.issue.open_loop`), the closed
loop (:mod:`~pytest_llmperf.loadgen.issue.closed_loop`) and the conversation
loops (:mod:`~pytest_llmperf.loadgen.issue.conversations`) are strategies over
one :class:`IssueBook`: the plan, the records and their delivery, the in-flight
map the drain reads, the concurrency gate, the pacer, the stop signal and the
stage clock. It sits below all of them, so none reaches into another's private
state.

It is the one holder of the plan this process issues and of why issuing
ended: the share run (:mod:`~pytest_llmperf.loadgen.issue.local`), the run, the
worker pools and the progress line read ``book.plan`` and ``book.stop_reason``;
the reason is set here only (:meth:`IssueBook.stop`, :meth:`IssueBook.settle`).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any

from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import send_request, start_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.issue.concurrency_cap import SlotGate
from pytest_llmperf.loadgen.issue.delivery import Delivery
from pytest_llmperf.loadgen.issue.gc_pauses import collect_if_due
from pytest_llmperf.loadgen.issue.pacing import Pacer
from pytest_llmperf.loadgen.issue.stats import IssueStats
from pytest_llmperf.results.run_result import StopReason
from pytest_llmperf.specs.load import PacingMode
from pytest_llmperf.workloads.base import Sample

if TYPE_CHECKING:  # the book is handed a plan; it never builds one
    from pytest_llmperf.loadgen.issue.steady_gate import SteadyGate
    from pytest_llmperf.loadgen.plan.planner import PlannedRequest, RunPlan

__all__ = ["IssueBook", "IssueStats"]


class IssueBook:
    """One process's issuing state: shared by the strategies, read by the run and the drain.

    ``plan``: what this process issues (its share of the run, as a value: never
    patched). ``stop_reason`` says why issuing ended (first reason wins):
    ``stop()``, ``SIGINT``, ``cancelled``, ``duration`` (a closed loop's clock
    ran out), a worker's merged reason, or None while nothing stopped it; read it
    anywhere, set it with :meth:`stop` or :meth:`settle`.
    """

    def __init__(self, plan: RunPlan, delivery: Delivery, stats: IssueStats) -> None:
        self.plan = plan
        self.delivery = delivery
        self.stats = stats
        self.stop_reason: StopReason | None = None
        self.stopping = asyncio.Event()
        self.pacer = Pacer(precise=plan.load.pacing is PacingMode.PRECISE)
        self.inflight: dict[asyncio.Task[Any], RequestRecord] = {}
        self.issued = 0  # requests issued in this process, warm-up included
        self.closed_loop_over: asyncio.Future[None] | None = None
        cap = plan.load.max_concurrency
        self.gate = SlotGate(cap) if cap and plan.load.open_loop else None
        self.t0 = 0
        # where each stage starts and ends on the run's clock (offsets from t0); an open
        # loop's are planned, a closed loop's begin with its first tracked send
        self.stage_bounds: list[int] = []
        # llm_load(steady=...): opens the run's steady-state window (set by the share run)
        self.steady_gate: SteadyGate | None = None
        if plan.load.stages:
            self.stats.stage_sends = [0] * len(plan.load.stages)
            self.stage_bounds = plan.stage_bounds_ns

    # -- control -----------------------------------------------------------------

    def settle(self, reason: StopReason, *, overrule: bool = False) -> None:
        """Say why issuing ended, unless a reason is said already (``overrule``: even then:
        a server that exited, a worker lost); signals nothing (:meth:`stop` does)."""
        if overrule or not self.stop_reason:
            self.stop_reason = reason

    def stop(self, reason: StopReason) -> None:
        """Stop issuing; requests in flight are still awaited and delivered."""
        self.settle(reason)
        self.stopping.set()
        self.pacer.cancel()
        self.end_closed_loop()

    def end_closed_loop(self, error: BaseException | None = None) -> None:
        over = self.closed_loop_over
        if over is not None and not over.done():
            if error is None:
                over.set_result(None)
            else:
                over.set_exception(error)

    # -- one request -------------------------------------------------------------

    def new_record(self, item: PlannedRequest, sample: Sample, t_sched: int) -> RequestRecord:
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
            if self.stage_bounds:
                self._count_stage_send(now)
            gate = self.steady_gate
            if gate is not None and gate.pending:
                gate.note(t_sched, item.offset_ns, len(self.inflight))
        self.issued += 1
        collect_if_due(self.issued)
        self.delivery.issued(record, item.position)
        return record

    def _count_stage_send(self, now: int) -> None:
        """Count a tracked send in the stage whose window (on the clock) it happened in."""
        k = bisect.bisect_right(self.stage_bounds, now - self.t0) - 1
        sends = self.stats.stage_sends
        if 0 <= k < len(sends):
            sends[k] += 1

    def launch(
        self,
        http: StreamClient,
        endpoint: Endpoint,
        sample: Sample,
        record: RequestRecord,
        cancel: CancelAt | None,
        data: bytes | None = None,
    ) -> asyncio.Task[RequestRecord]:
        """Open loop: send now and read the response in a task of its own (many overlap).

        The request is written here, in the caller's step, when a connection is idle
        and (under ``max_concurrency``) a slot is free: not a loop turn later, when
        its task would first run (:func:`~pytest_llmperf.client.request.start_request`).
        ``data``: its bytes, built before its planned instant.
        """
        gate = self.gate
        coro: Coroutine[Any, Any, RequestRecord]
        if gate is not None and not gate.try_acquire():
            coro = self.send_queued(gate, http, endpoint, sample, record, cancel)
        else:
            if gate is not None:
                record.queue_wait_ns = 0
            try:
                coro = start_request(http, endpoint, sample, record, cancel=cancel, data=data)
            except Exception as exc:  # a client bug: this request fails, the run goes on
                record.fail(
                    ErrorKind.CLIENT, f"{type(exc).__name__}: {exc}", now=time.monotonic_ns()
                )
                coro = _as_is(record)
            if gate is not None:
                coro = _releasing(gate, coro)
        task = asyncio.create_task(coro)
        self.inflight[task] = record
        task.add_done_callback(self.finished)
        return task

    @staticmethod
    async def send_queued(
        gate: SlotGate,
        http: StreamClient,
        endpoint: Endpoint,
        sample: Sample,
        record: RequestRecord,
        cancel: CancelAt | None,
    ) -> RequestRecord:
        """Wait for a slot under ``max_concurrency`` (the wait is ``queue_wait``), then send."""
        queued = time.monotonic_ns()
        await gate.acquire()
        record.queue_wait_ns = time.monotonic_ns() - queued
        try:
            return await send_request(http, endpoint, sample, record, cancel=cancel)
        finally:
            gate.release()

    def finished(self, task: asyncio.Task[RequestRecord]) -> None:
        if task.cancelled():
            return  # left in flight: the drain records it as incomplete
        record = self.inflight.pop(task)
        exc = task.exception()
        if exc is not None:
            record.fail(ErrorKind.CLIENT, f"{type(exc).__name__}: {exc}", now=time.monotonic_ns())
        self.delivery.deliver(record)


async def _releasing(gate: SlotGate, sending: Awaitable[RequestRecord]) -> RequestRecord:
    """``sending``, then its ``max_concurrency`` slot freed."""
    try:
        return await sending
    finally:
        gate.release()


async def _as_is(record: RequestRecord) -> RequestRecord:
    return record
