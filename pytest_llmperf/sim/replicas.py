"""Several engines behind one simulator: the profile's ``replicas: N``.

Each replica is a back end of its own (streams.py), built exactly as a
one-replica simulator builds its only one: its own scheduler, KV cache, step
clock and lockstep decoders, stepped by its own timer task, so a replica's
batch and prefix cache know nothing of the others' (as separate vLLM processes
behind a router). :class:`ReplicaSet` is itself a back end: the bridge submits to
it with the replica the router chose (``Submission.replica``), and ``/metrics``
reads its stats as one process's view — counters and gauges summed over the
replicas, as a page scraped from a data-parallel server sums its engines —
with each replica's own available from :meth:`ReplicaSet.replica_stats` (and on
each replica's own page, pages.py). It is also what the state-reading routing
policies read (router.py's :class:`~.router.ReplicaView`): each replica's requests
in flight and how much of a prompt's prefix its cache holds.

A one-replica simulator does not use this class: its back end is the replica
itself, so the single-server path is unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .kv_cache import KVCache
from .streams import Backend, BackendStats, Submission, TokenStream

__all__ = ["ReplicaSet", "prefix_cache_of", "summed_stats"]


def prefix_cache_of(backend: Backend | Any) -> KVCache | None:
    """The engine's KV cache, where the back end has one (the fixed one has none)."""
    engine = getattr(backend, "engine", None)
    kv = getattr(engine, "kv", None)
    return kv if isinstance(kv, KVCache) else None


def summed_stats(each: Sequence[BackendStats]) -> BackendStats:
    """Several engines' stats as one page says them: counters and counts summed, KV-cache
    usage as the share of all their blocks in use (equal caches: the mean of theirs)."""
    return BackendStats(
        running=sum(s.running for s in each),
        waiting=sum(s.waiting for s in each),
        kv_usage=sum(s.kv_usage for s in each) / len(each),
        preemptions=sum(s.preemptions for s in each),
        prefix_hit_tokens=sum(s.prefix_hit_tokens for s in each),
        prefix_query_tokens=sum(s.prefix_query_tokens for s in each),
    )


class ReplicaSet:
    """N back ends served as one; a request goes to ``Submission.replica``."""

    def __init__(self, replicas: Sequence[Backend]) -> None:
        if not replicas:
            raise ValueError("a replica set needs at least one replica")
        self.replicas = tuple(replicas)
        self._caches = [prefix_cache_of(r) for r in self.replicas]

    def __len__(self) -> int:
        return len(self.replicas)

    @property
    def has_prefix_cache(self) -> bool:
        return all(kv is not None for kv in self._caches)

    @property
    def in_flight(self) -> int:
        return sum(r.in_flight for r in self.replicas)

    def loads(self) -> list[int]:
        """Each replica's requests in flight (submitted, not yet released)."""
        return [r.in_flight for r in self.replicas]

    def cached_blocks(self, replica: int, hashes: Sequence[int]) -> int:
        """How many of ``hashes``, from the first, replica ``replica``'s cache holds."""
        kv = self._caches[replica]
        return 0 if kv is None else kv.cached_prefix(hashes)

    def cache(self, replica: int) -> KVCache | None:
        """Replica ``replica``'s KV cache (None: the fixed back end has none)."""
        return self._caches[replica]

    async def start(self) -> None:
        for r in self.replicas:
            await r.start()

    async def stop(self) -> None:
        await asyncio.gather(*(r.stop() for r in self.replicas))

    def poll(self) -> None:
        for r in self.replicas:
            r.poll()

    def submit(self, sub: Submission) -> TokenStream:
        if not 0 <= sub.replica < len(self.replicas):
            raise ValueError(f"no replica {sub.replica} (replicas: {len(self.replicas)})")
        return self.replicas[sub.replica].submit(sub)

    def replica_stats(self) -> list[BackendStats]:
        """Each replica's own gauges and counters, in replica order."""
        return [r.stats() for r in self.replicas]

    def stats(self) -> BackendStats:
        """The sum over the replicas (:func:`summed_stats`)."""
        return summed_stats(self.replica_stats())

    def reset_prefix_cache(self) -> bool:
        """vLLM's reset on every replica that has no block in use; True only if all did
        (a replica that cannot reset keeps its cache, as one vLLM engine would)."""
        done = [kv.reset_prefix_cache() for kv in self._caches if kv is not None]
        return bool(done) and all(done)
