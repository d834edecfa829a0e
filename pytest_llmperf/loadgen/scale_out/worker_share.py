"""One worker's share of a run, wherever the worker lives: a local process or a Ray actor.

Both kinds of ``--llm-workers`` do the same three things, and this is the one
copy of them: build the worker's :class:`~pytest_llmperf.loadgen.issue.local.ShareRun`
from the parent's payload (the spec's arguments and the worker's
:class:`~pytest_llmperf.loadgen.plan.planner.ScheduleShare`, a value the parent's
planner made: the planner builds the plan of that share here, and its workload loads
before the clock starts), run it from the common ``t0``, and hand back the state the
parent merges (the accumulator's lossless ``to_state()``, the issue statistics and
the stop reason). Only the transport differs: pipes for a process
(:mod:`~pytest_llmperf.loadgen.scale_out.worker_process`), actor method calls for Ray
(:mod:`~pytest_llmperf.loadgen.scale_out.ray_workers`).

:meth:`ShareRunner.stop` and :meth:`ShareRunner.abort` may be called from any
thread, before, during or after the run: the control arrives on the transport's
own thread while the run's event loop is busy issuing.

``shift_ns`` (Ray actors on another host): the worker's timestamps are on its
own monotonic clock; adding ``shift_ns`` puts the state's absolute instants
(the measurement window, first and last sends, event-log rows) on the parent's
clock, so a merge across machines compares like with like. Durations
(every histogram) need no shift.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_llmperf.client.models import resolve_model
from pytest_llmperf.loadgen.issue.local import ShareRun
from pytest_llmperf.loadgen.plan.planner import RunPlan
from pytest_llmperf.loadgen.scale_out.messages import WorkerMessage
from pytest_llmperf.results.run_result import StopReason

__all__ = ["ShareRunner", "shift_state"]


class ShareRunner:
    """Builds one worker's run from ``payload``; :meth:`run` runs it and returns its state."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload
        plan = RunPlan.for_worker(payload["spec"], payload["share"])  # its share's plan
        self.share_run = ShareRun(  # whose book holds the plan from here on
            payload["endpoint"],
            plan,
            request_limits_ms=payload["request_limits_ms"],
            label=payload["label"],
        )
        plan.workload.sample(0)  # corpora and datasets load before anyone says "go"
        # The run's own full collection (gc_pauses) comes after t0: leave it no garbage,
        # and time it, so a parent can leave that much before t0 (in a Ray worker's large
        # heap on a busy host it took 0.1-0.3 s, which would all have been schedule lag).
        started = time.perf_counter()
        gc.collect()
        self.collect_s = time.perf_counter() - started
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._early: list[WorkerMessage] = []  # stop/abort that came before the loop ran
        self._finished = False

    def run(self, t0_ns: int, shift_ns: int = 0) -> dict[str, Any]:
        """Run this worker's share from ``t0_ns`` (this machine's monotonic clock)."""
        return asyncio.run(self.execute(t0_ns, shift_ns))

    async def execute(self, t0_ns: int, shift_ns: int = 0) -> dict[str, Any]:
        """:meth:`run` on the running event loop (a Ray actor's own)."""
        p = self.payload
        run = self.share_run
        with self._lock:
            self._loop = asyncio.get_running_loop()
            early, self._early = self._early, []
        for what in early:
            self._apply(what)
        try:
            await self._issue(run, p["events_path"], t0_ns)
        finally:
            with self._lock:
                self._finished = True
                self._loop = None
        state = {
            "accumulator": run.accumulator.to_state(),
            "stats": run.stats.to_state(),
            "stop_reason": str(run.book.stop_reason or StopReason.COMPLETED),
        }
        if shift_ns:
            shift_state(state, shift_ns)
            if p["events_path"] and Path(p["events_path"]).exists():
                _shift_event_log(Path(p["events_path"]), shift_ns)
        return state

    @staticmethod
    async def _issue(run: ShareRun, events_path: str | None, t0_ns: int) -> None:
        """Issue the share; raises ``CancelledError`` when the task was cancelled."""
        run.endpoint = await resolve_model(run.endpoint)
        started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        cpu0 = time.process_time()
        wall0 = time.monotonic_ns()
        events = Path(events_path) if events_path is not None else None
        interrupted = await run.issue(events, lambda: run.event_log_meta(started_at), t0_ns)
        run.stats.cpu_s += time.process_time() - cpu0
        run.stats.wall_s = (time.monotonic_ns() - wall0) / 1e9
        run.book.settle(StopReason.CANCELLED if interrupted else StopReason.COMPLETED)
        if interrupted:
            raise asyncio.CancelledError

    def stop(self) -> None:
        """Stop issuing; the worker drains and still returns its state."""
        self._control(WorkerMessage.STOP)

    def abort(self) -> None:
        """Stop issuing and end the drain: requests still in flight are recorded incomplete."""
        self._control(WorkerMessage.ABORT)

    def progress(self) -> tuple[int, int]:
        """``(tracked requests issued, tracked records delivered)`` so far (any thread)."""
        return self.share_run.stats.tracked_issued, self.share_run.accumulator.issued

    def _control(self, what: WorkerMessage) -> None:
        with self._lock:
            if self._finished:
                return
            if self._loop is None:
                self._early.append(what)
                return
            loop = self._loop
        with contextlib.suppress(RuntimeError):  # the loop closed in between: nothing to stop
            loop.call_soon_threadsafe(self._apply, what)

    def _apply(self, what: WorkerMessage) -> None:
        if what == WorkerMessage.STOP:
            self.share_run.stop(StopReason.STOPPED)
        else:  # as a run's two Ctrl-C: stop issuing, and end the drain once it has begun
            self.share_run.stop(StopReason.SIGINT)
            self.share_run.end_drain()


def shift_state(state: dict[str, Any], shift_ns: int) -> None:
    """Move a worker state's absolute instants by ``shift_ns`` (onto the parent's clock)."""
    stats = state["stats"]
    if stats.get("tracked_issued"):
        for key in ("first_send_ns", "last_send_ns", "first_planned_ns", "last_planned_ns"):
            stats[key] += shift_ns
    _shift_window(state["accumulator"], shift_ns)


def _shift_window(acc: dict[str, Any], shift_ns: int) -> None:
    start, end = acc.get("window_ns", [None, None])
    if start is not None and end is not None:
        acc["window_ns"] = [start + shift_ns, end + shift_ns]
    for part in (*acc.get("stages", {}).values(), *acc.get("turns", {}).values()):
        _shift_window(part, shift_ns)


def _shift_event_log(path: Path, shift_ns: int) -> None:
    db = sqlite3.connect(path)
    try:
        db.execute(
            "UPDATE events SET t_ns = t_ns + ?, ref_ns = ref_ns + ? ",
            (shift_ns, shift_ns),
        )
        db.commit()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
