"""Keeping the garbage collector's pauses away from planned token times.

A collection holds the simulator's only thread: a full one over a pytest-sized
heap took 34 ms here, and young ones run 0.3-4 ms at unpredictable moments
(every 700 net allocations). Tokens planned during a pause leave late. So, in
the simulator's own process (the command line, ``start_sim_process``, or a
``SimServer(quiet_gc=True)``), while it serves:

- the heap that existed at start is frozen (never scanned again);
- automatic full collections are off, and automatic young collections only
  start after ``FALLBACK_YOUNG`` net allocations — a backstop;
- the engine collects instead, right after a step's tokens have left, when the
  next planned instant is furthest away (:meth:`GcControl.after_emit`): the
  young generation as CPython would (700 allocations, every 10th also
  generation 1), and a full collection every ``FULL_EVERY`` generation-1
  collections if the gap to the next step allows, or when the engine goes idle.

The fixed-latency back end has no step gaps; with it only the freezing and the
deferral of full collections apply (a full one runs every
``FIXED_FULL_EVERY_REQUESTS`` requests), as the load generator does for its own
process. The same garbage is collected; only *when* changes.

A virtual-time run (virtual.py) has no planned instants but builds one large
acyclic heap — an hour at 100 req/s is 360,000 requests holding 46 million
token times — which every automatic full collection walks again, for nothing:
:func:`collections_paused` keeps automatic collection off while it runs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["GcControl", "collections_paused"]

YOUNG = 700  # CPython's default generation-0 threshold
MIDDLE = 10  # generation-0 collections per generation-1 collection
FULL_EVERY = 10  # generation-1 collections per full collection (CPython's default)
FULL_MIN_GAP_S = 0.004  # only start a full collection with this much time to the next token
FALLBACK_YOUNG = 20_000
FIXED_FULL_EVERY_REQUESTS = 10_000
_NEVER = 1 << 30


class GcControl:
    """Collections at chosen moments while started; CPython's own scheme otherwise."""

    def __init__(self, managed: bool) -> None:
        self.managed = managed  # True: the engine calls after_emit / idle
        self.active = False
        self._saved: tuple[int, int, int] | None = None
        self.collections = [0, 0, 0]

    def start(self) -> None:
        if self.active:
            return
        self._saved = gc.get_threshold()
        gc.collect()
        gc.freeze()
        young, middle, _old = self._saved
        if self.managed:
            gc.set_threshold(FALLBACK_YOUNG, middle, _NEVER)
        else:
            gc.set_threshold(young, middle, _NEVER)
        self.active = True

    def stop(self) -> None:
        if not self.active:
            return
        self.active = False
        assert self._saved is not None
        gc.set_threshold(*self._saved)
        gc.unfreeze()
        gc.collect()

    def after_emit(self, gap_s: float) -> None:
        """A step's tokens have just left; the next is due in ``gap_s`` seconds."""
        if not self.active:
            return
        c0, c1, c2 = gc.get_count()
        if c0 < YOUNG:
            return
        gen = 0
        if c1 >= MIDDLE:
            gen = 1
            if c2 >= FULL_EVERY and gap_s >= FULL_MIN_GAP_S:
                gen = 2
        gc.collect(gen)
        self.collections[gen] += 1

    def idle(self) -> None:
        """Nothing is planned: catch up on any collection that is due."""
        if not self.active:
            return
        c0, c1, c2 = gc.get_count()
        if c2:
            gen = 2
        elif c0 >= YOUNG:
            gen = 1 if c1 >= MIDDLE else 0
        else:
            return
        gc.collect(gen)
        self.collections[gen] += 1

    def request_served(self, index: int) -> None:
        """Unmanaged mode: a full collection every so many requests."""
        if self.active and not self.managed and index and index % FIXED_FULL_EVERY_REQUESTS == 0:
            gc.collect()
            self.collections[2] += 1


@contextmanager
def collections_paused() -> Iterator[None]:
    """No automatic collection inside; after it, what was made inside counts as old.

    Otherwise the first young collection after would walk all of it (1.5 s after an
    hour at 100 req/s). Freezing and unfreezing moves every tracked object to the
    oldest generation: a later full collection still collects any garbage."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if was:
            gc.enable()
