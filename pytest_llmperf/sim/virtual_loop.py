"""The virtual-time event loop: one engine driven by a heap of events, without sleeping.

A discrete-event loop over a min-heap of (time, seq, kind) events — arrival,
enqueue (after the API overhead), engine step, and a fixed profile's finish —
exactly the seed design's event queue, around the same engine the real-time
server runs. virtual.py feeds it a load pattern and summarises the run;
virtual_fleet.py extends it to several replicas behind the router.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable
from enum import IntEnum
from itertools import pairwise

from .adapters import LoraSlots
from .engine import Engine, InvariantError
from .profiles import Profile
from .request import DROPPED, FINISHED, Request
from .virtual_inputs import VirtualWorkload
from .virtual_ledger import TokenLedger
from .virtual_stats import StreamedRuns

__all__: list[str] = []  # the loop's names are private to the virtual-time modules


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


class _EventLoop:
    """Virtual time: a heap of ``(time, seq, event, request)``, one handler per event kind.

    ``seq`` breaks ties in the order events were scheduled, so a run is a pure
    function of its inputs. A closed loop (``closed``) replaces each request that
    ends (or is dropped) before ``duration`` with a new one at that instant. An
    open loop's arrivals, known in advance and already in order, wait as bare times
    beside the heap (``plan_times``; arrival ``i`` has ``seq`` ``plan_seq + i``), which
    stays a few events deep; each request is made when it arrives, in the same order
    and with the same draws as if made in advance, so the requests yet to come cost
    a float each.

    ``stream``: requests are not kept (``requests`` stays empty): each is handed to
    the stream when it ends, finished or dropped, and the engines count their token
    times in ledgers (virtual_ledger.py; ``fixed_ledger`` for a fixed profile's gaps).
    """

    def __init__(
        self,
        prof: Profile,
        engine: Engine,
        workload: VirtualWorkload,
        duration: float,
        *,
        closed: bool,
        stream: StreamedRuns | None = None,
    ) -> None:
        self.prof = prof
        self.fixed = prof.kind == "fixed"
        self.engine = engine
        self.latency = engine.latency
        self.workload = workload
        self.duration = duration
        self.closed = closed
        self.heap: list[tuple[float, int, _Event, Request | None]] = []
        self.plan_times = array("d")
        self.plan_seq = 0
        self.seq = 0
        self.made = 0  # requests made so far (the next one's id)
        self.stream = stream
        self.requests: list[Request] = []  # every request made, unless streamed
        models = 1 + len(workload.adapter_weights)
        self.fixed_ledger = TokenLedger(models) if stream is not None and self.fixed else None
        self.active = 0  # fixed profile: requests in flight
        self.lora = LoraSlots(prof.max_loras, prof.lora_step_us, prof.lora_load_us)
        self.clock = 0.0
        self.busy_until = 0.0
        self.step_pending = False
        self.dropped = 0

    def push(self, t: float, event: _Event, req: Request | None = None) -> None:
        heapq.heappush(self.heap, (t, self.seq, event, req))
        self.seq += 1

    def make(self, t: float) -> Request:
        """The next request, sent at ``t`` (kept, or counted by the stream)."""
        req = self.workload.make(self.made, t)
        self.made += 1
        if self.stream is None:
            self.requests.append(req)
        else:
            self.stream.issue(req)
        return req

    def new_request(self, t: float) -> None:
        self.push(t, _Event.ARRIVAL, self.make(t))

    def plan_request(self, t: float) -> None:
        """An open loop's next arrival (``t`` not before the previous one's), planned
        before the run starts: its request is made when it arrives."""
        if not self.plan_times:
            self.plan_seq = self.seq
        elif self.seq != self.plan_seq + len(self.plan_times):
            raise InvariantError("arrivals are planned together, before any other event")
        self.plan_times.append(t)
        self.seq += 1

    def run(self) -> None:
        """Handle events in time order until none is left (every request drained)."""
        heap, pop, engine, times = self.heap, heapq.heappop, self.engine, self.plan_times
        # local, not an attribute: bound methods held by the loop would make it a cycle,
        # and a finished run's requests would wait for a full collection to be freed
        handlers: dict[_Event, Callable[[float, Request | None], None]] = {
            _Event.ARRIVAL: self.on_arrival,
            _Event.QUEUED: self.on_queued,
            _Event.STEP: self.on_step,
            _Event.FINISH: self.on_finish,
        }
        i, n = 0, len(times)
        while heap or i < n:
            # (time, seq) order across both: seq is unique, the rest is never compared
            if i < n and (not heap or (times[i], self.plan_seq + i) < heap[0][:2]):
                t, event = times[i], _Event.ARRIVAL
                req: Request | None = self.make(t)
                i += 1
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
            if self.stream is not None:
                self.stream.drop(req)
            if self.closed and t < self.duration:
                self.new_request(t)
            return
        if self.fixed:
            _plan_fixed(prof, req, t, self.active, self.lora)
            if self.fixed_ledger is not None:
                self.fixed_ledger.odd[req.lora].extend(b - a for a, b in pairwise(req.token_times))
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
        if self.stream is not None:
            for r in res.finished:
                self.stream.finish(r)
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
        if self.stream is not None:
            self.stream.finish(req)
        if self.closed and t < self.duration:
            self.new_request(t)
