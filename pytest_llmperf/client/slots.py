"""Slots taken first come, first served: a semaphore with a try that never waits.

Two users: the connection pool (:class:`~pytest_llmperf.client.stream_client.StreamClient`,
whose :meth:`~pytest_llmperf.client.stream_client.StreamClient.take_idle` must take a
slot without waiting, which ``asyncio.Semaphore`` has no way to do) and an open loop's
``max_concurrency=`` cap (:mod:`~pytest_llmperf.loadgen.issue.concurrency_cap`).

Our own rather than ``asyncio.Semaphore``: the order waiters are let through in must
be the arrival order, on every Python version, and a waiter cancelled just as it was
given a slot must hand the slot on, not leak it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

__all__ = ["SlotGate"]


class SlotGate:
    """``slots`` places: :meth:`acquire` waits in arrival order, :meth:`release` frees one."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a gate needs at least one slot, got {slots}")
        self.slots = slots
        self._free = slots
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def in_use(self) -> int:
        return self.slots - self._free

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    def try_acquire(self) -> bool:
        """Take a free slot now if one is free and nobody waits before us."""
        if self._free and not self._waiters:
            self._free -= 1
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot as we were cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes straight to the next in line
                return
        self._free += 1
