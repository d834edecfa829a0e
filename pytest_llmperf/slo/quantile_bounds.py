"""Distribution-free confidence bounds of a percentile, and the verdict they give.

With ``n`` independent samples of a continuous latency and ``q`` its true
``p``-quantile, the number ``B`` of samples below ``q`` follows the binomial
law ``Binom(n, p)`` whatever the distribution. The order statistic of rank
``r`` (the ``r``-th smallest sample, ``X(r)``) is at or above ``q`` exactly when
fewer than ``r`` samples are below ``q``, so

- ``P(X(r) >= q) = P(B < r)``: the **upper bound** is ``X(r_hi)`` with ``r_hi``
  the smallest rank with ``P(B < r_hi) >= c`` (none when ``1 - p**n < c``: then
  the upper bound is infinite);
- ``P(X(r) <= q) = P(B >= r)``: the **lower bound** is ``X(r_lo)`` with ``r_lo``
  the largest rank with ``P(B >= r_lo) >= c`` (none when ``(1 - p)**n > 1 - c``:
  then the lower bound is 0).

Each bound holds with probability at least ``c`` on its own, so a verdict that
needs one of them is wrong with probability at most ``1 - c``:
``pN < t`` passes when the upper bound is below ``t`` and fails when the lower
bound is at or above ``t`` (for ``<=``: passes at ``upper <= t``, fails at
``lower > t``; ``>``/``>=`` mirror them); otherwise it is inconclusive. In
counts: with ``m`` samples below ``t``, ``pN < t`` passes when
``m >= r_hi`` and fails when ``m <= r_lo - 1``.

The binomial law is computed exactly (log-space, :func:`math.lgamma`, summed
with numpy over the window of ``k`` that holds all but a negligible part of
the mass), so no statistics package is needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from pytest_llmperf.specs.slo import DEFAULT_CONFIDENCE, confidence_problem

__all__ = [
    "DEFAULT_CONFIDENCE",
    "binom_cdf",
    "confidence_problem",
    "decided",
    "rank_bounds",
    "samples_to_decide",
]

_CAP = 1_000_000_000  # samples_to_decide looks no further

# A tail probability within this of the confidence is a tie, and a tie reaches it
# ("at least c"). Exact ties occur: P(B >= 1) = p at n = 1, so p90 at 0.9, p99 at
# 0.99. The window's floats carry errors around 1e-16 there, and which side of c
# they land on depends on the CPU (numpy's AVX-512 exp and libm's differ in the
# last bit), so without this the same run would be bounded differently on two
# machines. 1e-12 is thousands of times that error and far below any difference
# between two confidence levels (test_percentile_bounds checks the ranks against
# exact rational arithmetic).
_TIE = 1e-12


@lru_cache(maxsize=4096)
def _cdf_window(n: int, p: float) -> tuple[int, np.ndarray]:
    """``(k0, cdf)`` with ``cdf[i] = P(B <= k0 + i)`` for ``B ~ Binom(n, p)``, over the
    window ``k0 .. k1`` outside which the law has less than about 1e-20 of its mass
    (``P(B <= k) ~ 0`` below it, ``~ 1`` above)."""
    mean = n * p
    sd = math.sqrt(n * p * (1 - p))
    k0 = max(0, math.floor(mean - 12 * sd - 12))
    k1 = min(n, math.ceil(mean + 12 * sd + 12))
    log_p, log_q = math.log(p), math.log1p(-p)
    first = math.lgamma(n + 1) - math.lgamma(k0 + 1) - math.lgamma(n - k0 + 1)
    first += k0 * log_p + (n - k0) * log_q
    k = np.arange(k0 + 1, k1 + 1, dtype=np.float64)
    steps = np.log(n - k + 1) - np.log(k) + (log_p - log_q)  # log pmf(k) - log pmf(k - 1)
    log_pmf = np.concatenate(([first], first + np.cumsum(steps)))
    cdf = np.cumsum(np.exp(log_pmf))
    if k1 == n:  # the whole upper tail is in the window: the last value is exactly 1
        cdf /= cdf[-1]
    cdf = np.minimum(cdf, 1.0)
    cdf.setflags(write=False)  # shared by every caller through the cache
    return k0, cdf


def binom_cdf(k: int, n: int, p: float) -> float:
    """``P(B <= k)`` for ``B ~ Binom(n, p)``."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    k0, cdf = _cdf_window(n, p)
    if k < k0:
        return 0.0
    if k - k0 >= len(cdf):
        return 1.0
    return float(cdf[k - k0])


