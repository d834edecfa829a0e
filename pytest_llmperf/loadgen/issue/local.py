"""One process's share of a run, issued here: what a run does in-process and what each
worker does inside its process or Ray actor.

:class:`ShareRun` owns the share's accumulator, delivery, issue statistics, its
:class:`~pytest_llmperf.loadgen.issue.book.IssueBook` (the one holder of the
share's plan and stop reason) and the drain; :meth:`ShareRun.issue` opens the
connection pool, issues the plan from ``t0`` with the strategy its plan chose
(:data:`~pytest_llmperf.loadgen.issue.strategies.STRATEGIES`: open loop, closed
loop, conversations) and drains, with the event log (``--llm-events``) and full
collections deferred for the duration.

Stopping: when the plan runs out, after a closed loop's ``duration``, or on
:meth:`ShareRun.stop`. Every issued request ends in exactly one record: the
drain waits for tracked requests up to a cap, and any still in flight then
are recorded as ``incomplete_at_cap`` failures rather than dropped from the
tail (:mod:`~pytest_llmperf.loadgen.issue.drain`).

It knows nothing of workers: the run (:mod:`~pytest_llmperf.loadgen.run`) reaches
it through the dispatcher, a worker
(:mod:`~pytest_llmperf.loadgen.scale_out.worker_share`) directly, each with the
plan of its share (a value: a worker's is built by the planner for its share).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.issue.book import IssueBook
from pytest_llmperf.loadgen.issue.delivery import Delivery, RecordObserver
from pytest_llmperf.loadgen.issue.drain import Drain, drain_cap_s
from pytest_llmperf.loadgen.issue.gc_pauses import (
    full_collections_deferred,
    young_collections_held,
)
from pytest_llmperf.loadgen.issue.stats import IssueStats
from pytest_llmperf.loadgen.issue.steady_gate import SteadyGate, level_offset_ns
from pytest_llmperf.loadgen.issue.strategies import STRATEGIES
from pytest_llmperf.loadgen.plan.planner import RunPlan
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.recorder import EventRecorder
from pytest_llmperf.results.run_result import StopReason

__all__ = ["ShareRun", "drain_cap_s"]


class ShareRun:
    """This process's share of ``plan`` against ``endpoint``: issue, drain, account.

    ``book`` holds the plan and the stop reason (read them there); :meth:`stop` and
    :meth:`end_drain` are the controls.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        plan: RunPlan,
        *,
        request_limits_ms: dict[str, float] | None = None,
        observers: Iterable[RecordObserver] = (),
        label: str = "",
    ) -> None:
        self.endpoint = endpoint
        self.label = label
        self.request_limits_ms = dict(request_limits_ms or {})
        self.accumulator = MetricsAccumulator(request_limits_ms=request_limits_ms)
        self.delivery = Delivery(
            self.accumulator, observers, closed_loop=plan.strategy.latency_from_send
        )
        self.stats = IssueStats()
        self.book = IssueBook(plan, self.delivery, self.stats)
        self.drain = Drain(self.book)
        steady = plan.load.steady
        if steady is not None:  # the window this share's requests are judged in
            window = self.accumulator.declare_steady(steady.mode.value, latency=steady.latency)
            slots = 0 if plan.open_loop else max(plan.stage_levels or (plan.concurrency,))
            offset = level_offset_ns(plan.load, plan.stage_bounds_ns)
            self.book.steady_gate = SteadyGate(steady, window, slots=slots, level_offset_ns=offset)

    @property
    def plan(self) -> RunPlan:
        """The plan this share issues (held by its book)."""
        return self.book.plan

    def event_log_meta(self, started_at: str) -> dict[str, Any]:
        """The run's description stored in its event log (``meta`` table)."""
        plan = self.book.plan
        share = plan.share
        return {
            "label": self.label,
            "started_at": started_at,
            "load": plan.load.describe(),
            "workload": plan.describe_workload(),
            "endpoint": self.endpoint.describe(),
            "request_limits_ms": self.request_limits_ms,
            "share": {"index": share.index, "count": share.count},
            "clock": "time.monotonic_ns (CLOCK_MONOTONIC), nanoseconds",
        }

    def stop(self, reason: StopReason) -> None:
        """Stop issuing; requests in flight are still awaited and delivered."""
        self.book.stop(reason)

    def end_drain(self) -> None:
        """Stop waiting for requests in flight (now, or as soon as the drain begins)."""
        self.drain.end()

    async def issue(
        self,
        events_file: Path | None,
        meta: Callable[[], dict[str, Any]],
        t0_ns: int | None = None,
    ) -> bool:
        """Issue and drain in this process, recording events to ``events_file`` (with
        ``meta()``), from ``t0_ns`` (a worker's common start on the system-wide monotonic
        clock; None: once connected). True when the task was cancelled."""
        recorder = None
        if events_file is not None:
            recorder = EventRecorder(events_file, meta=meta())
            self.delivery.recorder = recorder
        try:
            with full_collections_deferred():
                return await self._issue_and_drain(t0_ns)
        finally:
            if recorder is not None:
                recorder.set_meta({"summary": self.accumulator.summary()})
                await asyncio.get_running_loop().run_in_executor(None, recorder.close)

    def _young_collections(self) -> contextlib.AbstractContextManager[None]:
        """Under ``pacing="precise"`` the pacer takes the young collections itself."""
        precise = self.book.pacer.collections is not None
        return young_collections_held() if precise else contextlib.nullcontext()

    async def _issue_and_drain(self, t0_ns: int | None) -> bool:
        book = self.book
        plan = book.plan
        load = plan.load
        concurrency = plan.concurrency
        strategy = STRATEGIES[plan.strategy]  # chosen when the plan was built
        interrupted = False
        # Open loop: no pool cap below the descriptor budget (a wait for a connection
        # would count against the server's TTFT); a max_concurrency cap needs no more.
        pool = max(64, concurrency) if concurrency else load.max_concurrency
        # a spare connection dialled ahead: an open loop's, and an agent tree's (whose
        # subagents' calls, in a closed loop too, go at planned instants)
        spares = load.open_loop or plan.strategy.agents
        async with StreamClient(self.endpoint, max_connections=pool, spares=spares) as http:
            try:
                plan.workload.sample(0)  # loads corpora and datasets before the clock starts
                await http.open_connections(plan.warm_connections())
                t0 = t0_ns or time.monotonic_ns()
                with self._young_collections():  # (held while issuing, not in the drain)
                    await strategy(book, http, self.endpoint, t0)
            except asyncio.CancelledError:
                interrupted = True
                self.stop(StopReason.CANCELLED)
            finally:
                await self.drain.wait(drain_cap_s(self.endpoint, book.stop_reason))
                self.stats.spin_s += book.pacer.spun_ns / 1e9
        return interrupted
