"""The engine: one continuous-batching iteration at a time, on a given clock.

``Engine.step(now)`` forms a batch (scheduler.py), prices it with the latency
model and applies its effects: prefill progress, one token per decoding
request, completions and the KV blocks they free. Tokens are stamped with the
step's end time. The engine owns no clock of its own — the virtual-time driver
(virtual.py) calls it from an event queue without sleeping, the real-time
driver (realtime.py) calls it and sleeps until each step's planned end — so
both modes run exactly the same model. Requests in plain decode are stepped in
aggregate while the whole batch fits a step (lockstep.py), with the same results
as stepping each (``lockstep=False``, which the tests compare it with).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .kv_cache import KVCache
from .latency_model import LatencyModel
from .profiles import Profile
from .request import ABORTED, FINISHED, RUNNING, WAITING, Request
from .scheduler import Scheduler

if TYPE_CHECKING:
    from .virtual_ledger import TokenLedger

__all__ = ["Engine", "InvariantError", "StepResult"]


def _run_seq(r: Request) -> int:
    """Sort key: admission order, the order a step handles its batch in."""
    return r.run_seq


class InvariantError(AssertionError):
    """An engine invariant does not hold (a simulator bug)."""


@dataclass
class StepResult:
    """What one step did. Token times are ``end + output delay``."""

    start: float
    end: float
    batch_size: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    emitted: list[Request] = field(default_factory=list)
    finished: list[Request] = field(default_factory=list)


class Engine:
    """Scheduler + KV cache + latency model, stepped by a driver."""

    def __init__(
        self,
        profile: Profile,
        *,
        debug: bool = False,
        lockstep: bool = True,
        track_emitted: bool = True,
        slow_factor: float = 1.0,
        ledger: TokenLedger | None = None,
    ) -> None:
        self.profile = profile
        self.kv = KVCache(profile.num_blocks, profile.block_size, profile.enable_prefix_caching)
        self.scheduler = Scheduler(profile, self.kv)
        # virtual_ledger.py: token times counted per step instead of listed per request
        # (a virtual run that keeps no requests); the lockstep decoders report there too
        self.ledger = ledger
        self.scheduler.lockstep.ledger = ledger
        self.latency = LatencyModel.from_profile(profile)
        self.debug = debug
        # lockstep=False steps every request one by one: the reference the lockstep
        # decoders (lockstep.py) are tested against, same results by construction
        self.lockstep_enabled = lockstep
        # StepResult.emitted is for drivers that stream tokens (real time); virtual
        # time only needs what finished
        self.track_emitted = track_emitted
        # slow.py: a step whose batch holds a slowed request takes this many times as long
        # (slowed requests never decode in lockstep, so each step lists them in its batch)
        self.slow_factor = slow_factor
        self.now = 0.0
        self.steps = 0
        self.completed = 0
        self.aborted = 0
        self.prompt_tokens_computed = 0
        self.generation_tokens = 0
        self.max_running = 0
        self.max_waiting = 0
        # debug: (start, end, batch size, running after, waiting after) of every step
        self.trace: list[tuple[float, float, int, int, int]] | None = [] if debug else None
        self._output_delay = self.latency.output_delay_s
        self._max_model_len = profile.max_model_len
        self._capacity = profile.kv_capacity_tokens

    # -- admission --------------------------------------------------------
    def unservable(self, prompt_len: int, max_tokens: int) -> str | None:
        """Why a request can never run (context or whole cache too small), else None."""
        total = prompt_len + max_tokens
        if total > self._max_model_len:
            return f"needs {total} tokens, more than max_model_len {self._max_model_len}"
        if total > self._capacity:
            return f"needs {total} tokens of KV cache, more than the whole cache ({self._capacity})"
        return None

    def enqueue(self, req: Request, now: float) -> None:
        """Put an admitted request in the wait queue."""
        req.enqueue_time = now
        req.state = WAITING
        self.scheduler.waiting.push(req)

    def abort(self, req: Request) -> None:
        """Drop a request wherever it is (client went away) and free its blocks."""
        sched = self.scheduler
        if req.state == RUNNING:
            if req.join >= 0:
                sched.lockstep.settle(req, self.steps)
            sched.remove(req)
            self.kv.release(req, final=True)
            if req.lora:
                sched.lora.release(req.lora)
        elif req.state == WAITING:
            sched.waiting.remove(req)
        else:
            return
        req.state = ABORTED
        self.aborted += 1

    # -- stepping ---------------------------------------------------------
    @property
    def has_work(self) -> bool:
        return bool(self.scheduler.running) or bool(self.scheduler.waiting)

    @property
    def num_running(self) -> int:
        return len(self.scheduler.running)

    @property
    def num_waiting(self) -> int:
        return len(self.scheduler.waiting)

    def step(self, now: float) -> StepResult:
        """Run one iteration starting at ``now``; returns its end time and effects."""
        if now < self.now:
            raise InvariantError(
                f"step at {now} starts before the previous step ended ({self.now})"
            )
        sched = self.scheduler
        lock = sched.lockstep
        tick = self.steps
        reqs, ns = sched.schedule(now, tick)
        steady = len(lock)  # the lockstep decoders: one decode token each
        if not reqs and not steady and sched.waiting and not sched.running:
            raise InvariantError("idle while work waits: nothing schedulable with an empty batch")
        prefill = decode = context = 0
        loras: set[int] | None = None
        for r, n in zip(reqs, ns, strict=True):
            c = r.num_computed
            if n == 1 and r.generated and c == r.prompt_len + r.generated - 1:
                decode += 1
            else:
                prefill += n
            context += c + n
            if r.lora:
                if loras is None:
                    loras = set()
                loras.add(r.lora)
        if steady:
            decode += steady
            context += lock.context(tick) + steady
            if lock.loras:
                loras = set(lock.loras) if loras is None else loras.union(lock.loras)
        step = self.latency.step_s(prefill, decode, context)
        if loras is not None or sched.lora.loads:  # adapters.py: their kernels and loads
            step += sched.lora.step_cost_us(loras or set()) * 1e-6
        if self.slow_factor != 1.0 and any(r.slow for r in reqs):
            step *= self.slow_factor
        end = now + step
        t_tok = end + self._output_delay
        lock.record(tick, t_tok)
        res = StepResult(now, end, len(reqs) + steady, prefill, decode)
        emitted: list[Request] = []
        finished = res.finished
        kv = self.kv
        ledger = self.ledger
        for r, n in zip(reqs, ns, strict=True):
            c = r.num_computed + n
            r.num_computed = c
            if c >= r.pub_at:
                kv.publish(r, c)
            if c == r.prompt_len + r.generated:
                g = r.generated + 1
                r.generated = g
                if ledger is None:
                    r.token_times.append(t_tok)
                else:
                    ledger.one(r, tick)
                emitted.append(r)
                if g == 1:
                    r.first_token_time = t_tok
                if g == r.max_tokens:
                    finished.append(r)
        if self.track_emitted:
            res.emitted = self._emitted(emitted) if steady else emitted
        if steady:
            ending = lock.finishing_at(tick)
            if ending:
                finished.extend(ending)
                if len(finished) > 1:  # in the batch's order, as one by one
                    finished.sort(key=_run_seq)
        if finished:
            for r in finished:
                kv.release(r, final=True)
                if r.lora:
                    sched.lora.release(r.lora)
                r.state = FINISHED
                r.finish_time = t_tok
                sched.remove(r)
            self.completed += len(finished)
        self.generation_tokens += len(emitted) + steady
        self.prompt_tokens_computed += prefill
        self.steps += 1
        self.now = end  # busy until the step ends
        if self.lockstep_enabled:
            for r in emitted:
                if r.state == RUNNING and not r.slow and lock.can_join(r):
                    lock.join(r, self.steps)
                    del sched.solo[r]
        if len(sched.running) > self.max_running:
            self.max_running = len(sched.running)
        if len(sched.waiting) > self.max_waiting:
            self.max_waiting = len(sched.waiting)
        if kv.allocated + kv.free != kv.total:
            raise InvariantError(
                f"KV blocks: allocated {kv.allocated} + free {kv.free} != {kv.total}"
            )
        if self.trace is not None:
            self.trace.append((now, end, res.batch_size, len(sched.running), len(sched.waiting)))
        if self.debug:
            self.check()
        return res

    def _emitted(self, solo: list[Request]) -> list[Request]:
        """Every request that emitted this step, in the batch's order: the lockstep
        decoders (all of them) and the ``solo`` ones that did."""
        if not solo:
            return [r for r in self.scheduler.running if r.join >= 0]
        also = set(solo)
        return [r for r in self.scheduler.running if r.join >= 0 or r in also]

    def check(self) -> None:
        """Full invariant check (debug mode and tests); brings the lockstep decoders'
        own counters up to date first (they step one by one until they rejoin)."""
        sched = self.scheduler
        sched.settle_lockstep(self.steps)
        running = sched.running
        if len(running) > sched.max_num_seqs:
            raise InvariantError(f"{len(running)} running > max_num_seqs {sched.max_num_seqs}")
        try:
            self.kv.check(running)
        except AssertionError as exc:
            raise InvariantError(f"KV cache inconsistent: {exc}") from exc
        for r in running:
            if r.state != RUNNING or r.blocks * self.kv.block_size < r.num_computed:
                raise InvariantError(f"bad running request {r!r}")
        for r in sched.waiting:
            if r.state != WAITING or r.blocks:
                raise InvariantError(f"bad waiting request {r!r}")
        lora = sched.lora
        using: dict[int, int] = {}
        for r in running:
            if r.lora:
                using[r.lora] = using.get(r.lora, 0) + 1
        held = {a: n for a, n in lora.users.items() if n}
        if using != held or not set(using) <= set(lora.resident):
            raise InvariantError(f"LoRA slots hold {held}, running requests use {using}")
        if len(lora.resident) > lora.max_loras:
            raise InvariantError(f"{len(lora.resident)} adapters resident > max_loras")
