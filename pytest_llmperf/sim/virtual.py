"""Virtual time: the engine driven by an arrival schedule, without sleeping.

Capacity planning ("what p99 TTFT at 30 req/s?") needs minutes of load in
seconds of CPU. The driver is a discrete-event loop over a min-heap of
(time, seq, kind) events — arrival, enqueue (after the API overhead), engine
step — exactly the seed design's event queue; the engine is the same one the
real-time server runs. Arrivals follow the load generator's patterns: Poisson
or constant rate on an absolute schedule (open loop), or a fixed number of
requests in flight (closed loop, a new request when one completes). Same seed
gives byte-identical results.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
import time
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

__all__ = ["VirtualResult", "arrival_times", "format_result", "run_cli", "run_virtual"]


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


def arrival_times(load: str, rate: float, duration: float, seed: int) -> list[float]:
    """Planned send times (s) in [0, duration): the load generator's own schedule.

    Same algorithm and seed use as ``pytest_llmperf.loadgen.plan.arrivals.arrival_offsets_ns``
    (Poisson gaps from ``random.Random(seed).expovariate(rate)``, constant at ``i / rate``,
    rounded to whole nanoseconds), so a virtual run sees exactly the arrivals a real run
    with the same seed would send. Kept here rather than imported so the simulator does
    not load the whole load generator; a test checks the two agree.
    """
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    out: list[float] = []
    if load == "constant":
        i = 0
        while (t := round(i * 1e9 / rate) / 1e9) < duration:
            out.append(t)
            i += 1
        return out
    if load != "poisson":
        raise ValueError(f"unknown open-loop pattern {load!r}")
    rng = random.Random(seed)
    offset = 0.0
    while (t := round(offset * 1e9) / 1e9) < duration:
        out.append(t)
        offset += rng.expovariate(rate)
    return out


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


class _Workload:
    """Seeded request sizes and prompt block hashes."""

    def __init__(
        self,
        profile: Profile,
        input_tokens: tuple[int, int],
        output_tokens: tuple[int, int],
        shared_prefix: int,
        rng: np.random.Generator,
        adapters: tuple[tuple[str, float], ...] = (),
        seed: int = 0,
    ) -> None:
        self.rng = rng
        # adapters: drawn from a generator of their own, so sizes stay as without them
        self.adapter_weights = [w for _, w in adapters]
        self.adapter_rng = random.Random(f"adapters:{seed}") if adapters else None
        self.inp = input_tokens
        self.out = output_tokens
        self.bs = profile.block_size
        self.hashing = profile.enable_prefix_caching
        shared_blocks = shared_prefix // self.bs
        h = 0
        prefix = []
        for i in range(shared_blocks):
            h = hash((h, -1, i))
            prefix.append(h)
        self.prefix = tuple(prefix)

    def make(self, rid: int, arrival: float) -> Request:
        lo, hi = self.inp
        p = int(self.rng.integers(lo, hi + 1)) if hi > lo else lo
        lo, hi = self.out
        o = int(self.rng.integers(lo, hi + 1)) if hi > lo else lo
        hashes: tuple[int, ...] = ()
        shared: tuple[int, ...] = ()
        if self.hashing:
            n_blocks = (p + o) // self.bs  # prompt and output blocks are both cacheable
            shared = self.prefix[: p // self.bs]
            h = shared[-1] if shared else 0
            own = []
            for i in range(len(shared), n_blocks):
                h = hash((h, rid, i))
                own.append(h)
            hashes = shared + tuple(own)
        lora = 0
        if self.adapter_rng is not None:
            x = self.adapter_rng.random()
            for k, w in enumerate(self.adapter_weights):
                if x < w:
                    lora = k + 1
                    break
                x -= w
        # blocks past the shared prefix are this request's alone (their hashes chain its rid)
        return Request(rid, arrival, p, o, hashes, lora=lora, own_from=len(shared))


def _span(tokens: int | tuple[int, int]) -> tuple[int, int]:
    """``n`` -> ``(n, n)``; a ``(min, max)`` pair as a tuple."""
    if isinstance(tokens, int):
        return (tokens, tokens)
    low, high = tokens
    return (low, high)


class _EventLoop:
    """Virtual time: a heap of ``(time, seq, event, request)``, one handler per event kind.

    ``seq`` breaks ties in the order events were scheduled, so a run is a pure
    function of its inputs. A closed loop (``closed``) replaces each request that
    ends (or is dropped) before ``duration`` with a new one at that instant. An
    open loop's arrivals, known in advance and already in order, wait in a queue of
    their own (``planned``) beside the heap, which stays a few events deep.
    """

    def __init__(
        self, prof: Profile, engine: Engine, workload: _Workload, duration: float, *, closed: bool
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
    inp, out = _span(input_tokens), _span(output_tokens)
    mix = _adapter_mix(prof, adapters)
    # gc_control.py: automatic collections would only walk the growing heap again
    with collections_paused():
        size_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
        workload = _Workload(prof, inp, out, shared_prefix, size_rng, mix, seed)
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


def _adapter_mix(prof: Profile, adapters: dict[str, float] | None) -> tuple[tuple[str, float], ...]:
    """``adapters`` checked against the profile (ValueError naming the problem)."""
    if not adapters:
        return ()
    for name, weight in adapters.items():
        if name not in prof.lora_adapters:
            raise ValueError(
                f"adapter {name!r} is not served by profile {prof.name!r} "
                f"(lora_adapters: {', '.join(prof.lora_adapters) or 'none'})"
            )
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise ValueError(f"adapter {name!r}: weight must be a number >= 0, got {weight!r}")
    if sum(adapters.values()) > 1 + 1e-9:
        raise ValueError(f"adapter weights sum to {sum(adapters.values()):g} > 1")
    order = {name: k for k, name in enumerate(prof.lora_adapters)}
    return tuple(sorted(((n, float(w)) for n, w in adapters.items()), key=lambda x: order[x[0]]))


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


def format_result(d: dict[str, Any]) -> str:
    """Human-readable table of a run (deterministic: no wall-clock values)."""
    load = d["load"]
    what = (
        f"rate {load['rate']:g} req/s" if "rate" in load else f"concurrency {load['concurrency']}"
    )
    lines = [
        f"profile {d['profile']} ({d['model']}), {load['pattern']} {what}, "
        f"duration {load['duration']:g} s, "
        f"seed {d['seed']}",
        f"workload: input {d['workload']['input_tokens']} "
        f"output {d['workload']['output_tokens']} tokens"
        + (
            f", shared prefix {d['workload']['shared_prefix']}"
            if d["workload"]["shared_prefix"]
            else ""
        ),
        "counts: " + ", ".join(f"{k} {v}" for k, v in d["counts"].items()),
        "",
        f"{'metric':<8}{'p50':>11}{'p90':>11}{'p95':>11}{'p99':>11}{'p99.9':>11}{'mean':>11}{'max':>11}",
    ]
    m = d["metrics"]
    for name in ("ttft", "tpot", "itl", "e2e"):
        s = m[name]
        cells = [s[k] for k in ("p50", "p90", "p95", "p99", "p99.9", "mean", "max")]
        lines.append(
            f"{name + ' ms':<8}"
            + "".join(f"{c:>11.3f}" if c is not None else f"{'-':>11}" for c in cells)
        )
    lines.append("")

    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    lines.append(
        f"request_throughput {num(m['request_throughput'], '.3f')} req/s, "
        f"output_throughput {num(m['output_throughput'], '.1f')} tok/s, "
        f"input_throughput {num(m['input_throughput'], '.1f')} tok/s, "
        f"error_rate {num(m['error_rate'], '.4f')}"
    )
    e = d["engine"]
    lines.append(
        f"engine: {e['steps']} steps over {e['simulated_s']:.3f} simulated s, "
        f"{e['preemptions']} preemptions, "
        f"max running {e['max_running']}, max waiting {e['max_waiting']}, "
        f"prefix cache hit rate {e['prefix_cache_hit_rate']:.3f}, dropped {e['dropped_unservable']}"
    )
    for name, s in d.get("by_model", {}).items():  # only with adapters
        ttft, tpot = s["metrics"]["ttft"], s["metrics"]["tpot"]
        lines.append(
            f"model {name}: completed {s['counts']['completed']}, "
            f"ttft p50 {num(ttft['p50'], '.3f')} p99 {num(ttft['p99'], '.3f')} ms, "
            f"tpot p50 {num(tpot['p50'], '.3f')} p99 {num(tpot['p99'], '.3f')} ms"
        )
    if "lora_loads" in e:
        lines.append(f"adapter loads {e['lora_loads']}")
    return "\n".join(lines)


def run_cli(args: argparse.Namespace, profile: Profile) -> int:
    """``--virtual`` mode of ``python -m pytest_llmperf.sim``."""
    if args.load in ("poisson", "constant") and not args.rate:
        print(f"error: --load {args.load} needs --rate", file=sys.stderr)
        return 2
    if args.load == "concurrency" and not args.concurrency:
        print("error: --load concurrency needs --concurrency", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        result = run_virtual(
            profile,
            load=args.load,
            rate=args.rate,
            concurrency=args.concurrency,
            duration=args.duration,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            shared_prefix=args.shared_prefix,
            seed=args.seed,
            adapters=args.adapters,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - t0
    d = result.to_dict()
    print(format_result(d))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(d, f, indent=2, sort_keys=True)
            f.write("\n")
    print(f"(wall time {wall:.2f} s)", file=sys.stderr)
    return 0
