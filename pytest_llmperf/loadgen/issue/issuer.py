"""Issuing one process's share of the plan, on the pattern's clock, and draining at the end.

Open-loop sends are paced against absolute planned times (``t0 +
offset_i``), never "previous send + delay", so the schedule cannot drift; a
send that happens late still counts its latency from its planned time
(:mod:`~pytest_llmperf.loadgen.issue.pacing` wakes up early and finishes on the
monotonic clock, because asyncio's timers are only millisecond-accurate). Each
request's bytes are built before its planned instant, while it is still far off
(:mod:`~pytest_llmperf.loadgen.issue.prepared`), and written at it, by the
issuing coroutine itself when a kept-alive connection is idle.
Closed-loop slots (``concurrency``, ``max-throughput``) issue the next
request as soon as their previous one ends.

An open loop under ``max_concurrency`` sends each request at its planned
time only if a slot is free; otherwise it waits in arrival order
(:mod:`~pytest_llmperf.loadgen.issue.concurrency_cap`), the wait is its
``queue_wait``, and its latency still counts from the plan. A staged
closed loop keeps each stage's concurrency in flight: slot ``j`` works
while the current stage has more than ``j`` slots and rests otherwise.

A workload that runs multi-turn conversations (``conversation`` with
``sessions=True``, a trace with ``session_id`` rows) is issued by
:mod:`~pytest_llmperf.loadgen.issue.conversations` instead. Every strategy
(open loop here, the closed loop's clock, conversation turns) works over one
public :class:`~pytest_llmperf.loadgen.issue.book.IssueBook`; the plan's
``share`` says which requests and conversations are this process's.

Stopping: when the plan runs out, after a closed loop's ``duration``, or on
:meth:`Issuer.stop`. Every issued request ends in exactly one record: the
drain waits for tracked requests up to a cap, and any still in flight then
are recorded as ``incomplete_at_cap`` failures rather than dropped from the
tail. Records go to a :class:`~pytest_llmperf.loadgen.issue.delivery.Delivery`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.records import ErrorKind
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.issue.book import IssueBook
from pytest_llmperf.loadgen.issue.closed_loop import ClosedLoop
from pytest_llmperf.loadgen.issue.conversations import (
    issue_conversations_closed_loop,
    issue_conversations_open_loop,
)
from pytest_llmperf.loadgen.issue.delivery import Delivery
from pytest_llmperf.loadgen.issue.drain import DRAIN_GRACE_S, INTERRUPT_DRAIN_S
from pytest_llmperf.loadgen.issue.prepared import PreparedRequests
from pytest_llmperf.loadgen.issue.stats import IssueStats
from pytest_llmperf.loadgen.plan.planner import PlannedRequest, RunPlan
from pytest_llmperf.results.run_result import StopReason

__all__ = ["DRAIN_GRACE_S", "INTERRUPT_DRAIN_S", "IssueStats", "Issuer"]


class Issuer:
    """Sends planned requests and drains them; :meth:`stop` ends issuing early.

    Its state is :attr:`book` (public: the strategies share it).
    ``stop_reason`` says why issuing ended (first reason wins): ``stop()``,
    ``SIGINT``, ``cancelled``, ``duration`` (a closed loop's clock ran out),
    or None while nothing stopped it.
    """

    def __init__(self, plan: RunPlan, delivery: Delivery, stats: IssueStats) -> None:
        self.plan = plan
        self.book = IssueBook(plan, delivery, stats)
        self._abort_drain: asyncio.Future[None] | None = None
        self._drain_ended = False  # end_drain() came: the drain waits for nothing

    @property
    def stop_reason(self) -> StopReason | None:
        return self.book.stop_reason

    @stop_reason.setter
    def stop_reason(self, reason: StopReason | None) -> None:
        self.book.stop_reason = reason

    # -- control -----------------------------------------------------------------

    def stop(self, reason: StopReason) -> None:
        """Stop issuing; requests in flight are still awaited and delivered."""
        self.book.stop(reason)

    def end_drain(self) -> None:
        """Stop waiting for requests in flight: they are recorded as incomplete now (or,
        called before the drain has begun, as soon as it begins)."""
        self._drain_ended = True
        if self._abort_drain is not None and not self._abort_drain.done():
            self._abort_drain.set_result(None)

    # -- issuing -----------------------------------------------------------------

    async def issue_open_loop(
        self, http: StreamClient, endpoint: Endpoint, plan: Iterator[PlannedRequest], t0: int
    ) -> None:
        """Send each planned request at ``t0 + offset``, each in a task of its own."""
        book = self.book
        if self.plan.conversations is not None:
            await issue_conversations_open_loop(
                book, http, endpoint, plan, t0, self.plan.conversations
            )
            return
        book.t0 = t0
        pacer = book.pacer
        stopping = book.stopping
        ready = PreparedRequests(plan, t0, self.plan.workload, http, endpoint)
        behind = 0
        while (request := ready.next()) is not None:  # built before its wait, with its bytes
            if stopping.is_set():
                break
            behind = await pacer.due(request.planned, behind)
            if behind < 0:
                break
            record = book.new_record(request.item, request.sample, request.planned)
            book.launch(http, endpoint, request.sample, record, request.item.cancel, request.data)

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
        record is in the book's ``inflight`` under the slot's task, so a stop leaves
        it to the drain, and past the drain's cap it is cancelled and recorded
        as incomplete. With stages (``stage_concurrency``: this process's
        slots per stage) slot ``j`` sends only while the current stage has
        more than ``j`` slots; the stages' clock starts at the first tracked
        send and the run ends with the last stage (the clock is
        :class:`~pytest_llmperf.loadgen.issue.closed_loop.ClosedLoop`).
        """
        book = self.book
        loop = ClosedLoop(book, t0, concurrency, stage_concurrency)
        if self.plan.conversations is not None:
            await issue_conversations_closed_loop(book, loop, http, endpoint, plan)
            return
        workload = self.plan.workload

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

    # -- the end -----------------------------------------------------------------

    async def drain(self, cap_s: float) -> None:
        """Wait up to ``cap_s`` for tracked requests in flight; record the rest as incomplete.

        Warm-up requests are not waited for (the performance phase began
        while they were in flight); cut ones are not delivered.
        """
        inflight = self.book.inflight
        delivery = self.book.delivery
        pending = [t for t, r in inflight.items() if r.tracked]
        if pending and not self._drain_ended:
            self._abort_drain = asyncio.get_running_loop().create_future()
            all_done = asyncio.ensure_future(asyncio.wait(pending))
            await asyncio.wait(
                (all_done, self._abort_drain), timeout=cap_s, return_when=asyncio.FIRST_COMPLETED
            )
            all_done.cancel()
            if not self._abort_drain.done():
                self._abort_drain.cancel()
        # A task launched in this turn has not run yet, and one cancelled before its first
        # step never runs its cleanup (its request may be written already: start_request).
        await asyncio.sleep(0)
        leftovers = list(inflight.items())
        for task, _ in leftovers:
            task.cancel()
        if leftovers:
            await asyncio.wait([t for t, _ in leftovers])
        now = time.monotonic_ns()
        kind, why = ErrorKind.INCOMPLETE, "still in flight when the run ended"
        if self.book.stop_reason is StopReason.SERVER_EXITED:  # its connection went with it
            kind, why = ErrorKind.CONNECT, "connection lost: the server exited"
        for task, record in leftovers:
            if inflight.pop(task, None) is None:
                continue  # it ended as it was cancelled, and was delivered then
            if record.tracked:
                record.fail(kind, why, now=now)
                delivery.deliver(record)
            else:
                delivery.discard(record)
