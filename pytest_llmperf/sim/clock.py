"""Sleeping until a planned instant, centred on the plan.

asyncio on Linux waits in ``epoll_wait``, whose timeout has a resolution of
one millisecond and is rounded *up*, so a plain ``asyncio.sleep`` wakes
anywhere from 0 to ~1 ms late. The simulator promises tokens within 1 ms of
the engine's plan, so it aims half a millisecond early: the wake-up then lands
within about ±0.5 ms of the planned instant instead of 0..1 ms after it.
"""

from __future__ import annotations

import asyncio

__all__ = ["EARLY_S", "sleep_until"]

EARLY_S = 0.0005


async def sleep_until(when: float) -> None:
    """Sleep until about ``when`` (event-loop time, seconds)."""
    loop = asyncio.get_running_loop()
    delay = when - loop.time() - EARLY_S
    if delay > 0:
        await asyncio.sleep(delay)
