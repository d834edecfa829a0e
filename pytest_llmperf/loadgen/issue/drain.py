"""The drain at a share's end: how long it may wait for requests still in flight, and the wait.

:class:`Drain` waits for the tracked requests in flight (up to :func:`drain_cap_s`)
and records the rest as failures, so every issued request ends in exactly one
record. Used by the share run (:class:`~pytest_llmperf.loadgen.issue.local.ShareRun`);
the Ray pool reads the cap's grace, as it waits for its actors' drains. Imports
nothing of ``loadgen/`` but the book it drains (handed in).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.records import ErrorKind
from pytest_llmperf.results.run_result import StopReason

if TYPE_CHECKING:  # handed in: the book whose requests are in flight
    from pytest_llmperf.loadgen.issue.book import IssueBook

__all__ = ["DRAIN_GRACE_S", "INTERRUPT_DRAIN_S", "Drain", "drain_cap_s"]

DRAIN_GRACE_S = 5.0  # past the per-request total timeout, before in-flight = incomplete
INTERRUPT_DRAIN_S = 5.0  # after Ctrl-C / SIGTERM / cancellation: then in-flight = incomplete


def drain_cap_s(endpoint: Endpoint, stop_reason: StopReason | None) -> float:
    """How long a drain may wait: a request's total timeout plus grace, or briefly
    when someone is waiting (Ctrl-C, cancellation)."""
    cap = endpoint.timeouts.total + DRAIN_GRACE_S
    if stop_reason in (StopReason.SIGINT, StopReason.CANCELLED):
        cap = min(cap, INTERRUPT_DRAIN_S)
    return cap


class Drain:
    """The end of ``book``'s issuing: :meth:`wait` for its requests; :meth:`end` stops the wait."""

    def __init__(self, book: IssueBook) -> None:
        self.book = book
        self._abort: asyncio.Future[None] | None = None
        self._ended = False  # end() came: the drain waits for nothing

    @property
    def begun(self) -> bool:
        """True once :meth:`wait` waits for requests in flight."""
        return self._abort is not None

    def end(self) -> None:
        """Stop waiting for requests in flight: they are recorded as incomplete now (or,
        called before the drain has begun, as soon as it begins)."""
        self._ended = True
        if self._abort is not None and not self._abort.done():
            self._abort.set_result(None)

    async def wait(self, cap_s: float) -> None:
        """Wait up to ``cap_s`` for tracked requests in flight; record the rest as incomplete.

        Warm-up requests are not waited for (the performance phase began
        while they were in flight); cut ones are not delivered.
        """
        book = self.book
        inflight = book.inflight
        delivery = book.delivery
        pending = [t for t, r in inflight.items() if r.tracked]
        if pending and not self._ended:
            self._abort = asyncio.get_running_loop().create_future()
            all_done = asyncio.ensure_future(asyncio.wait(pending))
            await asyncio.wait(
                (all_done, self._abort), timeout=cap_s, return_when=asyncio.FIRST_COMPLETED
            )
            all_done.cancel()
            if not self._abort.done():
                self._abort.cancel()
        # A task launched in this turn has not run yet, and one cancelled before its first
        # step never runs its cleanup (its request may be written already: start_request).
        await asyncio.sleep(0)
        leftovers = list(inflight.items())
        for task, _ in leftovers:
            task.cancel()
        if leftovers:
            await asyncio.wait([t for t, _ in leftovers])
        now = time.monotonic_ns()
        kind, why = ErrorKind.INCOMPLETE, "still in flight when the run ended"
        if book.stop_reason is StopReason.SERVER_EXITED:  # its connection went with it
            kind, why = ErrorKind.CONNECT, "connection lost: the server exited"
        for task, record in leftovers:
            if inflight.pop(task, None) is None:
                continue  # it ended as it was cancelled, and was delivered then
            if record.tracked:
                record.fail(kind, why, now=now)
                delivery.deliver(record)
            else:
                delivery.discard(record)
