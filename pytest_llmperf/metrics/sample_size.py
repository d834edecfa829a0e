"""How many samples a percentile needs before it means anything.

A nearest-rank p-th percentile over fewer than ``10 × 100/(100 − p)`` samples
rests on fewer than ten samples above it (p99 over 200 requests is the
second-slowest request), so it is not a stable estimate. SLO verdicts call such
a percentile inconclusive, and the load generator's self-check judges its
schedule lag at the highest percentile the run can support.
"""

from __future__ import annotations

import math

__all__ = ["min_samples", "supported_percentile"]


def min_samples(percentile: float | None) -> int:
    """Samples needed before ``percentile`` is meaningful (1 for mean/max/None)."""
    if percentile is None or percentile >= 100:
        return 1
    return math.ceil(10 * 100 / (100 - percentile) - 1e-9)


def supported_percentile(count: int, wanted: float, fallbacks: tuple[float, ...]) -> float | None:
    """``wanted`` if ``count`` samples support it, else the first fallback that they do."""
    for p in (wanted, *fallbacks):
        if count >= min_samples(p):
            return p
    return None
