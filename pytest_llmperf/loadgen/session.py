"""One load-generator run: the orchestrator of planning, issuing, delivery and self-check.

Phases: the ``warmup`` requests go first (same pattern, not tracked, and not
drained: the performance phase starts while they are still in flight, so
it begins at the target load); then the performance phase (tracked, and
drained at the end).

:class:`LoadRun` owns one run's lifecycle and delegates each job:

- the plan (which request, which sample, when; a worker's share):
  :mod:`~pytest_llmperf.loadgen.plan`;
- issuing on the pattern's clock and the drain: :mod:`~pytest_llmperf.loadgen.issue`;
- where records go (metrics, event log, observers): :mod:`~pytest_llmperf.loadgen.delivery`;
- was the generator the bottleneck: :mod:`~pytest_llmperf.loadgen.self_check`;
- with ``workers > 1`` (or ``ray``: Ray actors, :mod:`~pytest_llmperf.loadgen.ray_workers`),
  the same plan split across processes and merged
  exactly: :mod:`~pytest_llmperf.loadgen.workers` (each worker process runs
  a ``LoadRun`` of its share, :mod:`~pytest_llmperf.loadgen.worker_process`).

Stopping: after ``requests`` requests, after ``duration`` seconds of the
performance phase, on :meth:`LoadRun.stop`, or on SIGINT / :meth:`LoadRun.interrupt`
(first: stop issuing and drain; second: stop draining). Every issued request
ends in exactly one record: the drain waits for tracked requests up to the
per-request total timeout plus a grace period, and any still in flight at
that hard cap are recorded as ``incomplete_at_cap`` failures rather than
dropped from the tail.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.models import resolve_model
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.delivery import Delivery, RecordObserver
from pytest_llmperf.loadgen.event_files import events_file_for
from pytest_llmperf.loadgen.gc_pauses import full_collections_deferred
from pytest_llmperf.loadgen.issue import DRAIN_GRACE_S, INTERRUPT_DRAIN_S, Issuer, IssueStats
from pytest_llmperf.loadgen.plan import (
    ScheduleShare,
    plan_requests,
    sample_order_for,
    warm_connections,
)
from pytest_llmperf.loadgen.ray_workers import RayCluster, RayWorkerPool
from pytest_llmperf.loadgen.result import RunResult, StopReason
from pytest_llmperf.loadgen.self_check import generator_self_check
from pytest_llmperf.loadgen.workers import WorkerPool
from pytest_llmperf.metrics.accumulator import MetricsAccumulator
from pytest_llmperf.metrics.recorder import EventRecorder
from pytest_llmperf.specs.run import RunSpec

__all__ = ["LoadRun", "run_load"]

# Reasons that leave a run interrupted: it did not issue everything it planned.
_INTERRUPTING = (
    StopReason.STOPPED,
    StopReason.SIGINT,
    StopReason.CANCELLED,
    StopReason.WORKER_LOST,
)


class LoadRun:
    """The state of one run; :meth:`stop` ends issuing early (the run still drains).

    ``events_dir``: keep this run's event log there (one SQLite file per
    run; ``RunResult.events_path`` says which). ``workers``: issue from that
    many processes (``--llm-workers``).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        spec: RunSpec,
        *,
        request_limits_ms: dict[str, float] | None = None,
        observers: Iterable[RecordObserver] = (),
        label: str = "",
        events_dir: str | Path | None = None,
        events_path: str | Path | None = None,
        workers: int = 1,
        share: ScheduleShare | None = None,
        handle_sigint: bool = True,
        ray: RayCluster | None = None,
    ) -> None:
        # the test's llm_workload(extra_body=...) rides on every request of this run
        self.endpoint = endpoint.with_fields(endpoint.fields.with_extra(spec.extra_body))
        self.spec = spec
        self.label = label
        self.request_limits_ms = dict(request_limits_ms or {})
        self.accumulator = MetricsAccumulator(request_limits_ms=request_limits_ms)
        self.delivery = Delivery(self.accumulator, observers, closed_loop=not spec.load.open_loop)
        self.events_dir = Path(events_dir) if events_dir is not None else None
        self.events_path = Path(events_path) if events_path is not None else None
        self.workers = max(1, int(workers))
        self.share = share or ScheduleShare()
        self.handle_sigint = handle_sigint
        self.ray = ray  # --llm-workers=ray:N: the session's Ray cluster issues the run
        self.stats = IssueStats()
        self.issuer = Issuer(spec, self.delivery, self.stats)
        self._sigints = 0
        self._worker_pool: WorkerPool | RayWorkerPool | None = None

    @property
    def stop_reason(self) -> StopReason | None:
        """Why issuing ended: ``completed``, ``duration``, ``stop()``, ``SIGINT``, ``cancelled``."""
        return self.issuer.stop_reason

    @stop_reason.setter
    def stop_reason(self, reason: StopReason | None) -> None:
        self.issuer.stop_reason = reason

    # -- live counts (read by loadgen.progress on a timer, never per request) -----

    @property
    def issues_here(self) -> bool:
        """True when this process issues the requests, so its counters are live."""
        return self.workers <= 1 and self._worker_pool is None and self.ray is None

    @property
    def issued_requests(self) -> int:
        """Requests issued so far in this process, warm-up included."""
        return self.issuer._issued

    @property
    def in_flight(self) -> int:
        """Requests issued and not yet finished in this process (warm-up included)."""
        return len(self.issuer._inflight)

    # -- control -----------------------------------------------------------------

    def stop(self, reason: StopReason = StopReason.STOPPED) -> None:
        """Stop issuing; requests in flight are still awaited and reported."""
        self.issuer.stop(reason)
        if self._worker_pool is not None:
            self._worker_pool.stop()

    def interrupt(self) -> None:
        """What Ctrl-C does: the first call stops issuing and drains, the next end the drain.

        Safe to call from the event loop only (from a signal handler or
        another thread, through ``loop.call_soon_threadsafe``).
        """
        self._sigints += 1
        if self._sigints == 1:
            self.stop(StopReason.SIGINT)
        elif self._worker_pool is not None:
            self._worker_pool.abort()
        else:
            self.issuer.end_drain()

    def abort(self) -> None:
        """Two Ctrl-C at once: stop issuing, and stop draining once the drain has begun."""
        self.interrupt()
        self.interrupt()

    # -- description -------------------------------------------------------------

    def describe_workload(self) -> dict[str, Any]:
        out = self.spec.describe_workload()
        if self.issuer._sessions is None:
            out["sample_order"] = sample_order_for(self.spec).describe()
        else:  # turns follow their sessions, not a sample order (docs/sessions.md)
            out["sample_order"] = {"mode": "sessions"}
        return out

    def event_log_meta(self, started_at: str) -> dict[str, Any]:
        """The run's description stored in its event log (``meta`` table)."""
        return {
            "label": self.label,
            "started_at": started_at,
            "load": self.spec.load.describe(),
            "workload": self.describe_workload(),
            "endpoint": self.endpoint.describe(),
            "request_limits_ms": self.request_limits_ms,
            "share": {"index": self.share.index, "count": self.share.count},
            "clock": "time.monotonic_ns (CLOCK_MONOTONIC), nanoseconds",
        }

    def _events_file(self) -> Path | None:
        if self.events_path is not None:
            return self.events_path
        if self.events_dir is None:
            return None
        return events_file_for(self.events_dir, self.label or "run")

    # -- the run -----------------------------------------------------------------

    async def execute(self) -> RunResult:
        endpoint = await resolve_model(self.endpoint)
        self.endpoint = endpoint
        started = datetime.now(UTC)
        started_at = started.isoformat(timespec="milliseconds")
        events_file = self._events_file()
        restore_sigint = self._install_sigint()
        cpu0 = time.process_time()
        wall0 = time.monotonic_ns()
        interrupted = False
        try:
            if self.ray is not None:
                self._worker_pool = RayWorkerPool(self, self.ray, events_file, started_at)
                await self._worker_pool.run()
            elif self.workers > 1:
                self._worker_pool = WorkerPool(self, events_file, started_at)
                await self._worker_pool.run()
            else:
                recorder = None
                if events_file is not None:
                    recorder = EventRecorder(events_file, meta=self.event_log_meta(started_at))
                    self.delivery.recorder = recorder
                try:
                    with full_collections_deferred():
                        interrupted = await self._run_here()
                finally:
                    if recorder is not None:
                        recorder.set_meta({"summary": self.accumulator.summary()})
                        await asyncio.get_running_loop().run_in_executor(None, recorder.close)
        finally:
            restore_sigint()
        wall_s = (time.monotonic_ns() - wall0) / 1e9
        self.stats.cpu_s += time.process_time() - cpu0
        self.stats.wall_s = wall_s
        if not self.stop_reason:
            self.stop_reason = StopReason.CANCELLED if interrupted else StopReason.COMPLETED
        result = RunResult(
            workload=self.describe_workload(),
            load=self.spec.load.describe(),
            endpoint=endpoint.describe(),
            accumulator=self.accumulator,
            started_at=started_at,
            duration_s=wall_s,
            interrupted=interrupted or self.stop_reason in _INTERRUPTING,
            label=self.label,
        )
        result.stop_reason = self.stop_reason
        result.stage_plan = self.spec.load.stages
        result.stage_sends = list(self.stats.stage_sends)
        result.events_path = str(events_file) if events_file is not None else None
        result.self_check = generator_self_check(
            self.accumulator,
            self.stats,
            self.spec.load,
            workers=self.workers,
            wall_s=wall_s,
            stop_reason=self.stop_reason,
            worker_reports=self._worker_pool.reports if self._worker_pool else (),
        )
        if interrupted:
            raise asyncio.CancelledError
        return result

    async def _run_here(self) -> bool:
        """Issue and drain in this process; True when the task was cancelled."""
        spec = self.spec
        load = spec.load
        concurrency = self.share.concurrency or load.slots or 0
        levels = self.share.stage_concurrency
        if levels is None and load.stages and not load.open_loop:
            levels = tuple(st.concurrency or 1 for st in load.stages)
        interrupted = False
        # Open loop: no pool cap below the descriptor budget (a wait for a connection
        # would count against the server's TTFT); a max_concurrency cap needs no more.
        pool = max(64, concurrency) if concurrency else load.max_concurrency
        async with StreamClient(self.endpoint, max_connections=pool) as http:
            try:
                spec.workload.sample(0)  # loads corpora and datasets before the clock starts
                await http.open_connections(warm_connections(spec, concurrency))
                t0 = self.share.t0_ns or time.monotonic_ns()
                plan = plan_requests(spec, self.share)
                self.issuer.share = self.share  # multi-turn sessions: which are this process's
                if spec.load.open_loop:
                    await self.issuer.issue_open_loop(http, self.endpoint, plan, t0)
                else:
                    await self.issuer.issue_closed_loop(
                        http, self.endpoint, plan, concurrency, t0, levels
                    )
            except asyncio.CancelledError:
                interrupted = True
                self.stop(StopReason.CANCELLED)
            finally:
                await self.issuer.drain(self._drain_cap_s())
        return interrupted

    def _drain_cap_s(self) -> float:
        """How long the drain may wait: a request's total timeout plus grace, or briefly
        when someone is waiting (Ctrl-C, cancellation)."""
        cap = self.endpoint.timeouts.total + DRAIN_GRACE_S
        if self.stop_reason in (StopReason.SIGINT, StopReason.CANCELLED):
            cap = min(cap, INTERRUPT_DRAIN_S)
        return cap

    def _install_sigint(self) -> Callable[[], None]:
        """First Ctrl-C: stop issuing and drain; second: stop draining."""
        if not self.handle_sigint or threading.current_thread() is not threading.main_thread():
            return lambda: None
        loop = asyncio.get_running_loop()
        previous = signal.getsignal(signal.SIGINT)

        def handler(signum: int, frame: object) -> None:
            loop.call_soon_threadsafe(self.interrupt)

        try:
            signal.signal(signal.SIGINT, handler)
        except (ValueError, OSError):  # pragma: no cover - not the main interpreter
            return lambda: None

        def restore() -> None:
            signal.signal(signal.SIGINT, previous)

        return restore


async def run_load(
    endpoint: Endpoint,
    spec: RunSpec,
    *,
    request_limits_ms: dict[str, float] | None = None,
    observers: Iterable[RecordObserver] = (),
    label: str = "",
    events_dir: str | Path | None = None,
    workers: int = 1,
) -> RunResult:
    """Run ``spec`` against ``endpoint`` and return its result (library entry point)."""
    run = LoadRun(
        endpoint,
        spec,
        request_limits_ms=request_limits_ms,
        observers=observers,
        label=label,
        events_dir=events_dir,
        workers=workers,
    )
    return await run.execute()
