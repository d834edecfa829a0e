"""How many samples a percentile needs before it means anything, and which sample it is.

A nearest-rank p-th percentile over fewer than ``10 × 100/(100 − p)`` samples
rests on fewer than ten samples above it (p99 over 200 requests is the
second-slowest request), so it is not a stable *estimate*. The rule holds for
any percentile: p75 needs 40 samples, p99.9 10,000, p99.99 100,000.

It is no longer how a percentile SLO (``<``, ``<=``, ``>``, ``>=``) is decided:
those verdicts come from the percentile's confidence bounds
(:mod:`pytest_llmperf.slo.quantile_bounds`, docs/measurement.md "Percentiles"),
which decide as soon as the data do, nor how a baseline, history or A/B
comparison of a client percentile is (its order statistics:
:mod:`pytest_llmperf.slo.percentile_change`). :func:`min_samples` still gates
where a point estimate itself is compared: ``pN == target`` SLOs (and a server
percentile without bucket counts), a server percentile against a baseline's
(``server_regression``), the methodology report's flag; and the load generator's
self-check judges its schedule lag at the highest percentile the run can
support (:func:`supported_percentile`).

Both the minimum and the nearest rank are computed on the percentile's
decimal value, exactly: in binary floating point ``99.9 / 100 × 1000`` is a
little above 999, and its ceiling would make p99.9 of 1,000 samples the
slowest one instead of the 999th.
"""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["min_samples", "nearest_rank", "supported_percentile"]


def _exact(percentile: float) -> Fraction:
    """``percentile`` as the decimal it was written as (``99.9`` is 999/10, not a binary
    neighbour): ``repr`` of a float is the shortest decimal that reads back as it."""
    return Fraction(repr(float(percentile)))


def min_samples(percentile: float | None) -> int:
    """Samples needed before ``percentile`` is meaningful (1 for mean/max/None)."""
    if percentile is None or percentile >= 100:
        return 1
    return math.ceil(1000 / (100 - _exact(percentile)))


def nearest_rank(percentile: float, count: int) -> int:
    """The 1-based rank of the nearest-rank ``percentile`` among ``count`` sorted samples:
    the smallest rank with at least ``percentile``% of the samples at or below it."""
    return max(1, math.ceil(_exact(percentile) * count / 100))


def supported_percentile(count: int, wanted: float, fallbacks: tuple[float, ...]) -> float | None:
    """``wanted`` if ``count`` samples support it, else the first fallback that they do."""
    for p in (wanted, *fallbacks):
        if count >= min_samples(p):
            return p
    return None
