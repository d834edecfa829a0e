"""``--llm-workers=ray:N|ray:auto``: one run issued from N Ray actors, merged exactly.

One machine's load generator runs out before a serving cluster does. This
spreads the *same* run over Ray actors, on a local Ray instance or an existing
cluster (``--llm-ray-address``, ``$RAY_ADDRESS``), and keeps it one run: every
actor walks the same seeded schedule and issues its positions ``i % N``,
exactly as a local worker process does (the same
:class:`~pytest_llmperf.loadgen.scale_out.worker_share.ShareRunner` runs inside), and
the parent merges the actors' lossless accumulator states, issue statistics,
stop reasons and event logs as :class:`~pytest_llmperf.loadgen.scale_out.workers.WorkerPool`
merges its processes'. One schedule, one set of histograms, one verdict.

Timing across machines. Local workers share CLOCK_MONOTONIC; actors on other
hosts do not. The parent pings each remote actor a few times and keeps the
fastest round trip's estimate of the actor's wall-clock offset; it then
picks a start instant on its wall clock, tells each actor that instant *in
the actor's own wall clock*, and the actor converts it to its monotonic
clock once. The error in the common start is at most half that round trip;
both figures are reported per actor in ``self_check["worker_runs"]``, and
the actor's absolute timestamps are moved onto the parent's clock before
the merge. An actor on the parent's own node skips all of that and gets the
parent's monotonic ``t0`` itself, as a local worker does. The self-check
judges each actor's schedule lag as well as the merged one: one lagging
actor among many makes the run inconclusive, by name.

Faults (llmperf's two known failures, avoided). Actors never wait forever
for placement: the cluster's free CPUs are read first and each actor asks
for at most its share (fractional when there are fewer CPUs than actors; none
free is a clear error), and placement that still does not happen within
``ready_timeout_s`` is an error naming the actors and the cluster's
resources. Every wait has a timeout: an actor that dies (or whose node
leaves) ends the run as ``worker_lost``: the other actors are stopped and
drained, the lost actor's requests (issued by its last progress report) are
counted as incomplete with a message naming the actor and its node.

Actors are kept warm for the session (:class:`RayCluster`): the first Ray run
creates them, later runs reuse them, so a sweep pays actor start-up once. A
local Ray instance the session started is shut down at the end of the session.
Ray is imported only here, and only when asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.client.records import ErrorKind
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.issue.drain import DRAIN_GRACE_S
from pytest_llmperf.loadgen.scale_out.messages import WorkerMessage
from pytest_llmperf.loadgen.scale_out.ray_shell import ACTOR_MODULE, LoadActorShell
from pytest_llmperf.loadgen.scale_out.workers import (
    WorkerError,
    merge_event_logs,
    merge_states,
    payload_for,
)
from pytest_llmperf.loadgen.self_check import WorkerReport
from pytest_llmperf.results.run_result import StopReason

if TYPE_CHECKING:  # handed in by the dispatcher: the parent's share of the run (all of it)
    from pytest_llmperf.loadgen.issue.local import ShareRun

__all__ = [
    "ACTOR_MODULE",
    "RAY_EXTRA_HINT",
    "LoadActorShell",
    "RayCluster",
    "RayWorkerPool",
    "import_ray",
]

RAY_EXTRA_HINT = 'pip install "pytest-llmperf[ray]"'
READY_TIMEOUT_S = 60.0  # from asking for the actors to all of them built and ready
PING_TIMEOUT_S = 10.0  # one control call (clock, progress) to a live actor
POLL_S = 0.25  # how often the parent looks at the actors while they run
PROGRESS_EVERY_S = 1.0  # how often each actor reports its issued / delivered counts
CLOCK_PINGS = 5  # round trips per remote actor; the fastest one's estimate is kept
RESOURCE_SETTLE_S = 5.0  # at most this long for CPUs being given back before sizing actors
START_MARGIN_S = 0.1  # from "all actors ready" to the common start (plus the below)


def import_ray(where: str = "--llm-workers") -> Any:
    """The ``ray`` module, or a usage error saying how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise LlmPerfUsageError(
            f"'ray:N' runs the load from Ray actors and needs Ray, which is not installed "
            f"({exc}): {RAY_EXTRA_HINT}",
            where=where,
        ) from None


