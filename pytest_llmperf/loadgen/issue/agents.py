"""Issuing agentic conversation trees: when each conversation starts, and when the run ends.

A workload with an ``agent_source``
(:func:`~pytest_llmperf.workloads.agent_script.agents_of`: the ``weka``, ``agentic``
and ``otel`` trace formats, the synthetic ``agentic`` workload) is issued here; its
plan's strategy (:class:`~pytest_llmperf.loadgen.plan.strategy.IssueStrategy`, chosen
once) names one of these three functions. How a tree's calls follow each other (waits,
subagents, joins, failures) is :class:`~pytest_llmperf.loadgen.issue.agent_tree.AgentRun`'s;
*which* trees run and when they start is decided here (docs/agentic.md, "When each call
goes"):

- **trace** (``llm_load("trace", format="weka"|"agentic"|"otel")``): conversation ``i``
  starts at ``source.start_ns(i, time_scale)`` after the clock's start, every one of
  the source's ``count`` conversations (``conversations=N``) once;
- **open loop** (``poisson``, ``constant``, stages and ramps): each arrival of the
  pattern starts a new conversation (arrival ``j``: conversation ``j``), however many
  are running; the pattern's rate is of conversations, not calls;
- **closed loop** (``concurrency``, ``max-throughput``): each slot runs one tree at a
  time and starts the next when every thread of it has ended; its subagents run in
  the same slot (session-tree slot accounting: ``concurrency=2`` is two agents'
  conversations, however many calls they have in flight).

``requests=`` and ``duration=`` count calls
(:class:`~pytest_llmperf.loadgen.issue.call_budget.CallBudget`): once the count is
reached, or a call falls due past the run's end, no call is sent any more and the trees
end (their calls in flight drain); the run's first ``warmup=`` calls are untracked.
``start="mid"``: before the clock, every conversation this process will start (of the
source's first ``count``) sends its ``warmup_sample()``, untracked, at most
:data:`MID_WARMUP_IN_FLIGHT` at once; the clock (a trace's times, an open loop's
arrivals, a closed loop's ``duration``) starts once they have all ended. With
``--llm-workers`` each process owns the conversations ``c`` with ``c % count == index``
(a trace's, an open loop's arrivals) or starts them in that order (a closed loop's
slots), and gets its part of ``requests`` and ``warmup``.
"""

from __future__ import annotations

import bisect
import itertools
import time
from typing import TYPE_CHECKING

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.issue.agent_tree import AgentRun
from pytest_llmperf.loadgen.issue.closed_loop import ClosedLoop

if TYPE_CHECKING:  # handed in: the book (and in it the plan) it issues over
    from pytest_llmperf.loadgen.issue.book import IssueBook
    from pytest_llmperf.loadgen.plan.planner import PlannedRequest, RunPlan, ScheduleShare

__all__ = [
    "MID_WARMUP_IN_FLIGHT",
    "issue_agents_closed_loop",
    "issue_agents_open_loop",
    "issue_agents_trace",
]

MID_WARMUP_IN_FLIGHT = 16  # mid-start warm-up requests in flight at once, per process


def _owned(share: ScheduleShare, count: int) -> list[int]:
    """The conversations among the source's first ``count`` that ``share`` runs."""
    return list(range(share.index, count, max(1, share.count)))


async def _clock_after_warm_up(run: AgentRun, numbers: list[int], t0: int) -> int:
    """Send the mid-start warm-ups of ``numbers``; the clock's start: ``t0``, or their end."""
    sent = run.budget.taken_untracked
    await run.warm_up(numbers, MID_WARMUP_IN_FLIGHT)
    return t0 if run.budget.taken_untracked == sent else max(t0, time.monotonic_ns())


class _Window:
    """An open loop's or a trace's end: ``duration`` after the clock's start, or its stages'
    end; a call goes in the stage its due instant falls in."""

    def __init__(self, plan: RunPlan, start_ns: int) -> None:
        self.start_ns = start_ns
        self.bounds = plan.stage_bounds_ns
        ends = []
        if plan.duration is not None:
            ends.append(start_ns + round(plan.duration * 1e9))
        if self.bounds:
            ends.append(start_ns + self.bounds[-1])
        self.end = min(ends) if ends else None

    def ended(self, at_ns: int) -> bool:
        return self.end is not None and at_ns >= self.end

    def admit(self, item: PlannedRequest, due_ns: int, stage: int) -> int | None:
        if self.ended(due_ns):
            return None
        if not self.bounds:
            return item.stage
        k = bisect.bisect_right(self.bounds, due_ns - self.start_ns) - 1
        return k if 0 <= k < len(self.bounds) - 1 else -1

    def end_ns(self) -> int | None:
        return self.end


class _ClosedClock:
    """A closed loop's end: its ``duration`` from the first tracked call, its stages."""

    def __init__(self, loop: ClosedLoop) -> None:
        self.loop = loop

    def admit(self, item: PlannedRequest, due_ns: int, stage: int) -> int | None:
        return self.loop.start_or_check_duration(item, due_ns, stage)

    def end_ns(self) -> int | None:
        deadline = self.loop.deadline
        return int(deadline[0]) if deadline else None


async def issue_agents_trace(
    book: IssueBook, http: StreamClient, endpoint: Endpoint, t0: int
) -> None:
    """A trace of agents: each conversation at its recorded start, once."""
    run = AgentRun(book, http, endpoint)
    source = run.source
    owned = sorted(
        _owned(book.plan.share, source.count), key=lambda i: source.start_ns(i, run.scale)
    )
    start = book.t0 = await _clock_after_warm_up(run, owned, t0)
    run.clock = window = _Window(book.plan, start)
    pacer = book.pacer
    behind = 0
    for i in owned:
        planned = start + source.start_ns(i, run.scale)
        if run.over or window.ended(planned):
            break
        behind = await pacer.due(planned, behind)
        if behind < 0:
            break
        run.start(i, planned)
    await run.wait()


async def issue_agents_open_loop(
    book: IssueBook, http: StreamClient, endpoint: Endpoint, t0: int
) -> None:
    """An open loop of agents: each of this process's arrivals starts a conversation."""
    plan = book.plan
    share = plan.share
    step = max(1, share.count)
    run = AgentRun(book, http, endpoint)
    start = book.t0 = await _clock_after_warm_up(run, _owned(share, run.source.count), t0)
    run.clock = window = _Window(plan, start)
    pacer = book.pacer
    behind = 0
    for j, (offset, stage) in enumerate(plan.offsets()):
        if run.over:
            break
        if j % step != share.index:
            continue
        planned = start + offset
        if window.ended(planned):
            break
        behind = await pacer.due(planned, behind)
        if behind < 0:
            break
        run.start(j, planned, stage)
    await run.wait()


async def issue_agents_closed_loop(
    book: IssueBook, http: StreamClient, endpoint: Endpoint, t0: int
) -> None:
    """Each slot runs one conversation tree at a time (its subagents in the same slot)."""
    share = book.plan.share
    run = AgentRun(book, http, endpoint)
    start = await _clock_after_warm_up(run, _owned(share, run.source.count), t0)
    loop = ClosedLoop(book, start)
    run.clock = _ClosedClock(loop)
    run.count_stages = loop.staged
    numbers = itertools.count(share.index, max(1, share.count))

    async def slot(j: int) -> None:
        while (stage := await loop.admit(j)) is not None and not run.over:
            await run.tree(next(numbers), time.monotonic_ns(), stage)

    await loop.run(slot)
