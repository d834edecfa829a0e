"""Sleeping until a planned instant, to well under a millisecond.

asyncio on Linux waits in ``epoll_wait``, whose timeout has a resolution of
one millisecond and is rounded *up*, so a plain ``asyncio.sleep`` wakes 0 to
~1 ms late — the whole error budget of a token emitted "on plan". So the
simulator sleeps in two stages: an ordinary ``asyncio.sleep`` until
``COARSE_S`` before the instant (the event loop keeps serving I/O), then the
last fraction of a millisecond either

- ``block``: one pass through the loop to serve ready I/O, then a blocking
  ``time.sleep`` (nanosleep, precise to the timer slack, ~50 µs). No CPU is
  burnt, but the loop is held for up to ``COARSE_S``. Right for the simulator
  in its own process, where nothing else shares the loop; or
- ``spin``: ``await asyncio.sleep(0)`` until the instant. The loop keeps
  serving everything else (a load generator in the same loop reads its
  chunks on time), at the price of CPU while spinning. Right for a
  ``SimServer`` inside a test's event loop.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["COARSE_S", "TIMING_MODES", "sleep_until"]

COARSE_S = 0.001
TIMING_MODES = ("block", "spin")


async def sleep_until(when: float, mode: str = "block") -> None:
    """Sleep until ``when`` (event-loop time, seconds), precisely."""
    loop = asyncio.get_running_loop()
    delay = when - loop.time()
    if delay <= 0:
        return
    if delay > COARSE_S:
        await asyncio.sleep(delay - COARSE_S)
    if mode == "spin":
        while loop.time() < when:
            await asyncio.sleep(0)
        return
    await asyncio.sleep(0)  # serve ready I/O before blocking
    delay = when - loop.time()
    if delay > 0:
        time.sleep(delay)
