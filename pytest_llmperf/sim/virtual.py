"""Virtual time: the engine driven by an arrival schedule, without sleeping.

Capacity planning ("what p99 TTFT at 30 req/s?") needs minutes of load in
seconds of CPU. The driver is a discrete-event loop over a min-heap of
(time, seq, kind) events — arrival, enqueue (after the API overhead), engine
step — exactly the seed design's event queue; the engine is the same one the
real-time server runs. Arrivals follow the load generator's patterns: Poisson
or constant rate on an absolute schedule (open loop), or a fixed number of
requests in flight (closed loop, a new request when one completes). Same seed
gives byte-identical results. The command line's ``--virtual`` mode prints a run
(virtual_cli.py).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from .adapters import LoraSlots
from .engine import Engine, InvariantError
from .gc_control import collections_paused
from .profiles import Profile, load_profile
from .request import DROPPED, FINISHED, Request
from .summary import summarize
from .virtual_inputs import VirtualWorkload, adapter_mix, arrival_times, token_span

__all__ = ["VirtualResult", "arrival_times", "run_virtual"]


class _Event(IntEnum):
    """What happens at a point of virtual time (one handler each, :class:`_EventLoop`)."""

    ARRIVAL = 0  # a request reaches the server
    QUEUED = 1  # ... and, after its queue delay, the engine's wait queue
    STEP = 2  # the engine runs one step (engine profiles)
    FINISH = 3  # a request ends (the fixed profile)


def _plan_fixed(
    p: Profile, req: Request, t: float, active: int, lora: LoraSlots | None = None
) -> None:
    """Token times of a ``fixed``-profile request arriving at ``t`` with ``active`` in flight
    (an adapter request's costs from ``lora``, as the real-time fixed back end's)."""
    ttft = (p.ttft_ms + p.ttft_per_active_ms * active) / 1000.0
    itl = (p.itl_ms + p.itl_per_active_ms * active) / 1000.0
    if req.lora and lora is not None:
        if lora.admit(req.lora):
            ttft += p.lora_load_us / 1e6
        lora.release(req.lora)
        itl += p.lora_step_us / 1e6
    first = t + ttft
    req.enqueue_time = req.schedule_time = t
    req.cached_tokens = 0
    req.generated = req.max_tokens
    req.token_times = [first + i * itl for i in range(req.max_tokens)]
    req.first_token_time = first
    req.finish_time = req.token_times[-1]


@dataclass
class VirtualResult:
    """A virtual run: its requests, the engine afterwards, and the summary."""

    profile: Profile
    load: dict[str, Any]
    workload: dict[str, Any]
    seed: int
    requests: list[Request]
    engine: Engine
    dropped: int
    summary: dict[str, Any] = field(default_factory=dict)
    end_time: float = 0.0
    adapters: tuple[str, ...] = ()  # the LoRA adapters drawn (Request.lora k = adapters[k-1])
    by_model: dict[str, Any] = field(default_factory=dict)  # summary per model, with adapters
    fixed_loads: int = 0  # adapter loads of a fixed-profile run (no engine involved)

    def to_dict(self) -> dict[str, Any]:
        """The run in the JSON report's shape, plus engine statistics."""
        e = self.engine
        kv = e.kv
        out: dict[str, Any] = {
            "profile": self.profile.name,
            "model": self.profile.model,
            "seed": self.seed,
            "load": self.load,
            "workload": self.workload,
            **self.summary,
            "engine": {
                "simulated_s": round(self.end_time, 6),
                "steps": e.steps,
                "preemptions": e.scheduler.preemptions,
                "dropped_unservable": self.dropped,
                "max_running": e.max_running,
                "max_waiting": e.max_waiting,
                "prefix_cache_hit_rate": round(kv.hit_tokens / kv.query_tokens, 6)
                if kv.query_tokens
                else 0.0,
            },
        }
        if self.adapters:  # only then: a run without adapters keeps its exact output
            out["engine"]["lora_loads"] = e.scheduler.lora.total_loads + self.fixed_loads
            out["by_model"] = self.by_model
        return out


