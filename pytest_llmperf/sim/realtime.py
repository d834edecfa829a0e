"""Real time: the engine behind the HTTP server, one step per planned interval.

The engine forms and prices a step at simulated time ``t`` and the step's
tokens are due at its planned end (wall time = start + t / speedup). The next
step starts at the previous planned end, not at "now", so scheduling jitter
never accumulates into drift. When the engine has no work it waits for an
arrival and restarts the clock there (work-conserving, never idle while work
waits).

Everything that is due is done by one synchronous method, :meth:`EngineBackend.
_advance`: write each of the step's tokens (a stream with a writer attached
has its chunk ready-made and the fan-out writes it to the socket right there,
see server.py: one callback fans the whole step out, no coroutine resumed per
token), then plan
the next step. A timer task calls it at each planned instant (sleeping
precisely, see clock.py), and the HTTP handlers call :meth:`EngineBackend.poll`
between their pieces of work, so a burst of arriving requests that holds the
event loop for milliseconds does not hold back tokens that fall due meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable

from .clock import ENGINE_COARSE_S, ENGINE_SPIN_S, sleep_until
from .engine import Engine, StepResult
from .gc_control import GcControl
from .profiles import Profile
from .request import ABORTED, NEW, Request
from .slow import SlowRequests
from .streams import BackendStats, ServedTimes, Submission, TokenWriter

__all__ = ["EngineBackend", "EngineStream"]

_INF = math.inf
STEP_BLOCK_SHARE = 0.3  # of a step's wait, at most, spent blocking before it


class EngineStream:
    """Token times of one engine request, delivered as the engine emits them."""

    def __init__(self, backend: EngineBackend, req: Request) -> None:
        self._backend = backend
        self.req = req
        self._times: deque[float] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._remaining = req.max_tokens
        self._closed = False
        self.writer: TokenWriter | None = None
        self._on_fail: Callable[[BaseException], None] | None = None
        self._failed: BaseException | None = None

    @property
    def cached_tokens(self) -> int:
        return max(0, self.req.cached_tokens)

    def attach_writer(self, writer: TokenWriter, fail: Callable[[BaseException], None]) -> None:
        """From now on the engine's fan-out writes each token's chunk itself, through
        ``writer`` (tokens already delivered are written at once); ``next_token`` is no
        longer used. ``fail`` is called instead if the engine dies."""
        if self._failed is not None:
            fail(self._failed)
            return
        clock = time.monotonic
        while self._times and writer.frame is not None:
            self._remaining -= 1
            planned = self._times.popleft()
            now = clock()
            writer.tr.write(writer.frame)
            writer.wrote(planned, now)
        self.writer = writer
        self._on_fail = fail

    def fail(self, exc: BaseException) -> None:
        """The engine died: wake the handler with ``exc``."""
        self._failed = exc
        w = self._waiter
        if w is not None and not w.done():
            w.set_exception(exc)
        if self._on_fail is not None:
            self._on_fail(exc)

    def deliver(self, when: float) -> None:
        """Called by the engine's fan-out for each token (loop time), if no writer."""
        self._times.append(when)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def next_token(self) -> float | None:
        if self._remaining == 0:
            self.close()
            return None
        while not self._times:
            if self._failed is not None:
                raise self._failed
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
            self._waiter = None
        self._remaining -= 1
        when = self._times.popleft()
        await sleep_until(when, self._backend.timing)  # handed over when due: no wait
        return when

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.writer = None
            self._backend.release(self.req)

    def served_times(self) -> ServedTimes | None:
        """The engine's own times of the request, as vLLM's engine core stamps them: queued
        (after the API overhead alpha0/alpha1), first scheduled (preemptions ignored), and
        the ends of the steps that produced its first and last token (before the output
        processing alpha2, which vLLM's frontend does after those stamps); in loop time."""
        req = self.req
        if req.finish_time < 0 or req.schedule_time < 0:
            return None
        wall = self._backend._wall
        out = self._backend._out_delay
        queued = wall(req.enqueue_time)
        # a request enqueued just as the step that schedules it was planned: not before it
        scheduled = max(queued, wall(req.schedule_time))
        first = max(scheduled, wall(req.first_token_time - out))
        return ServedTimes(queued, scheduled, first, max(first, wall(req.finish_time - out)))


