"""A few sends (and finished requests' bookkeeping) per turn of the event loop, so that
reads are not held behind a burst.

A closed loop's slots become free together: all of them at its start, and
again whenever a wave of equal-length answers ends. Each free slot would
account for its finished request and send its next one in the turn of the loop
that woke it, so hundreds of them could run back to back while the answers to
the first new requests arrive; every read waits for the whole burst, and each
first token read late is a TTFT measured long. Measured, 512 slots of 1,024-token
streams: the start's burst put TTFT 20-30 ms behind the server's own (the bare
httptools loop, which sends in a few µs, 4 ms), and the end of each wave, where
each finished request's 1,024 gaps go into the histograms, stalled reads for
30 ms. A closed loop counts latency from the socket write (``t_send``), so
holding a send back a turn costs its request nothing, nor does accounting for a
finished request a turn later; holding a read back does.

:class:`TurnBudget` lets :data:`WORK_PER_TURN` of them through per turn and
queues the rest, first come first served, each woken once in a later turn,
before that turn's reads.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["WORK_PER_TURN", "TurnBudget"]

WORK_PER_TURN = 4


class TurnBudget:
    """:meth:`take` returns at once for a turn's first ``per_turn`` takers, later for the rest."""

    def __init__(self, per_turn: int = WORK_PER_TURN) -> None:
        self.per_turn = per_turn
        self._left = per_turn
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._refill_pending = False

    async def take(self) -> None:
        if self._left > 0 and not self._waiting:
            self._left -= 1
            self._refill_next_turn()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        self._refill_next_turn()
        await waiter  # (cancelled: the run is stopping; the refill skips it)

    def _refill_next_turn(self) -> None:
        """A callback scheduled now runs in the next turn, before that turn's reads."""
        if not self._refill_pending:
            self._refill_pending = True
            asyncio.get_running_loop().call_soon(self._refill)

    def _refill(self) -> None:
        self._refill_pending = False
        self._left = self.per_turn
        waiting = self._waiting
        while self._left and waiting:
            waiter = waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)  # its task runs in the next turn, before the reads
                self._left -= 1
        if waiting:
            self._refill_next_turn()