@dataclass
class _Actor:
    handle: Any
    cpus: float


class RayCluster:
    """The session's Ray connection and its warm load-generator actors.

    ``address``: an existing cluster (``--llm-ray-address``); else
    ``$RAY_ADDRESS``; else a local Ray instance started at the first Ray run
    and shut down by :meth:`close`. A Ray already initialised in this process
    (a test suite's own ``ray.init``) is used as it is and left running.
    ``auto``: ``ray:auto``, one actor per free CPU of the cluster, settled once
    at connection.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        auto: bool = False,
        ready_timeout_s: float = READY_TIMEOUT_S,
        local_cpus: int | None = None,
    ) -> None:
        self.address = address
        self.auto = auto
        self.ready_timeout_s = ready_timeout_s
        self.local_cpus = local_cpus  # a local instance's CPUs (default: the machine's)
        self.started_local = False
        self.auto_count: int | None = None
        self._ray: Any = None
        self._idle: list[_Actor] = []
        self._lock = threading.Lock()

    def connect(self) -> Any:
        """Connect (once) and return the ``ray`` module."""
        with self._lock:
            if self._ray is not None:
                return self._ray
            ray = import_ray()
            if not ray.is_initialized():
                address = self.address or os.environ.get("RAY_ADDRESS") or None
                kwargs: dict[str, Any] = {
                    "include_dashboard": False,
                    "logging_level": "warning",
                    "configure_logging": False,
                }
                if address:
                    ray.init(address=address, **kwargs)
                else:
                    # Ray runs workers at niceness 15; a load generator that yields the CPU
                    # to everything else on the host lags its schedule (measured here:
                    # 100-1,000 ms on a busy machine, 0.2 ms at niceness 0).
                    ray.init(
                        address="local",
                        num_cpus=self.local_cpus,
                        _system_config={"worker_niceness": 0},
                        **kwargs,
                    )
                    self.started_local = True
            self._ray = ray
            if self.auto:
                free = ray.available_resources().get("CPU", 0.0)
                self.auto_count = max(1, math.floor(free))
            return ray

    def actor_count(self, requested: int) -> int:
        """``requested``, or with ``ray:auto`` the count settled at connection."""
        self.connect()
        return self.auto_count if self.auto and self.auto_count else max(1, requested)

    def acquire(self, count: int, actor_class: type) -> list[_Actor]:
        """``count`` actors: warm ones first, then new ones of ``actor_class`` sized to the
        free CPUs."""
        ray = self.connect()
        with self._lock:
            actors, self._idle = self._idle[:count], self._idle[count:]
        missing = count - len(actors)
        if missing:
            free = _free_cpus(ray, missing)
            total = float(ray.cluster_resources().get("CPU", 0.0))
            if free < 0.01 * missing:
                self.release(actors)
                raise LlmPerfUsageError(
                    f"the Ray cluster has no free CPU for {missing} more load-generator "
                    f"actor(s) ({free:g} of {total:g} CPUs free): ask for fewer actors "
                    "or free the cluster",
                    where="--llm-workers",
                )
            # Never ask for more than is free (llmperf's actors waited forever for a CPU
            # each): below one CPU per actor, each gets an equal fraction.
            cpus = 1.0 if free >= missing else math.floor(free / missing * 100) / 100
            remote = ray.remote(max_restarts=0, max_task_retries=0)(actor_class)
            for _ in range(missing):
                handle = remote.options(num_cpus=cpus, scheduling_strategy="SPREAD").remote()
                actors.append(_Actor(handle, cpus))
        return actors

    def release(self, actors: list[_Actor]) -> None:
        """Keep live actors warm for the session's next run."""
        with self._lock:
            self._idle.extend(actors)

    def discard(self, actor: _Actor) -> None:
        """Kill an actor that failed (it is never reused)."""
        if self._ray is not None:
            with contextlib.suppress(Exception):  # already gone
                self._ray.kill(actor.handle, no_restart=True)

    def close(self) -> None:
        """End the session's actors; shut down a local Ray instance this session started."""
        with self._lock:
            idle, self._idle = self._idle, []
            ray, self._ray = self._ray, None
        if ray is None:
            return
        for actor in idle:
            with contextlib.suppress(Exception):  # already gone
                ray.kill(actor.handle, no_restart=True)
        if self.started_local:
            ray.shutdown()
            self.started_local = False


