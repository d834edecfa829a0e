"""The open loop: each planned request sent at its planned instant, in a task of its own.

Open-loop sends are paced against absolute planned times (``t0 +
offset_i``), never "previous send + delay", so the schedule cannot drift; a
send that happens late still counts its latency from its planned time
(:mod:`~pytest_llmperf.loadgen.issue.pacing` wakes up early and finishes on the
monotonic clock, because asyncio's timers are only millisecond-accurate). Each
request's bytes are built before its planned instant, while it is still far off
(:mod:`~pytest_llmperf.loadgen.issue.prepared`), and written at it, by the
issuing coroutine itself when a kept-alive connection is idle.

An open loop under ``max_concurrency`` sends each request at its planned
time only if a slot is free; otherwise it waits in arrival order
(:mod:`~pytest_llmperf.loadgen.issue.concurrency_cap`, through the book's gate),
the wait is its ``queue_wait``, and its latency still counts from the plan.

One strategy over the :class:`~pytest_llmperf.loadgen.issue.book.IssueBook`
(:data:`~pytest_llmperf.loadgen.issue.strategies.STRATEGIES`); the plan chose it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.issue.prepared import PreparedRequests

if TYPE_CHECKING:  # handed in: the book it issues over
    from pytest_llmperf.loadgen.issue.book import IssueBook

__all__ = ["issue_open_loop"]


async def issue_open_loop(book: IssueBook, http: StreamClient, endpoint: Endpoint, t0: int) -> None:
    """Send each of the book's planned requests at ``t0 + offset``, each in a task of its own."""
    plan = book.plan
    book.t0 = t0
    pacer = book.pacer
    stopping = book.stopping
    ready = PreparedRequests(plan.planned(), t0, plan.workload, http, endpoint)
    behind = 0
    while (request := ready.next()) is not None:  # built before its wait, with its bytes
        if stopping.is_set():
            break
        behind = await pacer.due(request.planned, behind)
        if behind < 0:
            break
        record = book.new_record(request.item, request.sample, request.planned)
        book.launch(http, endpoint, request.sample, record, request.item.cancel, request.data)
