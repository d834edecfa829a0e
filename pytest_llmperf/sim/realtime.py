"""Real time: the engine behind the HTTP server, one step per planned interval.

A single task runs the engine: it forms and prices a step at simulated time
``t``, sleeps until the step's planned end (wall time = start + t / speedup),
then hands each emitted token to its request's stream. The next step starts
at the previous planned end, not at "now", so scheduling jitter never
accumulates into drift. When the engine has no work the task waits for an
arrival and restarts the clock there (work-conserving, never idle while work
waits).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import traceback
from collections import deque
from collections.abc import Callable

from .clock import sleep_until
from .engine import Engine
from .profiles import Profile
from .request import Request
from .streams import BackendStats, Submission

__all__ = ["EngineBackend", "EngineStream"]


class EngineStream:
    """Token times of one engine request, delivered as the engine emits them."""

    def __init__(self, backend: EngineBackend, req: Request) -> None:
        self._backend = backend
        self.req = req
        self._times: deque[float] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._remaining = req.max_tokens
        self._closed = False
        self._sink: Callable[[float], None] | None = None
        self._on_fail: Callable[[BaseException], None] | None = None
        self._failed: BaseException | None = None

    @property
    def cached_tokens(self) -> int:
        return max(0, self.req.cached_tokens)

    def attach_sink(
        self, sink: Callable[[float], None], fail: Callable[[BaseException], None]
    ) -> None:
        """From now on hand each token to ``sink`` synchronously (tokens already
        delivered are passed on at once); ``next_token`` is no longer used.
        ``fail`` is called instead if the engine dies."""
        if self._failed is not None:
            fail(self._failed)
            return
        while self._times:
            self._remaining -= 1
            sink(self._times.popleft())
        self._sink = sink
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
        """Called by the engine loop for each emitted token (loop time)."""
        sink = self._sink
        if sink is not None:
            self._remaining -= 1
            sink(when)
            return
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
        await sleep_until(when, self._backend.timing)  # waits only if alpha2 > 0
        return when

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._sink = None
            self._backend.release(self.req)


class EngineBackend:
    """Back end for ``kind: engine`` profiles, in real time."""

    def __init__(
        self, profile: Profile, *, seed: int = 0, speedup: float = 1.0, timing: str = "block"
    ) -> None:
        self.profile = profile
        self.timing = timing
        self.engine = Engine(profile)
        self.speedup = speedup
        self.seed = seed
        self._t0 = 0.0
        self._sim_now = 0.0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._next_rid = 0
        self.failure: BaseException | None = None
        self._deliveries: set[asyncio.Task[None]] = set()
        self.step_log: list[tuple[float, float, int]] | None = None  # (start, end, batch)

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
        loop = asyncio.get_running_loop()
        now_sim = self._sim(loop.time())
        req = Request(
            self._next_rid,
            now_sim,
            sub.prompt_tokens,
            sub.output_tokens,
            sub.block_hashes,
            sub.priority,
        )
        self._next_rid += 1
        stream = EngineStream(self, req)
        req.owner = stream
        delay = self.engine.latency.queue_delay_s(sub.prompt_tokens) / self.speedup
        if delay > 0:
            loop.call_later(delay, self._enqueue, req)
        else:
            self._enqueue(req)
        return stream

    def _enqueue(self, req: Request) -> None:
        if req.state != "new":  # aborted before it reached the queue
            return
        now_sim = max(self._sim(asyncio.get_running_loop().time()), req.arrival)
        self.engine.enqueue(req, now_sim)
        assert self._wake is not None
        self._wake.set()

    def release(self, req: Request) -> None:
        """The handler is done with ``req``: abort it if it is still in the engine."""
        if req.state == "new":
            req.state = "aborted"
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

    async def _run(self) -> None:
        try:
            await self._loop()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a simulator bug: fail loudly, never hang the clients
            traceback.print_exc(file=sys.stderr)
            self.failure = exc
            err = RuntimeError(f"simulator engine failed: {exc!r}")
            sched = self.engine.scheduler
            for r in [*sched.running, *sched.waiting]:
                r.owner.fail(err)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        engine = self.engine
        wake = self._wake
        assert wake is not None
        out_delay = engine.latency.output_delay_s
        while True:
            if not engine.has_work:
                wake.clear()
                await wake.wait()
                self._sim_now = max(self._sim_now, self._sim(loop.time()))
                continue
            res = engine.step(self._sim_now)
            if self.step_log is not None:
                self.step_log.append((res.start, res.end, res.batch_size))
            await sleep_until(self._wall(res.end), self.timing)
            self._sim_now = res.end
            if out_delay > 0:  # output processing (alpha2) runs beside the next step
                task = loop.create_task(self._deliver(self._wall(res.end + out_delay), res.emitted))
                self._deliveries.add(task)
                task.add_done_callback(self._deliveries.discard)
            else:
                when = self._wall(res.end)
                for r in res.emitted:
                    if r.state != "aborted":
                        r.owner.deliver(when)

    async def _deliver(self, when: float, emitted: list[Request]) -> None:
        await sleep_until(when, self.timing)
        for r in emitted:
            if r.state != "aborted":
                r.owner.deliver(when)
