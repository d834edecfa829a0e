"""Sleeping until a planned instant, to well under a millisecond.

asyncio on Linux waits in ``epoll_wait``, whose timeout has a resolution of
one millisecond and is rounded *up*, so a plain ``asyncio.sleep`` wakes 0 to
~1 ms late — the whole error budget of a token emitted "on plan". So the
simulator sleeps in two stages: an ordinary ``asyncio.sleep`` until
``COARSE_S`` before the instant (the event loop keeps serving I/O), one pass
through the loop to serve whatever arrived, then a blocking ``time.sleep`` for
the last fraction of a millisecond (nanosleep: precise to the timer slack,
~50 µs). The blocking part holds the loop for at most ``COARSE_S``.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["COARSE_S", "sleep_until"]

COARSE_S = 0.0015


async def sleep_until(when: float) -> None:
    """Sleep until ``when`` (event-loop time, seconds), precisely."""
    loop = asyncio.get_running_loop()
    delay = when - loop.time()
    if delay <= 0:
        return
    if delay > COARSE_S:
        await asyncio.sleep(delay - COARSE_S)
    else:
        await asyncio.sleep(0)  # serve ready I/O before blocking
    delay = when - loop.time()
    if delay > 0:
        time.sleep(delay)
