"""Waiting until a planned send instant, to well under a millisecond.

asyncio on Linux sleeps in ``epoll_wait``, whose timeout is rounded *up* to
whole milliseconds, so ``loop.call_at(t)`` fires anywhere from 0 to about
1 ms after ``t``. An open-loop generator that sends on that callback adds
that lag to every request it sends (it is counted in TTFT, since latency is
measured from the plan, but it is still the generator's error, not the
server's). :class:`Pacer` therefore asks the loop to wake it
``WAKE_EARLY_NS`` before the planned instant and covers the rest by
yielding to the loop (``asyncio.sleep(0)``) until ``time.monotonic_ns()``
reaches the plan. Yielding — not a busy loop — keeps responses flowing:
each turn polls the sockets without blocking, so chunks keep being read
and timestamped while the pacer waits. The cost is CPU for at most
``WAKE_EARLY_NS`` per request, which the run's self-check reports.

Yielding has one gap: a turn of the loop that reads many streams' chunks can
start just before the planned instant and end well after it (at 500 req/s
with streams in flight, the p99 lag is about half a millisecond). The opt-in
precise pacer (``llm_load(..., pacing="precise")``) stops yielding
``PRECISE_SPIN_NS`` before the plan and spins on the clock: no turn can start
in that window, so the send is late only by the clock's own reading. Its
price is that window of CPU per request (15% of a core at 500 req/s), and
that no chunk is read during it (a response's bytes wait at most that long,
and are then stamped when read, as always).
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["PRECISE_SPIN_NS", "WAKE_EARLY_NS", "YIELD_EVERY", "Pacer"]

WAKE_EARLY_NS = 1_000_000  # epoll rounds its timeout up to whole milliseconds
PRECISE_SPIN_NS = 300_000  # pacing="precise": the last stretch spun, no turn of the loop
YIELD_EVERY = 32  # when behind schedule, still let responses be read this often


class Pacer:
    """Sleeps until planned instants; :meth:`cancel` wakes it for good (``stop()``)."""

    def __init__(self, *, precise: bool = False) -> None:
        self._sleeping: asyncio.Future[None] | None = None
        self.cancelled = False
        self.spin_ns = PRECISE_SPIN_NS if precise else 0  # the stretch spun, not yielded

    async def wait_until(self, planned_ns: int) -> bool:
        """Return at ``planned_ns`` (monotonic) or later; False if cancelled meanwhile."""
        now = time.monotonic_ns()
        early = planned_ns - WAKE_EARLY_NS - now
        if early > 0:
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            self._sleeping = fut
            handle = loop.call_at(loop.time() + early / 1e9, _resolve, fut)
            try:
                await fut
            finally:
                handle.cancel()
                self._sleeping = None
        spin_from = planned_ns - self.spin_ns
        while not self.cancelled and time.monotonic_ns() < spin_from:
            await asyncio.sleep(0)
        if self.spin_ns and not self.cancelled:
            while time.monotonic_ns() < planned_ns:  # precise: no turn of the loop now
                pass
        return not self.cancelled

    async def due(self, planned_ns: int, late: int) -> int:
        """Wait for a send planned at ``planned_ns``, ``late`` sends in a row having been late.

        Returns the new count of late sends in a row (0: this one is on time),
        or -1 when the wait was cancelled (the run is stopping). A generator
        behind its schedule sends at once, but yields to the event loop every
        :data:`YIELD_EVERY` sends so responses are still read.
        """
        if planned_ns > time.monotonic_ns():
            return 0 if await self.wait_until(planned_ns) else -1
        late += 1
        if late % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        return late

    def cancel(self) -> None:
        self.cancelled = True
        if self._sleeping is not None:
            _resolve(self._sleeping)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
