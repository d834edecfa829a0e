"""The slow-replica fault: one replica of a fleet that runs some of its requests slowly.

A fleet whose average looks fine can hide one degraded replica (a throttled GPU, a
noisy neighbour, a bad driver): its own requests are slow while the fleet's
percentiles, over several times as many requests, barely move. The profile keys
``slow_replica`` (the replica's index, -1 = none), ``slow_factor`` and ``slow_share``
make the simulator's replica ``slow_replica`` that one: a share ``slow_share`` of the
requests routed to it are *slowed*, and every engine step whose batch holds a slowed
request takes ``slow_factor`` times as long (its batch-mates wait too, as on a real
stalled engine); ``slow_share: 1`` slows every step, a uniformly slow replica.

Which requests are slowed is not a random draw but evenly spread over the replica's
arrivals: request ``k`` (0-based, in the order the replica received them) is slowed
when ``floor((k + 1) * share + 1/2)`` steps past ``floor(k * share + 1/2)``. So the
replica's first ``n`` requests hold exactly ``round(n * share)`` slowed ones (half
rounded down), the first of them at the middle of the first ``1 / share`` — a count a
test can be built on (docs/simulator.md, "Fleets": the numbers of
``sim:replicas-4-slow-one``), the same every run.
"""

from __future__ import annotations

import math

__all__ = ["SlowRequests", "slowed_count"]


def _mark(k: int, share: float) -> int:
    return math.floor(k * share + 0.5)


def slowed_count(n: int, share: float) -> int:
    """How many of a slow replica's first ``n`` requests are slowed."""
    return _mark(n, share)


class SlowRequests:
    """Draws, arrival by arrival, whether the slow replica's next request is slowed."""

    __slots__ = ("arrivals", "factor", "share")

    def __init__(self, factor: float, share: float) -> None:
        if factor < 1.0:
            raise ValueError(f"slow_factor must be at least 1, got {factor}")
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"slow_share must be between 0 and 1, got {share}")
        self.factor = factor
        self.share = share
        self.arrivals = 0

    def next(self) -> bool:
        """Whether the next request is slowed."""
        k = self.arrivals
        self.arrivals = k + 1
        return _mark(k + 1, self.share) > _mark(k, self.share)
