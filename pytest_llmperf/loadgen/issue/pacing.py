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

What is left by default is the last turn: the pacer looks at the clock once
per turn of the loop, and a turn that reads many streams can carry it past
the plan. ``pacing="precise"`` (:attr:`Pacer.precise`) stops yielding when
the time left is less than a recent turn took (the longest of the last few,
decaying) and spins the rest on the clock: the send then leaves within
microseconds of its plan, at the price of that spin in CPU (counted in
:attr:`Pacer.spun_ns`, reported by the self-check) and of reads held back by
as long (their timestamps are taken when they are read, so a stream's
measured gap can grow by up to a spin), and it takes the young garbage
collections itself when it has time to spare
(:class:`~pytest_llmperf.loadgen.issue.gc_pauses.YoungCollections`), which would
otherwise land on whatever send is due. The send itself is written in the
pacer's own step (:func:`~pytest_llmperf.client.request.start_request`), in
both modes.
"""

from __future__ import annotations

import asyncio
import time

from pytest_llmperf.loadgen.issue.gc_pauses import YoungCollections

__all__ = ["PRECISE_WAKE_EARLY_NS", "SPIN_MAX_NS", "WAKE_EARLY_NS", "YIELD_EVERY", "Pacer"]

WAKE_EARLY_NS = 1_000_000  # epoll rounds its timeout up to whole milliseconds
# precise: one more millisecond, since the timer's wake-up also comes behind the kernel's
# timer slack (50 µs) and the rest of its loop turn (measured: a wake-up within 1 ms
# left 1% of sends over 0.25 ms late before any yield)
PRECISE_WAKE_EARLY_NS = 2_000_000
YIELD_EVERY = 32  # when behind schedule, still let responses be read this often
SPIN_MAX_NS = 500_000  # precise pacing never spins longer than this per send
_SPIN_MIN_NS = 20_000  # nor expects a turn of the loop to be shorter than this
_COLLECT_SPARE_NS = 3_000_000  # precise: time to spare for a young collection (under 1 ms)


class Pacer:
    """Sleeps until planned instants; :meth:`cancel` wakes it for good (``stop()``).

    The one waiting primitive of the issuing side: the open loop's sends, a trace
    conversation's turns, the think time of a closed-loop conversation and an agent's
    tool waits all end in :meth:`wait_until`, so a wait is as precise as a send.
    Several coroutines may wait at once (a conversation's subagents, many
    conversations' tool waits); :meth:`cancel` wakes every one of them.

    ``precise``: spin the last stretch (see the module's docstring); ``spun_ns``
    is the time spent spinning so far.
    """

    def __init__(self, *, precise: bool = False) -> None:
        self._sleeping: set[asyncio.Future[None]] = set()
        self.cancelled = False
        self.precise = precise
        # precise: the young collections, taken here (gc_pauses.young_collections_held)
        self.collections = YoungCollections() if precise else None
        self.spun_ns = 0
        self._turn_ns = _SPIN_MIN_NS  # how long a turn of the loop may take, recently

    async def wait_until(self, planned_ns: int) -> bool:
        """Return at ``planned_ns`` (monotonic) or later; False if cancelled meanwhile."""
        now = time.monotonic_ns()
        if self.collections is not None:
            self.collections.collect(spare=planned_ns - now > _COLLECT_SPARE_NS)
            now = time.monotonic_ns()
        early = planned_ns - (PRECISE_WAKE_EARLY_NS if self.precise else WAKE_EARLY_NS) - now
        if early > 0:
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            self._sleeping.add(fut)
            handle = loop.call_at(loop.time() + early / 1e9, _resolve, fut)
            try:
                await fut
            finally:
                handle.cancel()
                self._sleeping.discard(fut)
        if self.precise:
            await self._turns_then_spin(planned_ns)
        else:
            while not self.cancelled and time.monotonic_ns() < planned_ns:
                await asyncio.sleep(0)
        return not self.cancelled

    async def _turns_then_spin(self, planned_ns: int) -> None:
        """Yield while a turn of the loop fits in the time left; spin the rest."""
        while not self.cancelled:
            now = time.monotonic_ns()
            left = planned_ns - now
            if left <= 0:
                return
            if left <= self._turn_ns:
                while time.monotonic_ns() < planned_ns:
                    pass
                self.spun_ns += time.monotonic_ns() - now
                return
            await asyncio.sleep(0)
            turn = time.monotonic_ns() - now
            # the longest recent turn, forgotten by an eighth a turn; a turn longer than
            # SPIN_MAX_NS is a stall no spin should cover
            decayed = self._turn_ns - (self._turn_ns >> 3)
            self._turn_ns = min(SPIN_MAX_NS, max(_SPIN_MIN_NS, turn, decayed))

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
        if self.collections is not None:  # behind: no time to spare, unless long overdue
            self.collections.collect(spare=False)
        if late % YIELD_EVERY == 0:
            await asyncio.sleep(0)
            if self.cancelled:  # stopped meanwhile: send nothing more
                return -1
        return late

    def cancel(self) -> None:
        self.cancelled = True
        for fut in tuple(self._sleeping):
            _resolve(fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
