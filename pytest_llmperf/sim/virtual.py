"""Virtual time: the engine driven by an arrival schedule, without sleeping.

Capacity planning ("what p99 TTFT at 30 req/s?") needs minutes of load in
seconds of CPU. The driver is a discrete-event loop over a min-heap of
(time, seq, kind) events — arrival, enqueue (after the API overhead), engine
step — exactly the seed design's event queue (virtual_loop.py; several replicas
behind the router: virtual_fleet.py); the engine is the same one the
real-time server runs. Arrivals follow the load generator's patterns: Poisson
or constant rate on an absolute schedule (open loop), or a fixed number of
requests in flight (closed loop, a new request when one completes). Same seed
gives byte-identical results. The command line's ``--virtual`` mode prints a run
(virtual_cli.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .engine import Engine, InvariantError
from .gc_control import collections_paused
from .gpu_model import refuse_in_virtual_time
from .profiles import Profile, load_profile
from .request import DROPPED, FINISHED, Request
from .summary import summarize
from .virtual_inputs import VirtualWorkload, adapter_mix, arrival_times, token_span
from .virtual_ledger import TokenLedger
from .virtual_loop import _EventLoop
from .virtual_stats import StreamedRuns

if TYPE_CHECKING:
    from .virtual_fleet import FleetLoop

__all__ = ["VirtualResult", "arrival_times", "run_virtual"]


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
    # several replicas (virtual_fleet.py): every engine, and the requests routed to each
    engines: list[Engine] = field(default_factory=list)
    routed: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The run in the JSON report's shape, plus engine statistics (several replicas:
        summed over them, and each replica's own under ``replicas``)."""
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
        if len(self.engines) > 1:  # virtual_fleet.py: summed over the replicas, and each's
            from .virtual_fleet import fleet_engine_stats, replica_rows

            out["engine"] = fleet_engine_stats(self.engines, self.end_time, self.dropped)
            out["router"] = self.profile.router
            out["replicas"] = replica_rows(self.engines, self.routed)
        if self.adapters:  # only then: a run without adapters keeps its exact output
            loads = sum(x.scheduler.lora.total_loads for x in self.engines or [e])
            out["engine"]["lora_loads"] = loads + self.fixed_loads
            out["by_model"] = self.by_model
        return out


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
    keep_requests: bool = True,
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
    ``keep_requests=False`` keeps no request (``requests`` is empty): each one's figures
    are taken as it ends (virtual_stats.py) and token times are counted per engine step
    (virtual_ledger.py), so memory does not grow with the run's tokens (an hour at
    100 req/s: 46 million of them) and the loop does less; the summary is the same (the
    ITL mean computed exactly, see summary.weighted_latency_stats). The command line's
    ``--virtual`` mode runs so.
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile, **overrides)
    if isinstance(profile, Profile) and overrides:
        prof = prof.replace(**overrides)
    refuse_in_virtual_time(prof)  # gpu_model.py: no page to serve the GPUs on
    fleet = prof.engines > 1 or (prof.slow_replica >= 0 and prof.slow_factor != 1.0)
    if fleet and (prof.disaggregated or prof.kind == "fixed"):
        what = (
            f"prefill_replicas={prof.prefill_replicas}, decode_replicas={prof.decode_replicas}"
            if prof.disaggregated
            else f"kind=fixed with replicas={prof.replicas}, slow_replica={prof.slow_replica}"
        )
        raise ValueError(
            f"profile {prof.name!r}: {what}: a virtual-time run drives engine replicas "
            "behind the router; disaggregated pools and fixed-latency replicas are served "
            "by the real-time simulator (SimServer, python -m pytest_llmperf.sim)"
        )
    inp, out = token_span(input_tokens), token_span(output_tokens)
    mix = adapter_mix(prof, adapters)
    # gc_control.py: automatic collections would only walk the growing heap again
    with collections_paused():
        size_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
        workload = VirtualWorkload(prof, inp, out, shared_prefix, size_rng, mix, seed)
        closed = load == "concurrency"
        models = 1 + len(mix)
        stream = None if keep_requests else StreamedRuns(models)
        ledgers: list[TokenLedger] = []
        fleet_loop: FleetLoop | None = None
        if fleet:  # virtual_fleet.py: the replicas behind the router
            from .virtual_fleet import FleetLoop, fleet_engines

            if stream is not None:
                ledgers = [TokenLedger(models) for _ in range(prof.replicas)]
            engines = fleet_engines(prof, debug=debug, lockstep=lockstep, ledgers=ledgers)
            engine = engines[0]
            fleet_loop = FleetLoop(prof, engines, workload, duration, closed=closed, stream=stream)
            loop: _EventLoop = fleet_loop
        else:
            engines = []
            if stream is not None and prof.kind != "fixed":
                ledgers = [TokenLedger(models)]
            engine = Engine(
                prof,
                debug=debug,
                lockstep=lockstep,
                track_emitted=False,
                ledger=ledgers[0] if ledgers else None,
            )
            loop = _EventLoop(prof, engine, workload, duration, closed=closed, stream=stream)
            if loop.fixed_ledger is not None:
                ledgers = [loop.fixed_ledger]
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
        if fleet_loop is not None:
            from .virtual_fleet import check_fleet_conservation

            check_fleet_conservation(fleet_loop)
        elif stream is not None:
            _check_drained(engine, stream.finished + dropped, loop.made)
        else:
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
            engines=engines,
            routed=list(fleet_loop.router.routed) if fleet_loop is not None else [],
        )
        if stream is not None:
            result.summary = stream.summary(ledgers)
        else:
            result.summary = summarize(requests, issued=len(requests), failed=dropped)
        if mix:
            result.workload["adapters"] = dict(mix)
            result.adapters = tuple(name for name, _ in mix)
            result.fixed_loads = loop.lora.total_loads
            for k, name in enumerate((prof.model, *result.adapters)):
                if stream is not None:
                    result.by_model[name] = stream.summary(ledgers, model=k)
                    continue
                mine = [r for r in requests if r.lora == k]
                lost = sum(1 for r in mine if r.state == DROPPED)
                result.by_model[name] = summarize(mine, issued=len(mine), failed=lost)
        return result


def _check_drained(engine: Engine, ended: int, issued: int) -> None:
    """A streamed run's INV-1: every request ended (each checked for causality as it did,
    virtual_stats.py) and the engine is empty."""
    if ended != issued or engine.num_running or engine.num_waiting:
        raise InvariantError(
            f"request conservation: {issued} issued != {ended} finished or dropped + "
            f"{engine.num_running} running + {engine.num_waiting} waiting"
        )
    if engine.kv.allocated != 0:
        raise InvariantError(f"{engine.kv.allocated} KV blocks still allocated after drain")


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
