"""One load-generator run: issue requests on the pattern's clock, drain, report.

Open-loop sends are paced with ``loop.call_at`` against absolute planned
times (``t0 + offset_i``), never "previous send + delay", so the schedule
cannot drift; a send that happens late still counts its latency from its
planned time. Closed-loop workers issue the next request as soon as their
previous one ends. Every issued request ends in exactly one record: at the
end of the run the generator waits for all of them (bounded by the
per-request total timeout), and any still in flight at that hard cap are
recorded as ``incomplete_at_cap`` failures rather than dropped.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import httpx

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.models import resolve_model
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.loadgen.patterns import arrival_offsets_ns
from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.metrics.accumulator import MetricsAccumulator

if TYPE_CHECKING:  # config imports loadgen.patterns; avoid the cycle at run time
    from pytest_llmperf.config import RunSpec

__all__ = ["DRAIN_GRACE_S", "GENERATOR_BOUND_LAG_MS", "LoadRun", "run_load"]

RecordObserver = Callable[[RequestRecord], None]

GENERATOR_BOUND_RATE_SHARE = 0.9
GENERATOR_BOUND_LAG_MS = 10.0
DRAIN_GRACE_S = 5.0
_YIELD_EVERY = 32  # when behind schedule, still let responses be read this often


class LoadRun:
    """The state of one run; :meth:`stop` ends issuing early (the run still drains)."""

    def __init__(
        self,
        endpoint: Endpoint,
        spec: RunSpec,
        *,
        request_limits_ms: dict[str, float] | None = None,
        observers: Iterable[RecordObserver] = (),
        label: str = "",
    ) -> None:
        self.endpoint = endpoint
        self.spec = spec
        self.label = label
        self.accumulator = MetricsAccumulator(request_limits_ms=request_limits_ms)
        self.observers = list(observers)
        self._stopping = asyncio.Event()
        self._inflight: dict[asyncio.Task[RequestRecord], RequestRecord] = {}
        self._issued = 0
        self._first_send_ns = 0
        self._last_send_ns = 0

    def stop(self) -> None:
        self._stopping.set()

    async def execute(self) -> RunResult:
        endpoint = await resolve_model(self.endpoint)
        self.endpoint = endpoint
        spec = self.spec
        concurrency = spec.load.concurrency or 0
        started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        cpu0 = time.process_time()
        wall0 = time.monotonic_ns()
        interrupted = False
        async with endpoint.client(max_connections=max(64, concurrency)) as http:
            try:
                if spec.load.open_loop:
                    await self._issue_open_loop(http)
                else:
                    await self._issue_closed_loop(http, concurrency)
            except asyncio.CancelledError:
                interrupted = True
                self._stopping.set()
            finally:
                await self._drain()
        wall_s = (time.monotonic_ns() - wall0) / 1e9
        cpu_s = time.process_time() - cpu0
        result = RunResult(
            workload=spec.describe_workload(),
            load=spec.load.describe(),
            endpoint=endpoint.describe(),
            accumulator=self.accumulator,
            started_at=started_at,
            duration_s=wall_s,
            interrupted=interrupted or self._stopping.is_set(),
            label=self.label,
        )
        result.self_check = self._self_check(wall_s, cpu_s)
        if interrupted:
            raise asyncio.CancelledError
        return result

    # -- issuing ---------------------------------------------------------------

    def _indices(self) -> Iterable[int]:
        total = self.spec.warmup + self.spec.requests if self.spec.requests else None
        return range(total) if total is not None else itertools.count()

    def _should_stop(self, now_ns: int, t0_ns: int) -> bool:
        if self._stopping.is_set():
            return True
        duration = self.spec.duration
        return duration is not None and now_ns - t0_ns >= duration * 1e9

    def _launch(self, http: httpx.AsyncClient, index: int, t_sched: int) -> asyncio.Task:
        sample = self.spec.workload.sample(index)
        record = RequestRecord(
            index=index,
            t_sched=t_sched,
            category=sample.category,
            tracked=index >= self.spec.warmup,
        )
        now = time.monotonic_ns()
        if not self._first_send_ns:
            self._first_send_ns = now
        self._last_send_ns = now
        self._issued += 1
        task = asyncio.create_task(send_request(http, self.endpoint, sample, record))
        self._inflight[task] = record
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[RequestRecord]) -> None:
        record = self._inflight.pop(task)
        if task.cancelled():
            return  # recorded by _drain as incomplete
        exc = task.exception()
        if exc is not None:
            record.fail(ErrorKind.CLIENT, f"{type(exc).__name__}: {exc}", now=time.monotonic_ns())
        self._deliver(record)

    def _deliver(self, record: RequestRecord) -> None:
        self.accumulator.add(record)
        for observer in self.observers:
            observer(record)

    async def _issue_open_loop(self, http: httpx.AsyncClient) -> None:
        loop = asyncio.get_running_loop()
        t0 = time.monotonic_ns()
        behind = 0
        for index, offset in zip(self._indices(), arrival_offsets_ns(self.spec.load), strict=False):
            planned = t0 + offset
            if self.spec.duration is not None and offset >= self.spec.duration * 1e9:
                break
            if self._stopping.is_set():
                break
            if planned > time.monotonic_ns():
                behind = 0
                wake = loop.create_future()
                handle = loop.call_at(planned / 1e9, _set_if_pending, wake)
                stop_wait = asyncio.ensure_future(self._stopping.wait())
                try:
                    await asyncio.wait((wake, stop_wait), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    handle.cancel()
                    stop_wait.cancel()
                if self._stopping.is_set():
                    break
            else:
                behind += 1
                if behind % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            self._launch(http, index, planned)

    async def _issue_closed_loop(self, http: httpx.AsyncClient, concurrency: int) -> None:
        t0 = time.monotonic_ns()
        indices = iter(self._indices())

        async def worker() -> None:
            for index in indices:
                now = time.monotonic_ns()
                if self._should_stop(now, t0):
                    return
                await self._launch(http, index, now)

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    async def _drain(self) -> None:
        """Wait for requests in flight; past the hard cap, record them as incomplete."""
        pending = [t for t, r in self._inflight.items() if r.tracked]
        if pending:
            cap = self.endpoint.timeouts.total + DRAIN_GRACE_S
            await asyncio.wait(pending, timeout=cap)
        leftovers = list(self._inflight.items())
        for task, _ in leftovers:
            task.cancel()
        if leftovers:
            await asyncio.wait([t for t, _ in leftovers])
        now = time.monotonic_ns()
        for _, record in leftovers:
            if record.tracked:
                record.fail(ErrorKind.INCOMPLETE, "still in flight when the run ended", now=now)
                self._deliver(record)

    # -- self-check ------------------------------------------------------------

    def _self_check(self, wall_s: float, cpu_s: float) -> dict[str, object]:
        """Was the generator, not the server, the bottleneck?"""
        lag_p99 = self.accumulator.histograms["schedule_lag"].p(99)
        lag_p50 = self.accumulator.histograms["schedule_lag"].p(50)
        check: dict[str, object] = {
            "schedule_lag_p50_ms": None if lag_p50 != lag_p50 else round(lag_p50, 4),
            "schedule_lag_p99_ms": None if lag_p99 != lag_p99 else round(lag_p99, 4),
            "client_cpu_share": round(cpu_s / wall_s, 4) if wall_s > 0 else None,
            "planned_rate": None,
            "achieved_rate": None,
        }
        reasons: list[str] = []
        load = self.spec.load
        if load.open_loop and load.rate and self._issued > 1:
            span = (self._last_send_ns - self._first_send_ns) / 1e9
            achieved = (self._issued - 1) / span if span > 0 else float("inf")
            check["planned_rate"] = load.rate
            check["achieved_rate"] = round(achieved, 4)
            stopped_early = self._stopping.is_set()
            if achieved < GENERATOR_BOUND_RATE_SHARE * load.rate and not stopped_early:
                reasons.append(
                    f"achieved send rate {achieved:.1f}/s < 90% of planned {load.rate:g}/s"
                )
        if load.open_loop and lag_p99 == lag_p99 and lag_p99 > GENERATOR_BOUND_LAG_MS:
            reasons.append(f"schedule_lag p99 {lag_p99:.1f} ms > {GENERATOR_BOUND_LAG_MS:g} ms")
        check["generator_bound"] = bool(reasons)
        check["reasons"] = reasons
        return check


def _set_if_pending(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def run_load(
    endpoint: Endpoint,
    spec: RunSpec,
    *,
    request_limits_ms: dict[str, float] | None = None,
    observers: Iterable[RecordObserver] = (),
    label: str = "",
) -> RunResult:
    """Run ``spec`` against ``endpoint`` and return its result (library entry point)."""
    run = LoadRun(
        endpoint, spec, request_limits_ms=request_limits_ms, observers=observers, label=label
    )
    return await run.execute()
