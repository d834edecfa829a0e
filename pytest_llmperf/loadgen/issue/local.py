"""One process's share of a run, issued here: what a run does in-process and what each
worker does inside its process or Ray actor.

:class:`ShareRun` owns the share's accumulator, delivery, issue statistics and
:class:`~pytest_llmperf.loadgen.issue.issuer.Issuer`; :meth:`ShareRun.issue`
opens the connection pool, issues the plan (open or closed loop) from ``t0``
and drains, with the event log (``--llm-events``) and full collections
deferred for the duration. It knows nothing of workers: the run
(:mod:`~pytest_llmperf.loadgen.run`) reaches it through the dispatcher, a
worker (:mod:`~pytest_llmperf.loadgen.scale_out.worker_share`) directly.
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
from pytest_llmperf.loadgen.issue.delivery import Delivery, RecordObserver
from pytest_llmperf.loadgen.issue.drain import drain_cap_s
from pytest_llmperf.loadgen.issue.gc_pauses import (
    full_collections_deferred,
    young_collections_held,
)
from pytest_llmperf.loadgen.issue.issuer import Issuer
from pytest_llmperf.loadgen.issue.stats import IssueStats
from pytest_llmperf.loadgen.plan.planner import RunPlan
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.recorder import EventRecorder
from pytest_llmperf.results.run_result import StopReason

__all__ = ["ShareRun", "drain_cap_s"]


class ShareRun:
    """This process's share of ``plan`` against ``endpoint``: issue, drain, account."""

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
        self.plan = plan
        self.label = label
        self.request_limits_ms = dict(request_limits_ms or {})
        self.accumulator = MetricsAccumulator(request_limits_ms=request_limits_ms)
        self.delivery = Delivery(self.accumulator, observers, closed_loop=not plan.open_loop)
        self.stats = IssueStats()
        self.issuer = Issuer(plan, self.delivery, self.stats)

    def set_share(self, plan: RunPlan) -> None:
        """Issue ``plan`` (this plan for one share, e.g. a worker's with its ``t0``) instead."""
        self.plan = plan
        self.issuer.plan = plan
        self.issuer.book.plan = plan

    def event_log_meta(self, started_at: str) -> dict[str, Any]:
        """The run's description stored in its event log (``meta`` table)."""
        share = self.plan.share
        return {
            "label": self.label,
            "started_at": started_at,
            "load": self.plan.load.describe(),
            "workload": self.plan.describe_workload(),
            "endpoint": self.endpoint.describe(),
            "request_limits_ms": self.request_limits_ms,
            "share": {"index": share.index, "count": share.count},
            "clock": "time.monotonic_ns (CLOCK_MONOTONIC), nanoseconds",
        }

    @property
    def stop_reason(self) -> StopReason | None:
        return self.issuer.stop_reason

    @stop_reason.setter
    def stop_reason(self, reason: StopReason | None) -> None:
        self.issuer.stop_reason = reason

    def stop(self, reason: StopReason) -> None:
        self.issuer.stop(reason)

    def end_drain(self) -> None:
        self.issuer.end_drain()

    async def issue(self, events_file: Path | None, meta: Callable[[], dict[str, Any]]) -> bool:
        """Issue and drain in this process, recording events to ``events_file`` (with
        ``meta()``). True when the task was cancelled."""
        recorder = None
        if events_file is not None:
            recorder = EventRecorder(events_file, meta=meta())
            self.delivery.recorder = recorder
        try:
            with full_collections_deferred():
                return await self._issue_and_drain()
        finally:
            if recorder is not None:
                recorder.set_meta({"summary": self.accumulator.summary()})
                await asyncio.get_running_loop().run_in_executor(None, recorder.close)

    def _young_collections(self) -> contextlib.AbstractContextManager[None]:
        """Under ``pacing="precise"`` the pacer takes the young collections itself."""
        precise = self.issuer.book.pacer.collections is not None
        return young_collections_held() if precise else contextlib.nullcontext()

    async def _issue_and_drain(self) -> bool:
        plan = self.plan
        load = plan.load
        concurrency = plan.concurrency
        interrupted = False
        # Open loop: no pool cap below the descriptor budget (a wait for a connection
        # would count against the server's TTFT); a max_concurrency cap needs no more.
        pool = max(64, concurrency) if concurrency else load.max_concurrency
        async with StreamClient(self.endpoint, max_connections=pool, spares=load.open_loop) as http:
            try:
                plan.workload.sample(0)  # loads corpora and datasets before the clock starts
                await http.open_connections(plan.warm_connections(concurrency))
                t0 = plan.share.t0_ns or time.monotonic_ns()
                planned = plan.planned()
                with self._young_collections():  # (held while issuing, not in the drain)
                    if load.open_loop:
                        await self.issuer.issue_open_loop(http, self.endpoint, planned, t0)
                    else:
                        await self.issuer.issue_closed_loop(
                            http, self.endpoint, planned, concurrency, t0, plan.stage_levels
                        )
            except asyncio.CancelledError:
                interrupted = True
                self.stop(StopReason.CANCELLED)
            finally:
                await self.issuer.drain(drain_cap_s(self.endpoint, self.stop_reason))
                self.stats.spin_s += self.issuer.book.pacer.spun_ns / 1e9
        return interrupted