def rank_bounds(n: int, percentile: float, confidence: float) -> tuple[int | None, int | None]:
    """1-based ranks ``(r_lo, r_hi)`` of the order statistics that bound the ``percentile``
    of ``n`` samples at ``confidence`` (one-sided each); None where no rank does."""
    if n <= 0:
        return None, None
    p = percentile / 100.0
    k0, cdf = _cdf_window(n, p)
    # r_hi - 1 = the smallest k with P(B <= k) >= c; it must be <= n - 1
    i = int(np.searchsorted(cdf, confidence - _TIE, side="left"))
    k_hi = k0 + i if i < len(cdf) else n
    r_hi = k_hi + 1 if k_hi <= n - 1 else None
    # r_lo - 1 = the largest k with P(B <= k) <= 1 - c; it must be >= 0
    j = int(np.searchsorted(cdf, 1.0 - confidence + _TIE, side="right")) - 1
    k_lo = k0 + j if j >= 0 else k0 - 1
    r_lo = k_lo + 1 if k_lo >= 0 else None
    return r_lo, r_hi


def decided(op: str, lower: float, upper: float, target: float) -> bool | None:
    """The verdict the bounds give an SLO ``percentile <op> target``: True (pass), False
    (fail) or None (inconclusive: the target lies within the interval)."""
    if op == "<":
        return True if upper < target else False if lower >= target else None
    if op == "<=":
        return True if upper <= target else False if lower > target else None
    if op == ">":
        return True if lower > target else False if upper <= target else None
    if op == ">=":
        return True if lower >= target else False if upper < target else None
    raise ValueError(f"no confidence verdict for operator {op!r}")


RankBounds = Callable[[int, float, float], tuple[int | None, int | None]]


def _decides(
    n: int,
    below: float,
    above: float,
    percentile: float,
    confidence: float,
    bounds: RankBounds = rank_bounds,
) -> bool:
    """Would ``n`` samples with the shares ``below`` / ``above`` the target decide?"""
    r_lo, r_hi = bounds(n, percentile, confidence)
    m_below = math.floor(below * n)  # samples surely below the target
    m_not_above = n - math.floor(above * n)  # samples not surely above it
    upper_below = r_hi is not None and m_below >= r_hi
    lower_above = r_lo is not None and m_not_above <= r_lo - 1
    return upper_below or lower_above


def samples_to_decide(
    n: int,
    below: int,
    above: int,
    percentile: float,
    confidence: float,
    *,
    bounds: RankBounds = rank_bounds,
) -> int | None:
    """About how many samples would decide where the target lies, assuming the observed
    distribution: ``below`` of ``n`` samples were under the target, ``above`` over it.

    The smallest sample size at which the same shares put the target outside the
    confidence interval (searched by doubling, then bisection;
    "about": sizes near it may differ by the binomial's discreteness); None when no size up to
    a billion does (the target sits at the observed percentile). ``bounds`` gives the ranks
    (:func:`rank_bounds`, or the always-valid ones of :mod:`.sequential`)."""
    if n <= 0:
        return None
    fb, fa = below / n, above / n
    p = percentile / 100.0
    if fb <= p and fa <= 1 - p:
        return None  # the target is at the observed percentile: more samples won't move it
    lo, hi = n, n
    while not _decides(hi, fb, fa, percentile, confidence, bounds):
        lo, hi = hi, hi * 2
        if hi > _CAP:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _decides(mid, fb, fa, percentile, confidence, bounds):
            hi = mid
        else:
            lo = mid
    return hi
