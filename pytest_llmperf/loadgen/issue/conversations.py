"""Issuing multi-turn conversations: each turn after the previous one's reply and a think time.

A workload that runs conversations
(:func:`~pytest_llmperf.workloads.conversations.conversations_of`: ``conversation``
with ``conversations=True``, a trace whose rows carry ``conversation_id``) is
issued here instead of by the plain loops: its plan's strategy
(:class:`~pytest_llmperf.loadgen.plan.strategy.IssueStrategy`, chosen once when
the plan is built) names one of these three functions. They work over the
share's public bookkeeping
(:class:`~pytest_llmperf.loadgen.issue.book.IssueBook`: records, delivery, the
drain, the concurrency gate). What a conversation sends is the workload's business
(:class:`~pytest_llmperf.workloads.conversations.ConversationScript`); *when* is decided
here (docs/conversations.md):

- **open loop** (``poisson``, ``constant``, stages and ramps): the pattern's
  arrivals are turns. At each planned arrival the turn of the conversation that
  has been ready the longest (its previous reply received and its think time
  over) is sent; if none is ready, a new conversation starts. The rate stays the
  pattern's and conversations interleave; latency counts from the arrival.
- **trace** (``llm_load("trace")`` with ``conversation_id`` rows): a conversation's
  turn goes at max(its trace time, previous turn's end + think time), and that is
  its planned time; rows of no conversation go at their trace time.
- **closed loop** (``concurrency``, ``max-throughput``): each slot runs one
  conversation at a time: turn, reply, think time (the slot idles: concurrency
  counts users), next turn; when the conversation ends the slot starts another.

A conversation ends after its last turn, or at a turn that failed or was
cancelled (later turns would quote a reply that never came). Warm-up
requests are whole turns, untracked; ``requests`` and ``duration`` count
turns. With ``--llm-workers`` each process owns the conversations ``c`` with
``c % count == index`` (a trace: its units, see
:class:`~pytest_llmperf.workloads.conversations.TraceConversations`); open and closed
loops still split the plan's positions (arrivals, request budget) as
:mod:`~pytest_llmperf.loadgen.plan.planner` does.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.issue.closed_loop import ClosedLoop
from pytest_llmperf.loadgen.issue.live import ConversationBook, LiveConversation
from pytest_llmperf.workloads.conversations import ConversationSource

if TYPE_CHECKING:  # handed in: the book (and in it the plan) it issues over
    from pytest_llmperf.loadgen.issue.book import IssueBook
    from pytest_llmperf.loadgen.plan.planner import PlannedRequest

__all__ = [
    "ConversationBook",
    "LiveConversation",
    "issue_conversations_closed_loop",
    "issue_conversations_open_loop",
    "issue_conversations_trace",
]


def _launch_turn(
    book: IssueBook,
    http: StreamClient,
    endpoint: Endpoint,
    item: PlannedRequest,
    live: LiveConversation,
    t_sched: int,
    on_end: Callable[[LiveConversation, RequestRecord, asyncio.Task[RequestRecord]], None],
) -> None:
    """Open loop: send ``live``'s next turn in a task of its own (as the plain open loop does)."""
    sample = ConversationBook.sample(live, endpoint)
    record = book.new_record(item, sample, t_sched)
    ConversationBook.mark(record, live, sample)
    task = book.launch(http, endpoint, sample, record, item.cancel)  # delivers (fails a bug)
    task.add_done_callback(lambda t: on_end(live, record, t))


# -- open loop -----------------------------------------------------------------------------


async def issue_conversations_open_loop(
    book: IssueBook, http: StreamClient, endpoint: Endpoint, t0: int
) -> None:
    """Open loop of conversations: the pattern's arrivals are turns."""
    book.t0 = t0
    conversations = ConversationBook(_source(book), book.plan.share)
    await _arrivals_open_loop(book, http, endpoint, book.plan.planned(), t0, conversations)


async def issue_conversations_trace(
    book: IssueBook, http: StreamClient, endpoint: Endpoint, t0: int
) -> None:
    """A trace of conversations: each turn at its row's time, after its previous reply."""
    book.t0 = t0
    conversations = ConversationBook(_source(book), book.plan.share)
    await _timed_open_loop(book, http, endpoint, t0, conversations)


def _source(book: IssueBook) -> ConversationSource:
    """The plan's conversations (its strategy is one of this module's: it has some)."""
    source = book.plan.conversations
    assert source is not None
    return source


async def _arrivals_open_loop(
    book: IssueBook,
    http: StreamClient,
    endpoint: Endpoint,
    plan: Iterator[PlannedRequest],
    t0: int,
    conversations: ConversationBook,
) -> None:
    """Each arrival sends the turn of the conversation ready the longest, else a new one's."""
    ready: list[tuple[int, int, LiveConversation]] = []  # (ready_at, tie-break, live): a heap
    order = itertools.count()

    def turn_ended(
        live: LiveConversation, record: RequestRecord, task: asyncio.Task[RequestRecord]
    ) -> None:
        if ConversationBook.ended(live, record, task.cancelled()):
            heapq.heappush(ready, (live.ready_at, next(order), live))

    pacer = book.pacer
    stopping = book.stopping
    behind = 0
    for item in plan:
        if stopping.is_set():
            break
        assert item.offset_ns is not None
        planned = t0 + item.offset_ns
        behind = await pacer.due(planned, behind)
        if behind < 0:
            break
        if ready and ready[0][0] <= time.monotonic_ns():
            live = heapq.heappop(ready)[2]
        else:
            live = conversations.start()
        _launch_turn(book, http, endpoint, item, live, planned, turn_ended)