class _EventLoop:
    """Virtual time: a heap of ``(time, seq, event, request)``, one handler per event kind.

    ``seq`` breaks ties in the order events were scheduled, so a run is a pure
    function of its inputs. A closed loop (``closed``) replaces each request that
    ends (or is dropped) before ``duration`` with a new one at that instant. An
    open loop's arrivals, known in advance and already in order, wait in a queue of
    their own (``planned``) beside the heap, which stays a few events deep.
    """

    def __init__(
        self,
        prof: Profile,
        engine: Engine,
        workload: VirtualWorkload,
        duration: float,
        *,
        closed: bool,
    ) -> None:
        self.prof = prof
        self.fixed = prof.kind == "fixed"
        self.engine = engine
        self.latency = engine.latency
        self.workload = workload
        self.duration = duration
        self.closed = closed
        self.heap: list[tuple[float, int, _Event, Request | None]] = []
        self.planned: deque[tuple[float, int, _Event, Request | None]] = deque()
        self.seq = 0
        self.requests: list[Request] = []
        self.active = 0  # fixed profile: requests in flight
        self.lora = LoraSlots(prof.max_loras, prof.lora_step_us, prof.lora_load_us)
        self.clock = 0.0
        self.busy_until = 0.0
        self.step_pending = False
        self.dropped = 0

    def push(self, t: float, event: _Event, req: Request | None = None) -> None:
        heapq.heappush(self.heap, (t, self.seq, event, req))
        self.seq += 1

    def new_request(self, t: float) -> None:
        req = self.workload.make(len(self.requests), t)
        self.requests.append(req)
        self.push(t, _Event.ARRIVAL, req)

    def plan_request(self, t: float) -> None:
        """An open loop's next arrival (``t`` not before the previous one's)."""
        req = self.workload.make(len(self.requests), t)
        self.requests.append(req)
        self.planned.append((t, self.seq, _Event.ARRIVAL, req))
        self.seq += 1

    def run(self) -> None:
        """Handle events in time order until none is left (every request drained)."""
        heap, pop, engine, planned = self.heap, heapq.heappop, self.engine, self.planned
        # local, not an attribute: bound methods held by the loop would make it a cycle,
        # and a finished run's requests would wait for a full collection to be freed
        handlers: dict[_Event, Callable[[float, Request | None], None]] = {
            _Event.ARRIVAL: self.on_arrival,
            _Event.QUEUED: self.on_queued,
            _Event.STEP: self.on_step,
            _Event.FINISH: self.on_finish,
        }
        while heap or planned:
            # (time, seq) order across both: seq is unique, the rest is never compared
            if planned and (not heap or planned[0] < heap[0]):
                t, _, event, req = planned.popleft()
            else:
                t, _, event, req = pop(heap)
            if t < self.clock:
                raise InvariantError(f"clock went back: {t} < {self.clock}")
            self.clock = t
            handlers[event](t, req)
            if engine.has_work and not self.step_pending:
                raise InvariantError(f"idle at {t} while work waits")

    # -- one handler per event ---------------------------------------------------

    def on_arrival(self, t: float, req: Request | None) -> None:
        assert req is not None
        prof = self.prof
        if (
            req.prompt_len + req.max_tokens > prof.max_model_len
            if self.fixed
            else self.engine.unservable(req.prompt_len, req.max_tokens)
        ):
            req.state = DROPPED
            self.dropped += 1
            if self.closed and t < self.duration:
                self.new_request(t)
            return
        if self.fixed:
            _plan_fixed(prof, req, t, self.active, self.lora)
            self.active += 1
            self.engine.max_running = max(self.engine.max_running, self.active)
            self.push(req.finish_time, _Event.FINISH, req)
            return
        self.push(t + self.latency.queue_delay_s(req.prompt_len), _Event.QUEUED, req)

    def on_queued(self, t: float, req: Request | None) -> None:
        assert req is not None
        self.engine.enqueue(req, t)
        if not self.step_pending:
            self.step_pending = True
            # the engine is busy until the end of its last step, even if that step emptied it
            self.push(max(t, self.busy_until), _Event.STEP)

    def on_step(self, t: float, req: Request | None) -> None:
        engine = self.engine
        res = engine.step(t)
        self.busy_until = res.end
        if self.closed:
            for r in res.finished:
                if r.finish_time < self.duration:
                    self.new_request(r.finish_time)
        if engine.has_work:
            self.push(res.end, _Event.STEP)
        else:
            self.step_pending = False

    def on_finish(self, t: float, req: Request | None) -> None:  # fixed profile only
        assert req is not None
        self.active -= 1
        req.state = FINISHED
        if self.closed and t < self.duration:
            self.new_request(t)


