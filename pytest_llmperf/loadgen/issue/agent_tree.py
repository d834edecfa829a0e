"""Running agentic conversation trees: threads, their waits, subagents and joins, each call.

:class:`AgentRun` is one process's agentic conversations (the strategies that start
them are :mod:`~pytest_llmperf.loadgen.issue.agents`). A conversation is a tree of
threads (:class:`~pytest_llmperf.workloads.agent_script.AgentScript`); each thread is
a coroutine that follows the timing rules of
:mod:`pytest_llmperf.workloads.agent_script` (docs/agentic.md, "When each call goes"):

- turn ``k + 1`` is due at ``end(k) + think_ns(k + 1)``, ``end(k)`` being the later of
  turn ``k``'s last byte and the end of every *joined* subagent launched after it;
- the subagents of ``spawns(k)`` start at ``end of turn k + offset_ns``, each a thread
  of its own, concurrently; background ones (``joined`` False) are waited for by
  nobody but the conversation, which ends when every thread has;
- recorded waits and offsets are multiplied by the trace's ``time_scale`` (1 outside
  a trace load);
- every wait ends on :meth:`~pytest_llmperf.loadgen.issue.pacing.Pacer.wait_until`,
  the one waiting primitive (a tool wait is paced as precisely as an open-loop send),
  and the call's ``t_sched`` is the instant it was due: latency counts from there;
- a call that failed, was cancelled (``cancel=``) or was cut ends its thread; the
  root's ends the conversation (its other threads send nothing more), a subagent's
  ends that subagent and its parent resumes at the join.

Each call is sent in a task of its own (:meth:`IssueBook.launch`: the drain sees it)
and awaited through a shield, so a tree that is cut short (a stop) never cuts a call in
flight: the drain waits for it. Its record carries ``conversation`` (the run-wide
number), ``agent`` (the thread's path), ``turn`` (its index in the thread) and
``think_ns`` (the wait held before it: a tool wait, or a subagent's launch offset).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.issue.call_budget import CallBudget
from pytest_llmperf.loadgen.issue.live import (
    ConversationBook,
    LiveConversation,
    pinned,
    route_token,
)
from pytest_llmperf.workloads.agent_script import AgentScript, AgentSource
from pytest_llmperf.workloads.base import Sample

if TYPE_CHECKING:  # handed in: the book it issues over, the plan's calls
    from pytest_llmperf.loadgen.issue.book import IssueBook
    from pytest_llmperf.loadgen.plan.planner import PlannedRequest

__all__ = ["AgentRun", "RunClock", "Tree"]


class RunClock(Protocol):
    """When an agentic run ends, as its strategy keeps time (a closed loop's duration and
    stages, an open loop's or a trace's window)."""

    def admit(self, item: PlannedRequest, due_ns: int, stage: int) -> int | None:
        """A tracked call due at ``due_ns`` of a tree started in ``stage``: the stage it
        goes in, or None when the run's end is reached (it is not sent)."""
        ...

    def end_ns(self) -> int | None:
        """The instant no call goes after (None: none known yet)."""
        ...

    def reached(self) -> None:
        """A call fell due past :meth:`end_ns`: the run's end is reached (say why)."""
        ...


class _Unbounded:
    """No end but the budget's: a call goes in the stage it was placed in."""

    def admit(self, item: PlannedRequest, due_ns: int, stage: int) -> int | None:
        return item.stage

    def end_ns(self) -> int | None:
        return None

    def reached(self) -> None:
        return None


class Tree:
    """One conversation in progress: its run-wide number and id, whether it is over (its
    root's call failed, or the run's calls are spent), the router's last token, the load
    stage it started in and its background subagents still running."""

    __slots__ = ("background", "conversation_id", "number", "over", "stage", "token")

    def __init__(self, number: int, conversation_id: str, stage: int = -1) -> None:
        self.number = number
        self.conversation_id = conversation_id
        self.over = False
        self.token = ""
        self.stage = stage
        self.background: set[asyncio.Task[int]] = set()