@dataclass
class _Placed:
    """One actor of this run: where it runs and what it said."""

    actor: _Actor
    where: dict[str, Any]
    clock_offset_ns: int = 0
    clock_rtt_ns: int = 0
    same_node: bool = True
    ref: Any = None  # the run() call
    progress_ref: Any = None
    progress_sent: float = 0.0
    issued: int = 0
    delivered: int = 0
    state: dict[str, Any] | None = None
    lost: str = ""


class RayWorkerPool:
    """Runs ``share``'s plan in Ray actors and merges into ``share`` (the :class:`WorkerPool`
    interface: :meth:`run`, :meth:`stop`, :meth:`abort`, plus :attr:`reports`).

    ``workers``: the actors asked for (``ray:N``; ``ray:auto`` settles its own count);
    :attr:`count` is how many ran, once they are placed.
    """

    def __init__(
        self,
        share: ShareRun,
        cluster: RayCluster,
        workers: int,
        events_file: Path | None,
        started_at: str = "",
        *,
        actor_class: type = LoadActorShell,
        drain_cap_s: float | None = None,
    ) -> None:
        self.share = share
        self.workers = workers
        self.cluster = cluster
        self.actor_class = actor_class  # what each actor runs (ray_actor.LoadActor, by name)
        self.events_file = events_file
        self.started_at = started_at
        self.drain_cap_s = (
            drain_cap_s
            if drain_cap_s is not None
            else share.endpoint.timeouts.total + DRAIN_GRACE_S
        )
        self.count = 0
        self.reports: list[WorkerReport] = []
        self.cpus_per_actor: float = 1.0
        self._placed: list[_Placed] = []
        self._stop_at: float | None = None
        self._control = threading.Lock()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(None, self._run_blocking)
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            self.abort()
            await asyncio.wait([work], timeout=self.drain_cap_s + PING_TIMEOUT_S)
            raise

    def stop(self) -> None:
        self._send(WorkerMessage.STOP)

    def abort(self) -> None:
        self._send(WorkerMessage.ABORT)

    def _send(self, what: WorkerMessage) -> None:
        with self._control:
            if self._stop_at is None:
                self._stop_at = time.monotonic()
            placed = list(self._placed)
        for p in placed:
            if p.state is None and not p.lost:
                with contextlib.suppress(Exception):  # a gone actor shows as lost in the run
                    getattr(p.actor.handle, what).remote()

    # -- the parent's side of one run (a thread: every Ray call here blocks) -------

    def _run_blocking(self) -> None:
        ray = self.cluster.connect()
        load = self.share.plan.load
        count = self.cluster.actor_count(self.workers)
        if not load.open_loop and load.slots:
            count = min(count, load.slots)  # never more workers than slots
        self.count = count
        actors = self.cluster.acquire(count, self.actor_class)
        self.cpus_per_actor = min(a.cpus for a in actors)
        try:
            self._start(ray, actors)
            self._wait(ray)
        except BaseException:
            for a in actors:
                self.cluster.discard(a)
            raise
        self.cluster.release([p.actor for p in self._placed if not p.lost])
        for p in self._placed:
            if p.lost:
                self.cluster.discard(p.actor)
        self._merge()

    def _start(self, ray: Any, actors: list[_Actor]) -> None:
        payloads = [
            payload_for(self.share, i, self.count, "on-the-actor" if self.events_file else None)
            for i in range(self.count)
        ]
        refs = [a.handle.prepare.remote(p) for a, p in zip(actors, payloads, strict=True)]
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=self.cluster.ready_timeout_s)
        if pending:
            missing = [i for i, r in enumerate(refs) if r in pending]
            raise WorkerError(
                f"Ray actors {missing} of {self.count} were not placed and ready within "
                f"{self.cluster.ready_timeout_s:g} s (cluster CPUs: "
                f"{ray.available_resources().get('CPU', 0):g} free of "
                f"{ray.cluster_resources().get('CPU', 0):g}); --llm-workers asked for "
                f"{self.count} actors of {self.cpus_per_actor:g} CPU each"
            )
        try:
            wheres = ray.get(refs, timeout=PING_TIMEOUT_S)
        except Exception as exc:
            raise WorkerError(f"a Ray load-generator actor did not start: {exc}") from exc
        node = _driver_node(ray)
        with self._control:
            self._placed = [
                _Placed(a, w, same_node=w["node_id"] == node)
                for a, w in zip(actors, wheres, strict=True)
            ]
        for p in self._placed:
            if not p.same_node:
                p.clock_offset_ns, p.clock_rtt_ns = _clock_offset(ray, p.actor.handle)
        # Before its first send an actor repeats the full collection it timed in prepare
        # (gc_pauses): leave it twice that, plus the "run" call's trip.
        slowest = max((p.clock_rtt_ns for p in self._placed), default=0)
        collect_s = max((float(p.where.get("collect_s", 0.0)) for p in self._placed), default=0.0)
        margin_ns = int((START_MARGIN_S + 2 * collect_s) * 1e9) + 4 * slowest
        wall, mono = time.time_ns(), time.monotonic_ns()
        t0_wall, t0_mono = wall + margin_ns, mono + margin_ns
        with self._control:
            stopped = self._stop_at is not None
            for p in self._placed:
                at = None if p.same_node else t0_wall + p.clock_offset_ns
                p.ref = p.actor.handle.run.remote(at, t0_mono)
        if stopped:  # Ctrl-C came while the actors were starting
            self.abort()

    def _wait(self, ray: Any) -> None:
        """Collect every actor's state; no wait is unbounded."""
        while True:
            running = [p for p in self._placed if p.state is None and not p.lost]
            if not running:
                return
            ready, _ = ray.wait([p.ref for p in running], num_returns=1, timeout=POLL_S)
            now = time.monotonic()
            for p in running:
                if p.ref in ready:
                    try:
                        p.state = ray.get(p.ref, timeout=PING_TIMEOUT_S)
                    except Exception as exc:  # any failure: the actor is lost
                        self._lose(p, _short(exc))
                    continue
                self._poll_progress(ray, p, now)
            if self._stop_at is not None and now - self._stop_at > self.drain_cap_s + 2 * (
                PING_TIMEOUT_S
            ):
                for p in self._placed:
                    if p.state is None and not p.lost:
                        self._lose(p, "did not return its result within the drain timeout")
                        self.cluster.discard(p.actor)

    def _poll_progress(self, ray: Any, p: _Placed, now: float) -> None:
        if p.progress_ref is not None:
            done, _ = ray.wait([p.progress_ref], timeout=0)
            if done:
                try:
                    issued, delivered = ray.get(p.progress_ref, timeout=PING_TIMEOUT_S)
                    if issued >= 0:
                        p.issued, p.delivered = issued, delivered
                except Exception as exc:  # the run() call's failure says more
                    if not p.lost and p.state is None:
                        self._lose(p, _short(exc))
                p.progress_ref = None
            elif now - p.progress_sent > PING_TIMEOUT_S:
                self._lose(p, f"did not answer for {PING_TIMEOUT_S:g} s (node gone?)")
                self.cluster.discard(p.actor)
                return
        if p.progress_ref is None and now - p.progress_sent >= PROGRESS_EVERY_S:
            p.progress_ref = p.actor.handle.progress.remote()
            p.progress_sent = now

    def _lose(self, p: _Placed, why: str) -> None:
        i = self._placed.index(p)
        in_flight = max(0, p.issued - p.delivered)
        p.lost = (
            f"Ray actor w{i} ({p.where['actor_id'][:12]}) on node {p.where['node_id'][:12]} "
            f"({p.where['host']}) was lost: {why}; its {p.issued} requests issued by its last "
            f"progress report ({in_flight} of them in flight) have no measurements and count "
            "as incomplete"
        )
        self.stop()  # the run is incomplete: the others stop issuing and drain

    def _merge(self) -> None:
        share = self.share
        lost = [p for p in self._placed if p.lost]
        if lost:
            share.book.settle(StopReason.WORKER_LOST, overrule=True)
        states = [p.state for p in self._placed if p.state is not None]
        merged = iter(merge_states(share, states))
        accumulators = {id(p): next(merged) for p in self._placed if p.state is not None}
        parts: list[Path] = []
        for i, p in enumerate(self._placed):
            if p.state is None:
                _count_lost(share, p.issued, p.lost)
            elif self.events_file is not None and p.state.get("events") is not None:
                part = self.events_file.with_name(f"{self.events_file.stem}.w{i}.sqlite")
                part.write_bytes(p.state["events"])
                parts.append(part)
            self.reports.append(
                WorkerReport(
                    name=f"w{i}",
                    backend="ray",
                    node_id=p.where["node_id"],
                    host=p.where["host"],
                    actor_id=p.where["actor_id"],
                    accumulator=accumulators.get(id(p)),
                    clock_offset_ns=None if p.same_node else p.clock_offset_ns,
                    clock_rtt_ns=None if p.same_node else p.clock_rtt_ns,
                    lost=p.lost,
                    cpus=p.actor.cpus,
                )
            )
        if self.events_file is not None:
            meta = share.event_log_meta(self.started_at)
            meta["summary"] = share.accumulator.summary()
            meta["workers"] = self.count
            meta["worker_backend"] = "ray"
            if lost:
                meta["lost_workers"] = [p.lost for p in lost]
            merge_event_logs(self.events_file, parts, meta)


