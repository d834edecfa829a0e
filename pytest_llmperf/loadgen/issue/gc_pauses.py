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
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["FULL_COLLECTION_EVERY", "collect_if_due", "full_collections_deferred"]

FULL_COLLECTION_EVERY = 10_000
_NEVER = 1 << 30  # generation-1 collections before an automatic full one: never


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
        gc.unfreeze()
        gc.collect()


def collect_if_due(issued: int) -> None:
    """A full collection every :data:`FULL_COLLECTION_EVERY` issued requests."""
    if issued % FULL_COLLECTION_EVERY == 0 and gc.isenabled():
        gc.collect()