class EngineBackend:
    """Back end for ``kind: engine`` profiles, in real time."""

    def __init__(
        self,
        profile: Profile,
        *,
        seed: int = 0,
        speedup: float = 1.0,
        timing: str = "block",
        gc_control: GcControl | None = None,
        slow: SlowRequests | None = None,
    ) -> None:
        self.profile = profile
        self.timing = timing
        self.slow = slow  # the slow-replica fault (slow.py), on this replica only
        self.engine = Engine(profile, slow_factor=slow.factor if slow is not None else 1.0)
        self.in_flight = 0  # submitted and not yet released: what least_loaded reads
        self.speedup = speedup
        self.seed = seed
        self.gc = gc_control
        self._t0 = 0.0
        self._sim_now = 0.0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._next_rid = 0
        self.failure: BaseException | None = None
        self.step_log: list[tuple[float, float, int]] | None = None  # (start, end, batch)
        self._out_delay = self.engine.latency.output_delay_s
        self._step: StepResult | None = None  # the step in flight
        self._step_wall = _INF  # its planned end, loop time
        self._outbox: deque[tuple[float, list[Request]]] = deque()  # alpha2 > 0: due later
        self.due = _INF  # loop time of the next thing due

    # -- time mapping ------------------------------------------------------
    def _wall(self, sim_t: float) -> float:
        return self._t0 + sim_t / self.speedup

    def _sim(self, wall_t: float) -> float:
        return (wall_t - self._t0) * self.speedup

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._t0 = loop.time()
        self._wake = asyncio.Event()
        self._task = loop.create_task(self._run(), name="sim-engine")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def submit(self, sub: Submission) -> EngineStream:
        if self.failure is not None:
            raise RuntimeError(f"simulator engine failed: {self.failure!r}")
        self.poll()
        loop = asyncio.get_running_loop()
        now_sim = self._sim(loop.time())
        req = Request(
            self._next_rid,
            now_sim,
            sub.prompt_tokens,
            sub.output_tokens,
            sub.block_hashes,
            sub.priority,
            lora=sub.lora,
        )
        self._next_rid += 1
        if self.slow is not None:
            req.slow = self.slow.next()
        self.in_flight += 1
        stream = EngineStream(self, req)
        req.owner = stream
        delay = self.engine.latency.queue_delay_s(sub.prompt_tokens) / self.speedup
        if delay > 0:
            loop.call_later(delay, self._enqueue, req)
        else:
            self._enqueue(req)
        return stream

    def _enqueue(self, req: Request) -> None:
        if req.state != NEW or self.failure is not None:  # aborted before it reached the queue
            return
        self.poll()
        now_sim = max(self._sim(time.monotonic()), req.arrival)
        self.engine.enqueue(req, now_sim)
        if self._step is None:  # idle: the clock restarts at this arrival
            self._sim_now = max(self._sim_now, now_sim)
            self._guard(self._plan)
            assert self._wake is not None
            self._wake.set()

    def release(self, req: Request) -> None:
        """The handler is done with ``req``: abort it if it is still in the engine."""
        self.in_flight -= 1
        if req.state == NEW:
            req.state = ABORTED
        else:
            self.engine.abort(req)

    def stats(self) -> BackendStats:
        e = self.engine
        return BackendStats(
            running=e.num_running,
            waiting=e.num_waiting,
            kv_usage=e.kv.usage,
            preemptions=e.scheduler.preemptions,
            prefix_hit_tokens=e.kv.hit_tokens,
            prefix_query_tokens=e.kv.query_tokens,
        )

    # -- stepping ----------------------------------------------------------
    def poll(self) -> None:
        """Do whatever is due by now. Cheap when nothing is; safe to call anywhere
        outside a socket write (the handlers call it between their steps)."""
        if time.monotonic() >= self.due:
            self._guard(self._advance)

    def _plan(self) -> None:
        """Form and price the next step (if there is work), starting at ``_sim_now``."""
        engine = self.engine
        if not engine.has_work:
            self._step = None
            self._step_wall = _INF
        else:
            res = engine.step(self._sim_now)
            if self.step_log is not None:
                self.step_log.append((res.start, res.end, res.batch_size))
            self._step = res
            self._step_wall = self._wall(res.end)
        box = self._outbox
        self.due = min(self._step_wall, box[0][0]) if box else self._step_wall

    def _advance(self) -> None:
        """Emit every step (and alpha2 delivery) due by now, planning the next steps.

        If the process has fallen behind, steps run back to back until caught up."""
        clock = time.monotonic
        box = self._outbox
        emitted_any = False
        while True:
            now = clock()
            res = self._step
            when = self._step_wall
            if res is not None and when <= now and (not box or when <= box[0][0]):
                self._sim_now = res.end
                if self._out_delay > 0:  # output processing (alpha2) runs beside the next step
                    box.append((self._wall(res.end + self._out_delay), res.emitted))
                else:
                    _fan_out(when, res.emitted)
                    emitted_any = True
                self._plan()
            elif box and box[0][0] <= now:
                when, emitted = box.popleft()
                _fan_out(when, emitted)
                emitted_any = True
                self.due = min(self._step_wall, box[0][0]) if box else self._step_wall
            else:
                break
        if emitted_any and self.gc is not None:
            if self.due == _INF:
                self.gc.idle()
            else:
                self.gc.after_emit(self.due - clock())

    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:  # a simulator bug: fail loudly, never hang the clients
            self._die(exc)

    def _die(self, exc: BaseException) -> None:
        if self.failure is not None:
            return
        traceback.print_exc(file=sys.stderr)
        self.failure = exc
        self._step = None
        self._outbox.clear()
        self.due = _INF
        err = RuntimeError(f"simulator engine failed: {exc!r}")
        sched = self.engine.scheduler
        for r in [*sched.running, *sched.waiting]:
            r.owner.fail(err)

    async def _run(self) -> None:
        wake = self._wake
        assert wake is not None
        timing = self.timing
        while self.failure is None:
            due = self.due
            if due == _INF:
                wake.clear()
                await wake.wait()
                continue
            # Block (no I/O served) for the last stretch before the step: the handlers
            # poll, but code outside them (aiohttp's) could otherwise hold the step back.
            # At most 30% of the step, though: an arriving request needs several loop
            # passes before it reaches the engine, and a step-long block per pass added
            # ~7 ms to TTFT on the tiny profile's 2 ms steps.
            coarse = min(ENGINE_COARSE_S, STEP_BLOCK_SHARE * (due - time.monotonic()))
            await sleep_until(due, timing, coarse, ENGINE_SPIN_S, serve_io=False)
            self._guard(self._advance)
            # A step shorter than its block never reaches an await above: give the loop
            # one pass per step, or arriving requests and their handlers would starve
            # until the batch drains (measured: TTFT +70 ms at concurrency 2, tiny).
            await asyncio.sleep(0)


def _fan_out(when: float, emitted: list[Request]) -> None:
    """Emit one step's tokens, planned at loop time ``when``.

    Streams with a writer get their ready-made chunk written first, back to back,
    each timestamped at its write; the bookkeeping (metrics, next frame, waking a
    finished handler) follows once the whole step is out. Other streams get the
    time handed over (their handler awaits it)."""
    clock = time.monotonic
    written: list[tuple[TokenWriter, float]] = []
    for r in emitted:
        if r.state == ABORTED:
            continue
        stream = r.owner
        w = stream.writer
        if w is None:
            stream.deliver(when)
        elif w.frame is not None:
            now = clock()
            w.tr.write(w.frame)
            written.append((w, now))
    for w, now in written:
        w.wrote(when, now)