def _count_lost(share: ShareRun, issued: int, message: str) -> None:
    """A lost actor's requests: issued, failed as incomplete (their measurements are gone)."""
    acc = share.accumulator
    kind = str(ErrorKind.INCOMPLETE)
    acc.issued += issued
    acc.failed += issued
    acc.incomplete += issued
    if issued:
        acc.errors[kind] += issued
        acc.error_samples.add(kind, None, message, count=issued)
    share.stats.tracked_issued += issued


def _free_cpus(ray: Any, wanted: float) -> float:
    """The cluster's free CPUs, after up to :data:`RESOURCE_SETTLE_S` for ``wanted`` of them
    (actors just killed, by this session or another, give theirs back a moment later)."""
    deadline = time.monotonic() + RESOURCE_SETTLE_S
    total = float(ray.cluster_resources().get("CPU", 0.0))
    while True:
        free = float(ray.available_resources().get("CPU", 0.0))
        if free >= min(wanted, total) or time.monotonic() >= deadline:
            return free
        time.sleep(0.1)


def _clock_offset(ray: Any, handle: Any) -> tuple[int, int]:
    """``(actor wall clock - parent wall clock, round trip)`` from the fastest of a few pings."""
    best: tuple[int, int] | None = None
    for _ in range(CLOCK_PINGS):
        before = time.time_ns()
        theirs = ray.get(handle.clock.remote(), timeout=PING_TIMEOUT_S)
        after = time.time_ns()
        rtt = after - before
        if best is None or rtt < best[1]:
            best = (theirs - (before + after) // 2, rtt)
    assert best is not None
    return best


def _driver_node(ray: Any) -> str | None:
    try:
        return str(ray.get_runtime_context().get_node_id())
    except Exception:  # Ray Client: the parent is on no node
        return None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    return f"{type(exc).__name__}: {first[:300]}"