async def _timed_open_loop(
    book: IssueBook,
    http: StreamClient,
    endpoint: Endpoint,
    t0: int,
    conversations: ConversationBook,
) -> None:
    """A trace: each row falls due at its time; a conversation's turn goes when it is due
    *and* the conversation is ready (previous turn ended, think time over), at the later.

    Every process walks the whole plan and keeps the rows of its own units; once
    the plan is walked, issuing ends when every kept row has been sent (or
    dropped: its conversation ended at a failed turn).
    """
    source = conversations.source
    share = book.plan.share
    count = max(1, share.count)
    stopping = book.stopping
    pacer = book.pacer
    lives: dict[int, LiveConversation] = {}
    timers: set[asyncio.Future[None]] = set()  # turns waiting for their time (kept referenced)
    queued = 0  # rows due but not yet sent
    all_sent = asyncio.Event()
    all_sent.set()

    def drop(live: LiveConversation) -> None:
        nonlocal queued
        queued -= len(live.queue)
        live.queue.clear()
        if not queued:
            all_sent.set()

    def send_next(live: LiveConversation) -> None:
        """The queue's head goes now, or a task waits for its time."""
        nonlocal queued
        item, planned = live.queue[0]
        due = max(planned, live.ready_at)
        if due > time.monotonic_ns():
            live.waiting = True
            timer = asyncio.ensure_future(send_later(live, due))
            timers.add(timer)
            timer.add_done_callback(timers.discard)
            return
        live.queue.popleft()
        queued -= 1
        if not queued:
            all_sent.set()
        live.waiting = True
        _launch_turn(book, http, endpoint, item, live, due, turn_ended)

    async def send_later(live: LiveConversation, due: int) -> None:
        if await pacer.wait_until(due):
            live.waiting = False
            send_next(live)
        else:
            drop(live)

    def turn_ended(
        live: LiveConversation, record: RequestRecord, task: asyncio.Task[RequestRecord]
    ) -> None:
        live.waiting = False
        if ConversationBook.ended(live, record, task.cancelled()):
            if live.queue and not stopping.is_set():
                send_next(live)
        else:
            drop(live)

    behind = 0
    for item in book.plan.whole_run().planned():
        if stopping.is_set():
            break
        unit, _ = source.place(item.sample_index)
        if unit % count != share.index:
            continue
        assert item.offset_ns is not None
        planned = t0 + item.offset_ns
        behind = await pacer.due(planned, behind)
        if behind < 0:
            break
        live = lives.get(unit)
        if live is None:
            live = lives[unit] = LiveConversation(source.conversation(unit))
        if live.over:
            continue  # its conversation ended at a failed turn: the row is not sent
        live.queue.append((item, planned))
        queued += 1
        all_sent.clear()
        if not live.waiting:
            send_next(live)
        if live.script.turns == 1:
            del lives[unit]
    if queued and not stopping.is_set():
        stop = asyncio.ensure_future(stopping.wait())
        sent = asyncio.ensure_future(all_sent.wait())
        await asyncio.wait((stop, sent), return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        sent.cancel()


# -- closed loop ---------------------------------------------------------------------------


async def issue_conversations_closed_loop(
    book: IssueBook, http: StreamClient, endpoint: Endpoint, t0: int
) -> None:
    """Each slot runs one conversation at a time: turn, reply, think time (idle), next turn.

    The stages, warm-up and ``duration`` rules are those of the plain closed loop
    (:func:`~pytest_llmperf.loadgen.issue.closed_loop.issue_closed_loop`, whose clock
    ``loop`` is); a slot that is thinking holds no request of the plan, and
    ``duration`` ends its wait.
    """
    loop = ClosedLoop(book, t0)
    plan = book.plan.planned()
    source = _source(book)
    conversations = ConversationBook(source, book.plan.share)
    deadline = loop.deadline
    pacer = book.pacer

    async def slot(j: int) -> None:
        live: LiveConversation | None = None
        while (stage := await loop.admit(j)) is not None:
            now = time.monotonic_ns()
            if live is not None and live.ready_at > now:  # thinking: the slot idles
                if deadline and now >= deadline[0]:
                    loop.over()
                    return
                # paced as a send is (the think time ends on time), cut by a stop
                await pacer.wait_until(
                    min(live.ready_at, int(deadline[0])) if deadline else live.ready_at
                )
                continue
            item = next(plan, None)
            if item is None:
                return
            stage = loop.start_or_check_duration(item, now, stage)
            if stage is None:
                return
            if live is None:
                live = conversations.start()
            sample = ConversationBook.sample(live, endpoint)
            record = book.new_record(item, sample, now)
            ConversationBook.mark(record, live, sample)
            await loop.send(http, endpoint, sample, record, stage, item.cancel)
            if not ConversationBook.ended(live, record):
                live = None

    await loop.run(slot)
