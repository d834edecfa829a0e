"""Where a run's requests are issued: in this process, in worker processes, or in Ray actors.

The one place that chooses (``--llm-workers=N``, ``ray:N``); the run
(:class:`~pytest_llmperf.loadgen.run.LoadRun`) knows no pools, only this, and
this knows no run: it is handed the run's
:class:`~pytest_llmperf.loadgen.issue.local.ShareRun` (the whole plan, the
accumulator and statistics the run reports, and in its book the stop reason) and
works on that. :class:`Dispatcher` forwards the run's controls to whichever
issues: a stop (issuing ends, the requests in flight are drained) and a second
Ctrl-C (the drain ends: the pool's workers abort, or this process's drain stops
waiting).

- in this process: the share run itself (its whole plan);
- worker processes: :class:`~pytest_llmperf.loadgen.scale_out.workers.WorkerPool`
  (each runs :mod:`~pytest_llmperf.loadgen.scale_out.worker_process`);
- Ray actors: :class:`~pytest_llmperf.loadgen.scale_out.ray_workers.RayWorkerPool` (each
  actor loads :mod:`~pytest_llmperf.loadgen.scale_out.ray_actor` by name, in its own process).

Either pool merges its workers' states into the share run's accumulator, issue
statistics and stop reason; the run then judges and reports it as one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_llmperf.loadgen.scale_out.ray_workers import RayCluster, RayWorkerPool
from pytest_llmperf.loadgen.scale_out.workers import WorkerPool
from pytest_llmperf.loadgen.self_check import WorkerReport
from pytest_llmperf.results.run_result import StopReason

if TYPE_CHECKING:  # the run hands in its share run: issued here when there is no pool
    from pytest_llmperf.loadgen.issue.local import ShareRun

__all__ = ["Dispatcher"]


class Dispatcher:
    """Issues ``share`` here, from ``workers`` processes, or from ``ray``'s actors."""

    def __init__(self, share: ShareRun, workers: int = 1, ray: RayCluster | None = None) -> None:
        self.share = share
        self.requested = max(1, int(workers))
        self.ray = ray
        self.pool: WorkerPool | RayWorkerPool | None = None

    @property
    def workers(self) -> int:
        """Workers asked for (``--llm-workers``); under Ray, the actors that ran once placed
        (``ray:auto`` settles its own count, a closed loop has no more than its slots)."""
        pool = self.pool
        if isinstance(pool, RayWorkerPool) and pool.count:
            return pool.count
        return self.requested

    @property
    def issues_here(self) -> bool:
        """True when this process issues the requests, so its counters are live."""
        return self.requested <= 1 and self.pool is None and self.ray is None

    @property
    def reports(self) -> Sequence[WorkerReport]:
        """Per-worker details (Ray actors); none when issued here."""
        return self.pool.reports if self.pool is not None else ()

    async def issue(self, events_file: Path | None, started_at: str) -> bool:
        """Issue the run wherever it goes; True when this process's issuing was cancelled."""
        share = self.share
        if self.ray is not None:
            self.pool = RayWorkerPool(share, self.ray, self.requested, events_file, started_at)
        elif self.requested > 1:
            self.pool = WorkerPool(share, self.requested, events_file, started_at)
        else:
            return await share.issue(events_file, lambda: share.event_log_meta(started_at))
        await self.pool.run()
        return False

    def stop(self, reason: StopReason) -> None:
        """Stop issuing (here and in every worker); requests in flight still drain."""
        self.share.stop(reason)
        if self.pool is not None:
            self.pool.stop()

    def end_drain(self) -> None:
        """Stop draining: the workers abort, or this process stops waiting."""
        if self.pool is not None:
            self.pool.abort()
        else:
            self.share.end_drain()
