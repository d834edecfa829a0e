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

__all__ = ["COARSE_S", "ENGINE_COARSE_S", "ENGINE_SPIN_S", "TIMING_MODES", "sleep_until"]

COARSE_S = 0.001
# The engine's step clock: a step's tokens all leave at one instant, so it is worth
# more care. CPython rounds an asyncio timeout up to the millisecond twice (the
# selector, then epoll's conversion of a float that is rarely exact), so a coarse
# sleep can wake up to ~2 ms late: stop it 2.5 ms early. ``time.sleep`` itself wakes
# ~40-90 µs late here (timer slack plus wake-up latency): stop it ``ENGINE_SPIN_S``
# early and busy-wait the rest.
ENGINE_COARSE_S = 0.0025
ENGINE_SPIN_S = 0.00015
TIMING_MODES = ("block", "spin")


async def sleep_until(
    when: float,
    mode: str = "block",
    coarse: float = COARSE_S,
    spin: float = 0.0,
    serve_io: bool = True,
) -> None:
    """Sleep until ``when`` (event-loop time, seconds), precisely.

    ``coarse``: how long before ``when`` the asyncio sleep ends; ``spin`` (block
    mode): how long before ``when`` the blocking sleep ends and a busy-wait starts;
    ``serve_io`` (block mode): let the loop run what is ready once more before
    blocking — which, in a burst of arriving requests, can take many milliseconds.
    """
    loop = asyncio.get_running_loop()
    delay = when - loop.time()
    if delay <= 0:
        return
    if delay > coarse:
        await asyncio.sleep(delay - coarse)
    if mode == "spin":
        while loop.time() < when:
            await asyncio.sleep(0)
        return
    if serve_io:
        await asyncio.sleep(0)  # serve ready I/O before blocking
    delay = when - loop.time()
    if delay > spin:
        time.sleep(delay - spin)
    if spin:
        clock = time.monotonic  # the event loop's clock
        while clock() < when:
            pass