def run_virtual(
    profile: str | Profile = "llama-3.1-8b-h100",
    *,
    load: str = "poisson",
    rate: float | None = None,
    concurrency: int | None = None,
    duration: float = 60.0,
    input_tokens: int | tuple[int, int] = 1000,
    output_tokens: int | tuple[int, int] = 128,
    shared_prefix: int = 0,
    seed: int = 0,
    debug: bool = False,
    adapters: dict[str, float] | None = None,
    lockstep: bool = True,
    **overrides: Any,
) -> VirtualResult:
    """Simulate a load pattern in virtual time and summarize it.

    ``load`` is ``poisson`` or ``constant`` (with ``rate`` req/s) or
    ``concurrency`` (with ``concurrency`` requests in flight); arrivals stop at
    ``duration`` simulated seconds and every admitted request is drained.
    A ``fixed`` profile gives each request its planned TTFT/ITL (with its load
    dependence); an engine profile runs the continuous-batching engine.
    ``adapters`` (``{name: weight}``, names from the profile's ``lora_adapters``, weights
    summing to at most 1; the rest is the base model) draws each request's model, and
    the result has a summary per model (``by_model``) and the adapter loads.
    ``lockstep=False`` steps every decoding request one by one (engine.py): slower,
    same result; the tests compare the two.
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile, **overrides)
    if isinstance(profile, Profile) and overrides:
        prof = prof.replace(**overrides)
    if prof.engines > 1:
        fleet = (
            f"prefill_replicas={prof.prefill_replicas}, decode_replicas={prof.decode_replicas}"
            if prof.disaggregated
            else f"replicas={prof.replicas}"
        )
        raise ValueError(
            f"profile {prof.name!r}: {fleet}: a virtual-time run drives one engine; a fleet "
            "(replicas behind the router, disaggregated pools) is served by the real-time "
            "simulator (SimServer, python -m pytest_llmperf.sim)"
        )
    if prof.slow_replica >= 0 and prof.slow_factor != 1.0:
        raise ValueError(
            f"profile {prof.name!r}: slow_replica={prof.slow_replica}: the slow-replica fault "
            "is served by the real-time simulator only"
        )
    inp, out = token_span(input_tokens), token_span(output_tokens)
    mix = adapter_mix(prof, adapters)
    # gc_control.py: automatic collections would only walk the growing heap again
    with collections_paused():
        size_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
        workload = VirtualWorkload(prof, inp, out, shared_prefix, size_rng, mix, seed)
        engine = Engine(prof, debug=debug, lockstep=lockstep, track_emitted=False)
        loop = _EventLoop(prof, engine, workload, duration, closed=load == "concurrency")
        if load in ("poisson", "constant"):
            if rate is None:
                raise ValueError(f"load {load!r} needs a rate")
            for t in arrival_times(load, rate, duration, seed):
                loop.plan_request(t)
            load_info: dict[str, Any] = {"pattern": load, "rate": rate, "duration": duration}
        elif load == "concurrency":
            if not concurrency or concurrency < 1:
                raise ValueError("load 'concurrency' needs concurrency >= 1")
            for _ in range(concurrency):
                loop.new_request(0.0)
            load_info = {"pattern": load, "concurrency": concurrency, "duration": duration}
        else:
            raise ValueError(f"unknown load pattern {load!r} (poisson, constant, concurrency)")
        loop.run()
        requests, dropped, clock = loop.requests, loop.dropped, loop.clock
        _check_conservation(requests, engine, dropped)
        result = VirtualResult(
            profile=prof,
            load=load_info,
            workload={
                "input_tokens": list(inp),
                "output_tokens": list(out),
                "shared_prefix": shared_prefix,
            },
            seed=seed,
            requests=requests,
            engine=engine,
            dropped=dropped,
            end_time=clock,
        )
        result.summary = summarize(requests, issued=len(requests), failed=dropped)
        if mix:
            result.workload["adapters"] = dict(mix)
            result.adapters = tuple(name for name, _ in mix)
            result.fixed_loads = loop.lora.total_loads
            for k, name in enumerate((prof.model, *result.adapters)):
                mine = [r for r in requests if r.lora == k]
                lost = sum(1 for r in mine if r.state == DROPPED)
                result.by_model[name] = summarize(mine, issued=len(mine), failed=lost)
        return result


def _check_conservation(requests: list[Request], engine: Engine, dropped: int) -> None:
    """Every request is accounted for and causally ordered (INV-1, INV-5)."""
    finished = sum(1 for r in requests if r.state == FINISHED)
    if finished + dropped + engine.num_running + engine.num_waiting != len(requests):
        raise InvariantError(
            f"request conservation: {len(requests)} issued != {finished} finished + "
            f"{dropped} dropped + "
            f"{engine.num_running} running + {engine.num_waiting} waiting"
        )
    if engine.num_running or engine.num_waiting:
        raise InvariantError("drained run left requests in the engine")
    for r in requests:
        if r.state == FINISHED and not (
            r.arrival <= r.enqueue_time <= r.schedule_time <= r.first_token_time <= r.finish_time
        ):
            raise InvariantError(f"causality violated by {r!r}")
    if engine.kv.allocated != 0:
        raise InvariantError(f"{engine.kv.allocated} KV blocks still allocated after drain")