class AgentRun:
    """This process's agent trees over ``book``: :meth:`start` one as a task, or await
    :meth:`tree`; :meth:`wait` for the started ones.

    ``clock`` (:attr:`clock`, settable until the first call) checks each call against the
    run's end; ``count_stages``: count tracked calls in the stage it names (a closed
    loop's stage sends, which the book does not count on its own clock).
    """

    def __init__(
        self,
        book: IssueBook,
        http: StreamClient,
        endpoint: Endpoint,
        *,
        clock: RunClock | None = None,
        count_stages: bool = False,
    ) -> None:
        plan = book.plan
        assert plan.agents is not None  # its strategy is an agentic one
        self.book = book
        self.http = http
        self.endpoint = endpoint
        self.source: AgentSource = plan.agents
        self.scale = plan.load.trace.time_scale if plan.load.trace is not None else 1.0
        self.budget = CallBudget(plan)
        self.clock: RunClock = clock or _Unbounded()
        self.count_stages = count_stages
        self.trees: set[asyncio.Task[None]] = set()
        self.error: BaseException | None = None

    @property
    def over(self) -> bool:
        """No call goes any more: the budget is spent, the run stopping or failed."""
        return self.budget.spent or self.book.stopping.is_set()

    def scaled(self, ns: int) -> int:
        return round(ns * self.scale) if self.scale != 1.0 else ns

    # -- trees -------------------------------------------------------------------

    def start(self, number: int, due_ns: int, stage: int = -1) -> None:
        """Conversation ``number``'s tree, its first call due at ``due_ns``, in a task."""
        self.start_task(self.tree(number, due_ns, stage))

    def start_task(self, coro: Coroutine[Any, Any, None]) -> None:
        """A coroutine the run waits for as it waits for its trees (:meth:`wait`)."""
        task = asyncio.ensure_future(coro)
        self.trees.add(task)
        task.add_done_callback(self._tree_ended)

    def _tree_ended(self, task: asyncio.Task[None]) -> None:
        self.trees.discard(task)
        if not task.cancelled() and task.exception() is not None and self.error is None:
            self.error = task.exception()  # a workload that failed to build a call: a bug
            self.book.stopping.set()
            self.book.pacer.cancel()

    async def wait(self) -> None:
        """Until every started tree has ended, or the run stops (then the trees are cut:
        their calls in flight are left to the drain); raises a tree's error."""
        stop = asyncio.ensure_future(self.book.stopping.wait())
        try:
            while self.trees and not stop.done():
                await asyncio.wait({*self.trees, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        left = tuple(self.trees)
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left)
        if self.error is not None:
            raise self.error

    async def tree(self, number: int, due_ns: int, stage: int = -1) -> None:
        """Run conversation ``number`` from its root's first call (due at ``due_ns``) until
        every thread of it has ended."""
        script = self.source.conversation(number)
        tree = Tree(number, script.conversation_id, stage)
        try:
            await self.thread(tree, script, due_ns, 0)
            while tree.background:  # the conversation ends with its last subagent
                await asyncio.gather(*tuple(tree.background))
        finally:
            for task in tuple(tree.background):  # cut short: theirs too
                task.cancel()
        # every call of it has ended and been delivered (a call's record is delivered by
        # the book's done-callback, before its thread resumes): fold its figures now
        self.book.delivery.conversation_ended(number)

    async def thread(self, tree: Tree, script: AgentScript, due_ns: int, wait_ns: int) -> int:
        """One thread from its first turn, due at ``due_ns`` after a wait of ``wait_ns``.
        Returns its end: its last turn's, or its joined subagents' after it."""
        live = LiveConversation(script, script.first_turn)
        pacer = self.book.pacer
        end = due_ns
        while live.next < script.turns:
            if tree.over or self.budget.spent:
                return end
            # built before the wait (a long prompt takes a while), sent when it ends
            sample = script.turn(live.next, live.results)
            until = self.clock.end_ns()  # a wait past the run's end ends there (the call won't go)
            if not await pacer.wait_until(min(due_ns, until or due_ns)) or tree.over:
                return end
            if until is not None and due_ns >= until:
                self.end_reached(tree)
                return end
            record = await self.call(tree, script, live, sample, due_ns, wait_ns)
            if record is None:
                return end
            k = live.next
            more = ConversationBook.note(live, record)
            end = record.t_end or time.monotonic_ns()
            tree.token = route_token(record, tree.token)
            if ConversationBook.failed(record):
                tree.over = tree.over or not script.agent_id  # the root's: the whole tree
                return end
            end = max(end, await self.launch_subagents(tree, script, k, end))
            if not more:
                return end
            wait_ns = self.scaled(script.think_ns(live.next))
            due_ns = end + wait_ns
        return end

    async def launch_subagents(self, tree: Tree, script: AgentScript, k: int, end: int) -> int:
        """Start the subagents turn ``k`` spawns; return when its joined ones have ended,
        with the latest end among them (``end`` if none)."""
        joined: list[asyncio.Task[int]] = []
        for sub in script.spawns(k):
            offset = self.scaled(sub.offset_ns)
            task = asyncio.ensure_future(self.thread(tree, sub.script, end + offset, offset))
            if sub.joined:
                joined.append(task)
            else:
                tree.background.add(task)
                task.add_done_callback(tree.background.discard)
        if not joined:
            return end
        try:
            return max(end, *await asyncio.gather(*joined))
        finally:
            for task in joined:  # the parent cut short: its subagents too
                task.cancel()

    def end_reached(self, tree: Tree) -> None:
        """The run's end (its clock's) is reached: no call goes any more, in any tree, and
        no wait need go on (the pacer is done: every thread ends at once)."""
        self.budget.spent = True
        tree.over = True
        self.clock.reached()
        self.book.pacer.cancel()

    # -- one call ------------------------------------------------------------------

    async def call(
        self,
        tree: Tree,
        script: AgentScript,
        live: LiveConversation,
        sample: Sample,
        due_ns: int,
        wait_ns: int,
    ) -> RequestRecord | None:
        """Send ``sample``, turn ``live.next`` of ``script``'s thread (``live``), due at
        ``due_ns``; its record once it ended (None: the run's calls are spent or its end is
        reached)."""
        budget = self.budget
        item = budget.take(tree.stage)
        if budget.spent:  # no call after this one (if any): the waits end now
            self.book.pacer.cancel()
        if item is not None and item.tracked:
            stage = self.clock.admit(item, due_ns, tree.stage)
            if stage is None:
                self.end_reached(tree)
                return None
            plan = self.book.plan
            offset = due_ns - self.book.t0 if plan.open_loop else None  # (steady windows)
            item = plan.placed(item.position, True, stage, item.cancel, offset)
        if item is None:
            tree.over = True
            return None
        sample = pinned(sample, self.endpoint, tree.conversation_id, script.agent_id, tree.token)
        book = self.book
        record = book.new_record(item, sample, due_ns)
        ConversationBook.mark(record, live, sample)
        record.conversation = tree.number
        record.agent = script.agent_id
        record.think_ns = wait_ns
        if self.count_stages and item.tracked and item.stage >= 0:
            book.stats.stage_sends[item.stage] += 1
        task = book.launch(self.http, self.endpoint, sample, record, item.cancel)
        return await asyncio.shield(task)  # a tree cut short leaves its call to the drain

    async def warm_up(self, numbers: list[int], in_flight: int) -> None:
        """Each conversation's mid-start warm-up request (``warmup_sample()``), untracked,
        ``in_flight`` at a time, until all have ended (or the run stops)."""
        if not numbers:
            return
        gate = asyncio.Semaphore(max(1, in_flight))
        book = self.book

        async def one(number: int) -> None:
            async with gate:
                script = self.source.conversation(number)
                sample = script.warmup_sample()
                if sample is None or book.stopping.is_set():
                    return
                sample = pinned(sample, self.endpoint, script.conversation_id)
                record = book.new_record(self.budget.untracked(), sample, time.monotonic_ns())
                record.index = sample.index
                record.conversation = number
                task = book.launch(self.http, self.endpoint, sample, record, None)
                await asyncio.shield(task)

        for number in numbers:
            self.start_task(one(number))
        await self.wait()
