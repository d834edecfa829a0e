"""One load-generator run: issue requests on the pattern's clock, drain, report.

Phases: the ``warmup`` requests go first (same pattern, not tracked, and not
drained: the performance phase starts while they are still in flight, so
it begins at the target load); then the performance phase (tracked, and
drained at the end).

Open-loop sends are paced against absolute planned times (``t0 +
offset_i``), never "previous send + delay", so the schedule cannot drift; a
send that happens late still counts its latency from its planned time
(:mod:`~pytest_llmperf.loadgen.pacing` wakes up early and finishes on the
monotonic clock, because asyncio's timers are only millisecond-accurate).
Closed-loop workers (``concurrency``, ``max-throughput``) issue the next
request as soon as their previous one ends.

Stopping: after ``requests`` requests, after ``duration`` seconds of the
performance phase, on :meth:`LoadRun.stop`, or on SIGINT (first Ctrl-C:
stop issuing and drain; second: stop draining). Every issued request ends in
exactly one record: the drain waits for tracked requests up to the
per-request total timeout plus a grace period, and any still in flight at
that hard cap are recorded as ``incomplete_at_cap`` failures rather than
dropped from the tail.

With ``workers > 1`` the run is split across processes
(:mod:`~pytest_llmperf.loadgen.workers`); each issues its share of the same
planned schedule and the histograms are merged exactly.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.models import resolve_model
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.gc_pauses import collect_if_due, full_collections_deferred
from pytest_llmperf.loadgen.pacing import Pacer
from pytest_llmperf.loadgen.patterns import arrival_offsets_ns
from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.loadgen.sample_order import SampleOrder
from pytest_llmperf.metrics.accumulator import MetricsAccumulator
from pytest_llmperf.metrics.recorder import EventRecorder
from pytest_llmperf.metrics.sample_size import supported_percentile
from pytest_llmperf.workloads.base import Sample

if TYPE_CHECKING:  # config imports loadgen.patterns; avoid the cycle at run time
    from pytest_llmperf.config import RunSpec

__all__ = [
    "DRAIN_GRACE_S",
    "GENERATOR_BOUND_CPU_SHARE",
    "GENERATOR_BOUND_LAG_MS",
    "GENERATOR_BOUND_RATE_SHARE",
    "INTERRUPT_DRAIN_S",
    "IssueStats",
    "LoadRun",
    "ScheduleShare",
    "events_file_for",
    "run_load",
]

RecordObserver = Callable[[RequestRecord], None]

GENERATOR_BOUND_RATE_SHARE = 0.9
GENERATOR_BOUND_LAG_MS = 10.0
GENERATOR_BOUND_CPU_SHARE = 0.95  # closed loop: a client process this busy was the bottleneck
DRAIN_GRACE_S = 5.0
INTERRUPT_DRAIN_S = 5.0  # longest drain after Ctrl-C or cancellation
WARM_CONNECTIONS_MAX = 256  # connections opened before the clock starts
INTERRUPT_DRAIN_S = 5.0  # after Ctrl-C / SIGTERM / cancellation: then in-flight = incomplete
_YIELD_EVERY = 32  # when behind schedule, still let responses be read this often


@dataclass(frozen=True)
class ScheduleShare:
    """The part of the planned schedule one process issues.

    Position ``i`` of the run (warm-up included) belongs to worker
    ``i % count``; every worker walks the same seeded schedule and sample
    order, so the union of the shares is exactly the planned run. ``t0_ns``
    is the common start on the system-wide monotonic clock.
    """

    index: int = 0
    count: int = 1
    t0_ns: int | None = None
    concurrency: int | None = None  # this worker's share of a closed loop's slots


@dataclass
class IssueStats:
    """What the issuing side did, for the self-check; merges across workers."""

    tracked_issued: int = 0
    first_send_ns: int = 0
    last_send_ns: int = 0
    first_planned_ns: int = 0
    last_planned_ns: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    worker_cpu_s: list[float] = field(default_factory=list)

    def note(self, planned_ns: int, send_ns: int) -> None:
        if not self.tracked_issued:
            self.first_send_ns, self.first_planned_ns = send_ns, planned_ns
        self.tracked_issued += 1
        self.last_send_ns, self.last_planned_ns = send_ns, planned_ns

    def merge(self, other: IssueStats) -> None:
        if other.tracked_issued:
            if not self.tracked_issued:
                self.first_send_ns, self.first_planned_ns = (
                    other.first_send_ns,
                    other.first_planned_ns,
                )
                self.last_send_ns, self.last_planned_ns = other.last_send_ns, other.last_planned_ns
            else:
                self.first_send_ns = min(self.first_send_ns, other.first_send_ns)
                self.first_planned_ns = min(self.first_planned_ns, other.first_planned_ns)
                self.last_send_ns = max(self.last_send_ns, other.last_send_ns)
                self.last_planned_ns = max(self.last_planned_ns, other.last_planned_ns)
        self.tracked_issued += other.tracked_issued
        self.cpu_s += other.cpu_s
        self.worker_cpu_s.append(round(other.cpu_s, 4))

    def to_state(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> IssueStats:
        return cls(**state)


@dataclass(frozen=True, slots=True)
class _Planned:
    position: int
    sample_index: int
    offset_ns: int | None
    tracked: bool


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
    ) -> None:
        # the test's llm_workload(extra_body=...) rides on every request of this run
        self.endpoint = endpoint.with_fields(endpoint.fields.with_extra(spec.extra_body))
        self.spec = spec
        self.label = label
        self.request_limits_ms = dict(request_limits_ms or {})
        self.accumulator = MetricsAccumulator(request_limits_ms=request_limits_ms)
        self.observers = list(observers)
        self.events_dir = Path(events_dir) if events_dir is not None else None
        self.events_path = Path(events_path) if events_path is not None else None
        self.workers = max(1, int(workers))
        self.share = share or ScheduleShare()
        self.handle_sigint = handle_sigint
        self.stats = IssueStats()
        self.stop_reason = ""
        self.recorder: EventRecorder | None = None
        self._stopping = asyncio.Event()
        self._abort_drain: asyncio.Future[None] | None = None
        self._pacer = Pacer()
        self._inflight: dict[asyncio.Task[RequestRecord], RequestRecord] = {}
        self._positions: dict[int, int] = {}  # id(record) -> run position, for the event log
        self._issued = 0
        self._sigints = 0
        self._worker_pool: Any = None
        self._closed_loop_over: asyncio.Future[None] | None = None
        self._closed_loop = not spec.load.open_loop

    # -- control -----------------------------------------------------------------

    def stop(self, reason: str = "stop()") -> None:
        """Stop issuing; requests in flight are still awaited and reported."""
        if not self.stop_reason:
            self.stop_reason = reason
        self._stopping.set()
        self._pacer.cancel()
        self._end_closed_loop()
        if self._worker_pool is not None:
            self._worker_pool.stop()

    def _end_closed_loop(self, error: BaseException | None = None) -> None:
        over = self._closed_loop_over
        if over is not None and not over.done():
            if error is None:
                over.set_result(None)
            else:
                over.set_exception(error)

    def _on_sigint(self) -> None:
        self._sigints += 1
        if self._sigints == 1:
            self.stop("SIGINT")
        elif self._worker_pool is not None:
            self._worker_pool.abort()
        elif self._abort_drain is not None and not self._abort_drain.done():
            self._abort_drain.set_result(None)

    # -- description -------------------------------------------------------------

    def sample_order(self) -> SampleOrder:
        spec = self.spec
        return SampleOrder.for_workload(
            spec.load.sample_order,
            spec.load.seed,
            spec.workload.size,
            pool=(spec.requests or 0) + spec.warmup or None,
        )

    def describe_workload(self) -> dict[str, Any]:
        out = self.spec.describe_workload()
        out["sample_order"] = self.sample_order().describe()
        return out

    def _events_file(self) -> Path | None:
        if self.events_path is not None:
            return self.events_path
        if self.events_dir is None:
            return None
        return events_file_for(self.events_dir, self.label or "run")

    def _meta(self, started_at: str) -> dict[str, Any]:
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
            if self.workers > 1:
                from pytest_llmperf.loadgen.workers import WorkerPool

                self._worker_pool = WorkerPool(self, events_file, started_at)
                await self._worker_pool.run()
            else:
                if events_file is not None:
                    self.recorder = EventRecorder(events_file, meta=self._meta(started_at))
                try:
                    with full_collections_deferred():
                        interrupted = await self._run_here()
                finally:
                    if self.recorder is not None:
                        self.recorder.set_meta({"summary": self.accumulator.summary()})
                        await asyncio.get_running_loop().run_in_executor(None, self.recorder.close)
        finally:
            restore_sigint()
        wall_s = (time.monotonic_ns() - wall0) / 1e9
        self.stats.cpu_s += time.process_time() - cpu0
        self.stats.wall_s = wall_s
        if not self.stop_reason:
            self.stop_reason = "cancelled" if interrupted else "completed"
        result = RunResult(
            workload=self.describe_workload(),
            load=self.spec.load.describe(),
            endpoint=endpoint.describe(),
            accumulator=self.accumulator,
            started_at=started_at,
            duration_s=wall_s,
            interrupted=interrupted or self.stop_reason in ("stop()", "SIGINT", "cancelled"),
            label=self.label,
        )
        result.stop_reason = self.stop_reason
        result.events_path = str(events_file) if events_file is not None else None
        result.self_check = self._self_check(wall_s)
        if interrupted:
            raise asyncio.CancelledError
        return result

    async def _run_here(self) -> bool:
        """Issue and drain in this process; True when the task was cancelled."""
        spec = self.spec
        concurrency = self.share.concurrency or spec.load.concurrency or 0
        interrupted = False
        # Open loop: no pool cap below the descriptor budget (a wait for a connection
        # would count against the server's TTFT).
        pool = max(64, concurrency) if concurrency else None
        async with StreamClient(self.endpoint, max_connections=pool) as http:
            try:
                spec.workload.sample(0)  # loads corpora and datasets before the clock starts
                await http.open_connections(_warm_connections(spec, concurrency))
                t0 = self.share.t0_ns or time.monotonic_ns()
                if spec.load.open_loop:
                    await self._issue_open_loop(http, t0)
                else:
                    await self._issue_closed_loop(http, concurrency, t0)
            except asyncio.CancelledError:
                interrupted = True
                self.stop("cancelled")
            finally:
                await self._drain()
        return interrupted

    def _install_sigint(self) -> Callable[[], None]:
        """First Ctrl-C: stop issuing and drain; second: stop draining."""
        if not self.handle_sigint or threading.current_thread() is not threading.main_thread():
            return lambda: None
        loop = asyncio.get_running_loop()
        previous = signal.getsignal(signal.SIGINT)

        def handler(signum: int, frame: object) -> None:
            loop.call_soon_threadsafe(self._on_sigint)

        try:
            signal.signal(signal.SIGINT, handler)
        except (ValueError, OSError):  # pragma: no cover - not the main interpreter
            return lambda: None

        def restore() -> None:
            signal.signal(signal.SIGINT, previous)

        return restore

    # -- issuing -----------------------------------------------------------------

    def _plan(self) -> Iterator[_Planned]:
        """This process's share of the planned requests, in order.

        Walks every position of the run (so each worker sees the same
        schedule and sample order) and yields those of its share.
        """
        spec = self.spec
        warmup = spec.warmup
        total = warmup + spec.requests if spec.requests else None
        positions: Iterable[int] = range(total) if total is not None else itertools.count()
        order = iter(self.sample_order())
        open_loop = spec.load.open_loop
        offsets: Iterator[int | None] = (
            arrival_offsets_ns(spec.load) if open_loop else itertools.repeat(None)
        )
        duration_ns = spec.duration * 1e9 if spec.duration is not None else None
        perf_start: int | None = None
        share = self.share
        for position in positions:
            index = next(order)
            offset = next(offsets)
            tracked = position >= warmup
            if open_loop and duration_ns is not None and tracked:
                assert offset is not None
                if perf_start is None:
                    perf_start = offset
                if offset - perf_start >= duration_ns:
                    return
            if position % share.count == share.index:
                yield _Planned(position, index, offset, tracked)

    def _new_record(self, item: _Planned, sample: Sample, t_sched: int) -> RequestRecord:
        """The record of a request about to be issued, counted as issued."""
        record = RequestRecord(
            index=item.sample_index,
            t_sched=t_sched,
            category=sample.category,
            tracked=item.tracked,
            input_requested=sample.input_tokens,
            output_requested=sample.max_tokens,
        )
        if item.tracked:
            self.stats.note(t_sched, time.monotonic_ns())
        self._issued += 1
        collect_if_due(self._issued)
        if self.recorder is not None:
            self._positions[id(record)] = item.position
        return record

    def _launch(
        self, http: StreamClient, item: _Planned, sample: Sample, t_sched: int
    ) -> asyncio.Task[RequestRecord]:
        """Open loop: the request runs in a task of its own (many overlap)."""
        record = self._new_record(item, sample, t_sched)
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
        if self._closed_loop and record.t_send:
            record.t_sched = record.t_send  # closed loop: latency counts from the actual send
        self.accumulator.add(record)
        if self.recorder is not None:
            self.recorder.record(record, self._positions.pop(id(record), -1))
        for observer in self.observers:
            observer(record)

    async def _issue_open_loop(self, http: StreamClient, t0: int) -> None:
        workload = self.spec.workload
        pacer = self._pacer
        behind = 0
        for item in self._plan():
            if self._stopping.is_set():
                break
            assert item.offset_ns is not None
            planned = t0 + item.offset_ns
            sample = workload.sample(item.sample_index)  # prepared before the wait
            if planned > time.monotonic_ns():
                behind = 0
                if not await pacer.wait_until(planned):
                    break
            else:
                behind += 1
                if behind % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            self._launch(http, item, sample, planned)

    async def _issue_closed_loop(self, http: StreamClient, concurrency: int, t0: int) -> None:
        """Keep ``concurrency`` requests in flight: each slot sends its next as one ends.

        A slot awaits its requests inline (no task per request: that was 5% of
        the client's CPU at max throughput). While a request is in flight its
        record is in ``_inflight`` under the slot's task, so a stop leaves it
        to the drain, and past the drain's cap it is cancelled and recorded
        as incomplete.
        """
        workload = self.spec.workload
        plan = self._plan()
        duration_ns = self.spec.duration * 1e9 if self.spec.duration is not None else None
        deadline: list[float] = [t0 + duration_ns] if duration_ns and not self.spec.warmup else []
        while time.monotonic_ns() < t0:  # workers start together on the shared clock
            await asyncio.sleep(min(0.05, (t0 - time.monotonic_ns()) / 1e9))
        over = self._closed_loop_over = asyncio.get_running_loop().create_future()
        endpoint = self.endpoint
        inflight = self._inflight

        async def slot() -> None:
            task = asyncio.current_task()
            assert task is not None
            for item in plan:
                if self._stopping.is_set():
                    return
                now = time.monotonic_ns()
                if item.tracked and duration_ns is not None:
                    if not deadline:
                        deadline.append(now + duration_ns)
                    elif now >= deadline[0]:
                        self.stop_reason = self.stop_reason or "duration"
                        return
                sample = workload.sample(item.sample_index)
                record = self._new_record(item, sample, now)
                inflight[task] = record
                try:
                    await send_request(http, endpoint, sample, record)
                except Exception as exc:  # a client bug: this request fails, the run goes on
                    kind = f"{type(exc).__name__}: {exc}"
                    record.fail(ErrorKind.CLIENT, kind, now=time.monotonic_ns())
                del inflight[task]  # (cancelled: the drain records it as incomplete)
                self._deliver(record)

        slots = max(1, concurrency)

        def slot_ended(task: asyncio.Task[None]) -> None:
            nonlocal slots
            slots -= 1
            if not task.cancelled() and task.exception() is not None:
                self._stopping.set()  # the other slots stop issuing too
                self._end_closed_loop(task.exception())  # a workload that fails to build, say
            elif not slots:
                self._end_closed_loop()

        for _ in range(slots):
            asyncio.ensure_future(slot()).add_done_callback(slot_ended)
        await over

    async def _drain(self) -> None:
        """Wait for tracked requests in flight; past the hard cap, record them as incomplete."""
        pending = [t for t, r in self._inflight.items() if r.tracked]
        if pending:
            cap = self.endpoint.timeouts.total + DRAIN_GRACE_S
            if self.stop_reason in ("SIGINT", "cancelled"):
                cap = min(cap, INTERRUPT_DRAIN_S)  # someone is waiting: drain briefly
            if self.stop_reason in ("SIGINT", "cancelled"):  # interrupted: drain briefly
                cap = min(cap, INTERRUPT_DRAIN_S)
            self._abort_drain = asyncio.get_running_loop().create_future()
            all_done = asyncio.ensure_future(asyncio.wait(pending))
            await asyncio.wait(
                (all_done, self._abort_drain), timeout=cap, return_when=asyncio.FIRST_COMPLETED
            )
            all_done.cancel()
            if not self._abort_drain.done():
                self._abort_drain.cancel()
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
            else:
                self._positions.pop(id(record), None)

    # -- self-check --------------------------------------------------------------

    def _self_check(self, wall_s: float) -> dict[str, object]:
        """Was the generator, not the server, the bottleneck?

        ``planned_rate`` is the pattern's nominal rate; ``schedule_rate`` the
        rate of the schedule actually drawn (a Poisson sample differs from
        its mean); ``achieved_rate`` the rate the sends really happened at.
        The generator is the bottleneck when (open loop) it sent at under 90%
        of the schedule's rate or its schedule_lag p99 exceeds 10 ms (p90 on runs
        too small for a p99, p50 on smaller still: see metrics.sample_size), or
        (closed loop) a client process was busy at least 95% of the time.
        """
        lag = self.accumulator.histograms["schedule_lag"]
        lag_p50, lag_p99 = lag.p(50), lag.p(99)
        # Judge the lag at the highest percentile the sample count supports: on a
        # 100-request run "p99" is the slowest send, and one hiccup is not a bottleneck.
        judged_p = supported_percentile(lag.count, 99.0, (90.0, 50.0))
        stats = self.stats
        check: dict[str, object] = {
            "schedule_lag_p50_ms": None if lag_p50 != lag_p50 else round(lag_p50, 4),
            "schedule_lag_p99_ms": None if lag_p99 != lag_p99 else round(lag_p99, 4),
            "client_cpu_s": round(stats.cpu_s, 4),
            "client_cpu_share": round(stats.cpu_s / wall_s, 4) if wall_s > 0 else None,
            "workers": self.workers,
            "planned_rate": None,
            "schedule_rate": None,
            "achieved_rate": None,
        }
        if stats.worker_cpu_s:
            check["worker_cpu_s"] = stats.worker_cpu_s
        reasons: list[str] = []
        load = self.spec.load
        n = stats.tracked_issued
        if n > 1:
            span = (stats.last_send_ns - stats.first_send_ns) / 1e9
            achieved = (n - 1) / span if span > 0 else float("inf")
            check["achieved_rate"] = round(achieved, 4)
            if load.open_loop and load.rate:
                planned_span = (stats.last_planned_ns - stats.first_planned_ns) / 1e9
                schedule = (n - 1) / planned_span if planned_span > 0 else float("inf")
                check["planned_rate"] = load.rate
                check["schedule_rate"] = round(schedule, 4)
                share = achieved / schedule if schedule else 1.0
                check["achieved_share"] = round(share, 4)
                if share < GENERATOR_BOUND_RATE_SHARE and self.stop_reason == "completed":
                    reasons.append(
                        f"achieved send rate {achieved:.1f}/s < 90% of the schedule's "
                        f"{schedule:.1f}/s (planned {load.rate:g}/s)"
                    )
        if load.open_loop and judged_p is not None:
            judged = lag.p(judged_p)
            check["schedule_lag_judged_at"] = f"p{judged_p:g}"
            if judged > GENERATOR_BOUND_LAG_MS:
                reasons.append(
                    f"schedule_lag p{judged_p:g} {judged:.1f} ms > {GENERATOR_BOUND_LAG_MS:g} ms"
                )
        per_process = stats.cpu_s / wall_s / self.workers if wall_s > 0 else 0.0
        if not load.open_loop and per_process >= GENERATOR_BOUND_CPU_SHARE:
            # A closed loop has no schedule to fall behind; a saturated client core is the sign.
            reasons.append(
                f"client CPU {per_process:.0%} of each process's wall time "
                f">= {GENERATOR_BOUND_CPU_SHARE:.0%}: the client, not the server, set the pace"
            )
        check["generator_bound"] = bool(reasons)
        check["reasons"] = reasons
        return check


def _warm_connections(spec: RunSpec, concurrency: int) -> int:
    """Connections to open before the clock starts: ~50 ms of arrivals for an open loop.

    An open loop counts latency from the plan, so a connect (measured: 15-25 ms
    for a burst of 32 on a 2-core machine) that a warm client would not have
    paid lands in schedule_lag and TTFT as if the server had been slow. A
    closed loop counts from ``t_send``, the socket write, which comes after
    the connect: one connection (name resolution, TLS set-up) is enough.
    """
    if spec.load.open_loop and spec.load.rate:
        return max(1, min(WARM_CONNECTIONS_MAX, int(spec.load.rate * 0.05)))
    return 1


def events_file_for(events_dir: str | Path, name: str) -> Path:
    """A new file name in ``events_dir`` for a run called ``name`` (never an existing one)."""
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("_")[-120:] or "run"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    for n in itertools.count():
        path = Path(events_dir) / f"{slug}-{stamp}{f'-{n}' if n else ''}.sqlite"
        if not path.exists():
            return path
    raise AssertionError("unreachable")


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
