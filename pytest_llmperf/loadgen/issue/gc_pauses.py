"""Keeping Python's full garbage collections out of the measured timeline.

A generation-2 collection scans the whole heap; in a pytest process that took
48-68 ms on this project's CI machine, a few times a minute at 500 req/s.
Every send planned during such a pause goes out late, which alone made
schedule_lag p99 26 ms and TTFT p99 63 ms against a 22 ms server
(``benchmarks/loadgen_poisson.py``). Young collections (generations 0 and 1,
under 8 ms) still run: they reclaim almost all of a request's garbage, which
dies within a few hundred milliseconds.

So during a run the heap that existed before it is frozen (left out of
collections, so a full one scans only the run's own objects), automatic full
collections are deferred, and the generator
takes one itself every :data:`FULL_COLLECTION_EVERY` issued requests (one
pause, touching ~0.3% of the sends at 500 req/s) and again when the run ends, which keeps
memory bounded on runs of any length.

Young collections are short but not free: 0.2-0.8 ms here, a few per second at
500 req/s, each one landing on whatever send is due. Under ``pacing="precise"``
they are held too (:func:`young_collections_held`) and taken by the pacer
(:class:`YoungCollections`) while it has time to spare before its next send, or,
when it never has, at the latest once ten times the usual garbage has piled up.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "FULL_COLLECTION_EVERY",
    "YoungCollections",
    "collect_if_due",
    "full_collections_deferred",
    "young_collections_held",
]

FULL_COLLECTION_EVERY = 10_000
_NEVER = 1 << 30  # generation-1 collections before an automatic full one: never
_HELD = 1 << 30  # allocations before an automatic young collection: never


@contextmanager
def full_collections_deferred() -> Iterator[None]:
    """Within the block, the heap is only fully collected by :func:`collect_if_due`."""
    young, middle, old = gc.get_threshold()
    gc.collect()
    gc.freeze()  # the heap that existed before the run is left out of its collections
    gc.set_threshold(young, middle, _NEVER)
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)
        # The run's own garbage, collected while the older heap is still frozen: scanning
        # the whole process (a test suite's, 60-260 ms) again was the costly half. Older
        # objects that became garbage during the run wait for the next full collection.
        gc.collect()
        gc.unfreeze()


def collect_if_due(issued: int) -> None:
    """A full collection every :data:`FULL_COLLECTION_EVERY` issued requests."""
    if issued % FULL_COLLECTION_EVERY == 0 and gc.isenabled():
        gc.collect()


@contextmanager
def young_collections_held() -> Iterator[None]:
    """Within the block no young collection runs by itself (:class:`YoungCollections`)."""
    young, middle, old = gc.get_threshold()
    if young:  # (0: the user turned collections off; leave it so)
        gc.set_threshold(_HELD, middle, old)
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)


class YoungCollections:
    """The young collections a pacer takes itself, when it has time (see the module).

    ``threshold``: allocations between young collections, as the interpreter's
    (read before :func:`young_collections_held` raised it); every tenth collection
    takes generation 1 with it, as the interpreter does.
    """

    def __init__(self, threshold: int | None = None) -> None:
        self.threshold = gc.get_threshold()[0] if threshold is None else threshold
        self.taken = 0

    def collect(self, *, spare: bool) -> None:
        """Collect if due (``spare``: the caller has time), or long overdue (``spare`` or not)."""
        if not self.threshold or not gc.isenabled():  # the user turned collections off
            return
        pending = gc.get_count()[0]
        if pending >= (self.threshold if spare else 10 * self.threshold):
            self.taken += 1
            gc.collect(1 if self.taken % 10 == 0 else 0)
