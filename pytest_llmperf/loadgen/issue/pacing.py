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
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["WAKE_EARLY_NS", "YIELD_EVERY", "Pacer"]

WAKE_EARLY_NS = 1_000_000  # epoll rounds its timeout up to whole milliseconds
YIELD_EVERY = 32  # when behind schedule, still let responses be read this often


class Pacer:
    """Sleeps until planned instants; :meth:`cancel` wakes it for good (``stop()``)."""

    def __init__(self) -> None:
        self._sleeping: asyncio.Future[None] | None = None
        self.cancelled = False

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
        while not self.cancelled and time.monotonic_ns() < planned_ns:
            await asyncio.sleep(0)
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
