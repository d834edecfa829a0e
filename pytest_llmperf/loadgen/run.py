"""One load-generator run: the orchestrator of planning, issuing, delivery and self-check.

Phases: the ``warmup`` requests go first (same pattern, not tracked, and not
drained: the performance phase starts while they are still in flight, so
it begins at the target load); then the performance phase (tracked, and
drained at the end).

:class:`LoadRun` owns one run's lifecycle and delegates each job, down one chain
(``LoadRun -> Dispatcher -> ShareRun -> IssueBook``, no link pointing back up):

- the plan (which request, which sample, when; a worker's share; the strategy that
  issues it), built once: :class:`~pytest_llmperf.loadgen.plan.planner.RunPlan`;
- the run's share (all of it here): its accumulator, statistics, drain and
  :class:`~pytest_llmperf.loadgen.issue.book.IssueBook`, the one holder of the
  plan and the stop reason: :mod:`~pytest_llmperf.loadgen.issue.local`;
- where it is issued (this process, worker processes, Ray actors), and the
  controls passed on to it: :mod:`~pytest_llmperf.loadgen.scale_out.dispatcher`,
  handed the share run (never this run);
- where records go (metrics, event log, observers): :mod:`~pytest_llmperf.loadgen.issue.delivery`;
- was the generator the bottleneck: :mod:`~pytest_llmperf.loadgen.self_check`;
- the server's own metrics over the run (``server_metrics``: its ``/metrics``
  scraped at the start, every interval and at the end, in a thread of its own,
  off the request path): :mod:`~pytest_llmperf.server_metrics`;
- the GPUs' power, energy, memory and utilisation over the run (``gpus``: this
  machine's, ``--llm-gpu``, read at 10 Hz in a thread of their own; and the ``gpu``
  pages of a fleet, DCGM exporters): :mod:`~pytest_llmperf.gpu`, ``result.gpu``. With
  ``--llm-workers`` > 1 they are read here, in the parent, once;
- the server process the gate started (``server``, a
  :class:`~pytest_llmperf.managed_server.ManagedServer`): its resources sampled and its
  exit watched over the run, :mod:`~pytest_llmperf.loadgen.server_watch`.

It knows no pools: with ``workers > 1`` (or ``ray``) the dispatcher splits the
same plan across processes and merges them exactly into this run.

Stopping: after ``requests`` requests, after ``duration`` seconds of the
performance phase, on :meth:`LoadRun.stop`, or on SIGINT / :meth:`LoadRun.interrupt`
(first: stop issuing and drain; second: stop draining). A managed server that
exits stops issuing and ends the drain at once (``server_exited``: the requests
in flight then fail with a connection error, and no request is sent after). Every issued request
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
from typing import TYPE_CHECKING, Any

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.models import resolve_model
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.gpu.local import LocalGpus
from pytest_llmperf.gpu.run_figures import SourceReads, local_reads, run_figures
from pytest_llmperf.gpu.sampler import GpuRecording
from pytest_llmperf.loadgen.event_files import events_file_for
from pytest_llmperf.loadgen.issue.delivery import Delivery, RecordObserver
from pytest_llmperf.loadgen.issue.local import ShareRun
from pytest_llmperf.loadgen.issue.stats import IssueStats
from pytest_llmperf.loadgen.plan.planner import PlanSource, RunPlan, ScheduleShare
from pytest_llmperf.loadgen.scale_out.dispatcher import Dispatcher
from pytest_llmperf.loadgen.scale_out.ray_workers import RayCluster
from pytest_llmperf.loadgen.self_check import generator_self_check
from pytest_llmperf.loadgen.server_watch import ServerWatch, WatchedServer
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult, StopReason
from pytest_llmperf.results.server_per_request import server_metrics_from_requests
from pytest_llmperf.server_metrics.fleet_sampler import FleetRecording, FleetSampler
from pytest_llmperf.server_metrics.fleet_source import FleetSource, MetricsSource
from pytest_llmperf.server_metrics.sampler import ServerMetricsRecording, ServerMetricsSampler
from pytest_llmperf.server_metrics.summary import ServerMetrics, with_response_timings

if TYPE_CHECKING:  # started and stopped by the plugin; a run only watches it
    from pytest_llmperf.loadgen.issue.book import IssueBook
    from pytest_llmperf.managed_server import ServerExit

__all__ = ["DECIDE_EVERY_S", "Decider", "LoadRun", "run_load"]

# until="decided": (every SLO decided?, why) from a live run's accumulator and its count of
# requests in flight (pytest_llmperf.slo.sequential.decider; the plugin builds it from the
# test's SLOs)
Decider = Callable[[MetricsAccumulator, int], tuple[bool, str]]

DECIDE_EVERY_S = 0.25  # until="decided": how often the run's SLOs are looked at

# Reasons that leave a run interrupted: it did not issue everything it planned.
_INTERRUPTING = (
    StopReason.STOPPED,
    StopReason.SIGINT,
    StopReason.CANCELLED,
    StopReason.WORKER_LOST,
    StopReason.SERVER_EXITED,
)


class LoadRun:
    """The state of one run; :meth:`stop` ends issuing early (the run still drains).

    ``spec``: what the test declared (or a
    :class:`~pytest_llmperf.loadgen.plan.planner.RunPlan` made already), planned once here.
    ``events_dir``: keep this run's event log there (one SQLite file per
    run; ``RunResult.events_path`` says which). ``workers``: issue from that
    many processes (``--llm-workers``). ``server``: the server process the gate
    started for this endpoint (None for a URL it did not start), watched over the run
    (``RunResult.server_process``).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        spec: PlanSource,
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
        server_metrics: MetricsSource | None = None,
        decide: Decider | None = None,
        server: WatchedServer | None = None,
        gpus: LocalGpus | None = None,
    ) -> None:
        self.spec = spec  # as given (callers read it); below here only the plan is used
        plan = RunPlan.of(spec, share)
        self.label = label
        # the managed server: sampled and watched over the run (a failed request looks too)
        self.server = server
        self.server_watch = ServerWatch(server, label, self._server_exited) if server else None
        if self.server_watch is not None:
            observers = [*observers, self._look_at_server]
        # the run's share (all of it): its book holds the plan and the stop reason
        self.share_run = ShareRun(
            # the test's llm_workload(extra_body=...) rides on every request of this run
            endpoint.with_fields(endpoint.fields.with_extra(plan.extra_body)),
            plan,
            request_limits_ms=request_limits_ms,
            observers=observers,
            label=label,
        )
        self.events_dir = Path(events_dir) if events_dir is not None else None
        self.events_path = Path(events_path) if events_path is not None else None
        self.handle_sigint = handle_sigint
        self.ray = ray  # --llm-workers=ray:N: the session's Ray cluster issues the run
        self.dispatcher = Dispatcher(self.share_run, workers, ray)
        self.server_metrics = server_metrics  # scraped around and during the run, off its path
        self.gpus = gpus  # --llm-gpu: this machine's GPUs, read around and during the run
        self._sigints = 0
        # until="decided": looked at every DECIDE_EVERY_S; a decided run stops issuing, drains
        self.decide = decide
        self.stop_detail = ""

    # -- what the run's share holds (read there: one holder each) -----------------

    @property
    def plan(self) -> RunPlan:
        return self.share_run.book.plan

    @property
    def book(self) -> IssueBook:
        return self.share_run.book

    @property
    def endpoint(self) -> Endpoint:
        """The endpoint the run's requests go to (its model resolved once the run starts)."""
        return self.share_run.endpoint

    @property
    def accumulator(self) -> MetricsAccumulator:
        return self.share_run.accumulator

    @property
    def delivery(self) -> Delivery:
        return self.share_run.delivery

    @property
    def stats(self) -> IssueStats:
        return self.share_run.stats

    @property
    def share(self) -> ScheduleShare:
        return self.plan.share

    @property
    def stop_reason(self) -> StopReason | None:
        """Why issuing ended: ``completed``, ``duration``, ``stop()``, ``SIGINT``, ``cancelled``
        (the book's: set there only)."""
        return self.share_run.book.stop_reason

    @property
    def workers(self) -> int:
        """Processes or actors that issue the run (``--llm-workers``; Ray's once placed)."""
        return self.dispatcher.workers

    # -- live counts (read by loadgen.progress on a timer, never per request) -----

    @property
    def issues_here(self) -> bool:
        """True when this process issues the requests, so its counters are live."""
        return self.dispatcher.issues_here

    @property
    def issued_requests(self) -> int:
        """Requests issued so far in this process, warm-up included."""
        return self.share_run.book.issued

    @property
    def in_flight(self) -> int:
        """Requests issued and not yet finished in this process (warm-up included)."""
        return len(self.share_run.book.inflight)

    # -- control -----------------------------------------------------------------

    def stop(self, reason: StopReason = StopReason.STOPPED) -> None:
        """Stop issuing; requests in flight are still awaited and reported."""
        self.dispatcher.stop(reason)

    def interrupt(self) -> None:
        """What Ctrl-C does: the first call stops issuing and drains, the next end the drain.

        Safe to call from the event loop only (from a signal handler or
        another thread, through ``loop.call_soon_threadsafe``).
        """
        self._sigints += 1
        if self._sigints == 1:
            self.stop(StopReason.SIGINT)
        else:
            self.dispatcher.end_drain()

    def abort(self) -> None:
        """Two Ctrl-C at once: stop issuing, and stop draining once the drain has begun."""
        self.interrupt()
        self.interrupt()

    # -- description -------------------------------------------------------------

    def describe_workload(self) -> dict[str, Any]:
        return self.plan.describe_workload()

    def event_log_meta(self, started_at: str) -> dict[str, Any]:
        """The run's description stored in its event log (``meta`` table)."""
        return self.share_run.event_log_meta(started_at)

    def _events_file(self) -> Path | None:
        if self.events_path is not None:
            return self.events_path
        if self.events_dir is None:
            return None
        return events_file_for(self.events_dir, self.label or "run")

    # -- the run -----------------------------------------------------------------

    async def execute(self) -> RunResult:
        endpoint = self.share_run.endpoint = await resolve_model(self.endpoint)
        started = datetime.now(UTC)
        started_at = started.isoformat(timespec="milliseconds")
        events_file = self._events_file()
        sampler: ServerMetricsSampler | FleetSampler | None = None
        if isinstance(self.server_metrics, FleetSource):  # several pages: one sampler each
            sampler = FleetSampler(endpoint, self.server_metrics)
        elif self.server_metrics is not None:
            sampler = ServerMetricsSampler(endpoint, self.server_metrics)
        if sampler is not None:
            await sampler.astart()  # the start scrape, bounded; then a thread of its own
        gpu_sampler = self.gpus.sampler() if self.gpus is not None else None
        if gpu_sampler is not None:
            await gpu_sampler.astart()  # the first read; then 10 Hz in a thread of its own
        gpu_recording: GpuRecording | None = None
        restore_sigint = self._install_sigint()
        wall0 = time.monotonic_ns()
        server = self.server_watch
        if server is not None:
            # before the client's CPU is counted: the watch's own work is not the
            # generator's (its self-check judges the client's CPU share)
            server.start(wall0)  # a server dead already: nothing is issued
        cpu0 = time.process_time()
        watch_cpu_s = 0.0
        interrupted = False
        recording: ServerMetricsRecording | FleetRecording | None = None
        server_process: dict[str, Any] | None = None
        watcher = asyncio.ensure_future(self._watch_decided()) if self.decide else None
        try:
            interrupted = await self.dispatcher.issue(events_file, started_at)
        finally:
            if watcher is not None:
                watcher.cancel()
            restore_sigint()
            if gpu_sampler is not None:  # the last read, after the last reply
                gpu_recording = await asyncio.shield(gpu_sampler.astop())
            if sampler is not None:
                # the end scrape in a thread: a run cancelled here still stops the sampler
                recording = await asyncio.shield(sampler.astop())
            if server is not None:
                tokens = self.accumulator.output_tokens
                watch_cpu_s = time.process_time()
                server_process = await asyncio.shield(server.stop(tokens))
                watch_cpu_s = time.process_time() - watch_cpu_s
        wall_s = (time.monotonic_ns() - wall0) / 1e9
        self.stats.cpu_s += time.process_time() - cpu0 - watch_cpu_s
        self.stats.wall_s = wall_s
        self.book.settle(StopReason.CANCELLED if interrupted else StopReason.COMPLETED)
        load = self.plan.load
        result = RunResult(
            workload=self.describe_workload(),
            load=load.describe(),
            endpoint=endpoint.describe(),
            accumulator=self.accumulator,
            started_at=started_at,
            duration_s=wall_s,
            interrupted=interrupted or self.stop_reason in _INTERRUPTING,
            label=self.label,
        )
        result.stop_reason = self.stop_reason
        result.stop_detail = self.stop_detail
        result.stage_plan = load.stages
        result.stage_sends = list(self.stats.stage_sends)
        result.events_path = str(events_file) if events_file is not None else None
        result.server_process = server_process
        self._add_server_metrics(result, recording, wall0)
        self._add_gpu(result, gpu_recording, recording, wall0)
        result.self_check = generator_self_check(
            self.accumulator,
            self.stats,
            load,
            workers=self.workers,
            wall_s=wall_s,
            stop_reason=self.stop_reason,
            worker_reports=self.dispatcher.reports,
        )
        if interrupted:
            raise asyncio.CancelledError
        return result

    async def _watch_decided(self) -> None:
        """Stop issuing once ``decide`` says every SLO is decided (never before its minimum
        of measured samples, which come after the warm-up): the run then drains."""
        assert self.decide is not None
        t0 = time.monotonic()
        while not self.stop_reason:
            await asyncio.sleep(DECIDE_EVERY_S)
            done, why = self.decide(self.accumulator, self.in_flight)
            if done and not self.stop_reason:
                issued = self.issued_requests
                self.stop_detail = (
                    f"{why}, {time.monotonic() - t0:.1f} s in, {issued} requests issued"
                )
                self.stop(StopReason.DECIDED)

    def _look_at_server(self, record: RequestRecord) -> None:
        """A failed request: has the server died? (Caught here before the slot that sent it
        sends again, where the watch's own look comes a moment late.)"""
        if record.error is not None and self.server_watch is not None:
            self.server_watch.check(failed=True)

    def _server_exited(self, exit: ServerExit, message: str) -> None:
        """The watched server exited (``message``: "server exited with signal 9 (SIGKILL)
        at 12.3 s into run0"): stop issuing and end the drain now; its requests in flight
        are lost, and waiting for them would only wait out their timeouts."""
        self.stop_detail = message
        self.stop(StopReason.SERVER_EXITED)
        # also over a run that was draining
        self.book.settle(StopReason.SERVER_EXITED, overrule=True)
        self.dispatcher.end_drain()

    def _add_server_metrics(
        self,
        result: RunResult,
        recording: ServerMetricsRecording | FleetRecording | None,
        t0_ns: int,
    ) -> None:
        """The server's view of the run and of each stage: from its ``/metrics`` scrapes,
        else (or for the names a page lacks) from the timings its responses carried. A
        fleet's: ``result.fleet`` (each page, each role's pool), and ``server_metrics`` and
        each stage's the whole fleet as one."""
        from_responses = server_metrics_from_requests(self.accumulator)
        if recording is None:
            if from_responses is not None:
                from_responses.missing = (
                    "no /metrics scraped (--llm-server-metrics off, or none found at preflight):"
                    " the responses' own timings only"
                )
            result.server_metrics = from_responses
            return
        summary = _whole(recording, result, t0_ns)
        result.server_metrics = with_response_timings(summary, from_responses)
        start = t0_ns
        for k, stage in enumerate(result.stage_plan):
            end = start + int(stage.duration_s * 1e9)
            part = self.accumulator.stages.get(k)
            result.stage_server_metrics.append(
                with_response_timings(
                    _whole(recording, None, t0_ns, (start, end)),
                    server_metrics_from_requests(part) if part is not None else None,
                )
            )
            start = end

    def _add_gpu(
        self,
        result: RunResult,
        local: GpuRecording | None,
        recording: ServerMetricsRecording | FleetRecording | None,
        t0_ns: int,
    ) -> None:
        """The run's GPU figures (``result.gpu``): this machine's reads and the fleet's
        ``gpu`` pages'; energy per token over the server's own generation-token count
        where its metrics have it, else the client's usage totals. Whole-run figures
        only: a stage's are not split out (said in the block's notes)."""
        sources: list[SourceReads] = []
        if local is not None and self.gpus is not None:
            sources.append(local_reads(local, self.gpus.source))
        if isinstance(recording, FleetRecording):
            sources.extend(recording.gpu_reads())
        if not sources:
            return
        metrics = result.server_metrics
        server_tokens = (
            metrics.stat("server.generation_tokens", None)
            if metrics is not None and metrics.missing is None
            else None
        )
        result.gpu = run_figures(
            sources,
            t0_ns,
            server_tokens=server_tokens,
            client_tokens=float(self.accumulator.output_tokens),
            stages=len(result.stage_plan) > 1,
        )

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


def _whole(
    recording: ServerMetricsRecording | FleetRecording,
    result: RunResult | None,
    t0_ns: int,
    window_ns: tuple[int, int] | None = None,
) -> ServerMetrics:
    """One page's summary, or a fleet's whole (kept, with its pages, on ``result.fleet``)."""
    if isinstance(recording, ServerMetricsRecording):
        return recording.summary(t0_ns, window_ns)
    fleet = recording.summary(t0_ns, window_ns)
    if result is not None and not recording.source.engine_alone:  # one server, its GPUs
        result.fleet = fleet
    assert fleet.whole is not None
    return fleet.whole


async def run_load(
    endpoint: Endpoint,
    spec: PlanSource,
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
