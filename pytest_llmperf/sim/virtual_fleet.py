"""Virtual time for several replicas: the router and N engines on one event queue.

A fleet's capacity question ("does least-loaded routing keep p99 TTFT under
500 ms at 60 req/s on four replicas?") needs what virtual time gives one engine:
minutes of load in seconds of CPU, the same result for the same seed. This loop
is virtual_loop.py's with the profile's ``replicas`` engines behind its router
(router.py): each arrival is routed when it arrives, each engine steps on its own
clock (a step event per engine), and a request counts as in flight on its
replica from its arrival until its last token (a finish event), which is what
``least_loaded`` reads; ``prefix_aware`` reads each engine's prefix cache for the
prompt's blocks. The slow-replica fault (slow.py) slows its engine's steps as in
real time.

Virtual requests carry no conversation key, so ``session`` routing deals them
round robin. Disaggregated pools and the fixed-latency kind are served in real
time only (run_virtual refuses them). One engine without the fault keeps
virtual.py's own loop, unchanged.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

from .engine import Engine, InvariantError
from .profiles import Profile
from .request import DROPPED, FINISHED, Request
from .router import Router
from .slow import SlowRequests
from .virtual_inputs import VirtualWorkload
from .virtual_ledger import TokenLedger
from .virtual_loop import _Event, _EventLoop
from .virtual_stats import StreamedRuns

__all__ = [
    "FleetLoop",
    "check_fleet_conservation",
    "fleet_engine_stats",
    "fleet_engines",
    "replica_rows",
]


def fleet_engines(
    prof: Profile, *, debug: bool, lockstep: bool, ledgers: Sequence[TokenLedger] = ()
) -> list[Engine]:
    """The profile's replicas as engines (the slow one slowed; each with its token ledger
    from ``ledgers`` when the run streams its requests)."""
    return [
        Engine(
            prof,
            debug=debug,
            lockstep=lockstep,
            track_emitted=False,
            slow_factor=prof.slow_factor if i == prof.slow_replica else 1.0,
            ledger=ledgers[i] if ledgers else None,
        )
        for i in range(prof.replicas)
    ]


class FleetLoop(_EventLoop):
    """virtual.py's event loop over several engines behind the router."""

    def __init__(
        self,
        prof: Profile,
        engines: Sequence[Engine],
        workload: VirtualWorkload,
        duration: float,
        *,
        closed: bool,
        stream: StreamedRuns | None = None,
    ) -> None:
        super().__init__(prof, engines[0], workload, duration, closed=closed, stream=stream)
        n = len(engines)
        self.engines = list(engines)
        # (time, seq, event, request, engine): the engine an event is for (-1: none yet)
        self.events: list[tuple[float, int, _Event, Request | None, int]] = []
        self.busy = [0.0] * n  # each engine busy until the end of its last step
        self.pending = [False] * n  # a step of that engine is on the heap
        self.in_flight = [0] * n  # routed there and not finished: what least_loaded reads
        self.routed_to: dict[int, int] = {}  # request id -> its engine
        self.router = Router(n, prof.router, "", self)
        self.slow = (
            SlowRequests(prof.slow_factor, prof.slow_share)
            if 0 <= prof.slow_replica < n and prof.slow_factor != 1.0
            else None
        )

    # -- what the router reads (router.ReplicaView) ---------------------------------
    def loads(self) -> list[int]:
        return list(self.in_flight)

    def cached_blocks(self, replica: int, hashes: Sequence[int]) -> int:
        return self.engines[replica].kv.cached_prefix(hashes)

    # -- the loop ---------------------------------------------------------------
    def push(self, t: float, event: _Event, req: Request | None = None) -> None:
        self.push_on(t, event, req, -1)  # a closed loop's new arrival: not routed yet

    def push_on(self, t: float, event: _Event, req: Request | None, engine: int) -> None:
        heapq.heappush(self.events, (t, self.seq, event, req, engine))
        self.seq += 1

    def run(self) -> None:
        heap, pop, times = self.events, heapq.heappop, self.plan_times
        handlers: dict[_Event, Callable[[float, Request | None, int], None]] = {
            _Event.ARRIVAL: self.on_arrival_at,
            _Event.QUEUED: self.on_queued_at,
            _Event.STEP: self.on_step_at,
            _Event.FINISH: self.on_finish_at,
        }
        i, n = 0, len(times)
        while heap or i < n:
            if i < n and (not heap or (times[i], self.plan_seq + i) < heap[0][:2]):
                t, event, engine = times[i], _Event.ARRIVAL, -1
                req: Request | None = self.make(t)
                i += 1
            else:
                t, _, event, req, engine = pop(heap)
            if t < self.clock:
                raise InvariantError(f"clock went back: {t} < {self.clock}")
            self.clock = t
            handlers[event](t, req, engine)
        for i, e in enumerate(self.engines):
            if e.has_work:
                raise InvariantError(f"replica {i} idle at the end while work waits")

    def on_arrival_at(self, t: float, req: Request | None, _engine: int) -> None:
        assert req is not None
        if self.engine.unservable(req.prompt_len, req.max_tokens):
            req.state = DROPPED
            self.dropped += 1
            if self.stream is not None:
                self.stream.drop(req)
            if self.closed and t < self.duration:
                self.new_request(t)
            return
        hashes = req.block_hashes[: req.prompt_len // self.prof.block_size]
        i = self.router.route({}, None, hashes)
        self.routed_to[req.rid] = i
        self.in_flight[i] += 1
        if self.slow is not None and i == self.prof.slow_replica:
            req.slow = self.slow.next()
        self.push_on(t + self.latency.queue_delay_s(req.prompt_len), _Event.QUEUED, req, i)

    def on_queued_at(self, t: float, req: Request | None, i: int) -> None:
        assert req is not None
        self.engines[i].enqueue(req, t)
        if not self.pending[i]:
            self.pending[i] = True
            self.push_on(max(t, self.busy[i]), _Event.STEP, None, i)

    def on_step_at(self, t: float, _req: Request | None, i: int) -> None:
        engine = self.engines[i]
        res = engine.step(t)
        self.busy[i] = res.end
        for r in res.finished:
            if self.stream is not None:
                self.stream.finish(r)
            self.push_on(r.finish_time, _Event.FINISH, r, i)
        if engine.has_work:
            self.push_on(res.end, _Event.STEP, None, i)
        else:
            self.pending[i] = False

    def on_finish_at(self, t: float, req: Request | None, i: int) -> None:
        assert req is not None
        self.in_flight[i] -= 1
        if self.closed and t < self.duration:
            self.new_request(t)


def fleet_engine_stats(engines: Sequence[Engine], end_time: float, dropped: int) -> dict[str, Any]:
    """A fleet run's ``engine`` statistics: summed over the replicas (peaks: the highest)."""
    hits = sum(e.kv.hit_tokens for e in engines)
    queries = sum(e.kv.query_tokens for e in engines)
    return {
        "simulated_s": round(end_time, 6),
        "steps": sum(e.steps for e in engines),
        "preemptions": sum(e.scheduler.preemptions for e in engines),
        "dropped_unservable": dropped,
        "max_running": max(e.max_running for e in engines),
        "max_waiting": max(e.max_waiting for e in engines),
        "prefix_cache_hit_rate": round(hits / queries, 6) if queries else 0.0,
    }


def replica_rows(engines: Sequence[Engine], routed: Sequence[int]) -> list[dict[str, Any]]:
    """Each replica's own figures (``replicas`` in a fleet run's output)."""
    return [
        {
            "name": str(i),
            "requests": routed[i],
            "steps": e.steps,
            "preemptions": e.scheduler.preemptions,
            "max_running": e.max_running,
            "prefix_cache_hit_rate": round(e.kv.hit_tokens / e.kv.query_tokens, 6)
            if e.kv.query_tokens
            else 0.0,
        }
        for i, e in enumerate(engines)
    ]


def check_fleet_conservation(loop: FleetLoop) -> None:
    """Every request accounted for, each engine drained (virtual.py's checks, per engine;
    a streamed run's requests were checked as they ended, virtual_stats.py)."""
    requests = loop.requests
    if loop.stream is not None:
        finished = loop.stream.finished
    else:
        finished = sum(1 for r in requests if r.state == FINISHED)
    if finished + loop.dropped != loop.made:
        raise InvariantError(
            f"request conservation: {loop.made} issued != {finished} finished + "
            f"{loop.dropped} dropped"
        )
    for i, e in enumerate(loop.engines):
        if e.num_running or e.num_waiting or e.kv.allocated:
            raise InvariantError(f"replica {i}: a drained run left work or KV blocks behind")
    if any(loop.in_flight):
        raise InvariantError(f"requests still in flight after the drain: {loop.in_flight}")
    for r in requests:
        if r.state == FINISHED and not (
            r.arrival <= r.enqueue_time <= r.schedule_time <= r.first_token_time <= r.finish_time
        ):
            raise InvariantError(f"causality violated by {r!r}")
