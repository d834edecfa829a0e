"""A percentile against a baseline's, by order statistics: is it slower, significantly?

A run's ``pN`` regressed against a baseline's when the change is beyond the
threshold (:mod:`.regression`) and the slowdown is significant. For a
percentile the significance comes from order statistics, with no minimum
sample count and no resampling: the **exceedance test** (a control-quantile
test). With ``m`` baseline samples, let ``X_b(s)`` be the baseline's
nearest-rank ``pN`` (the ``s``-th smallest), and ``M`` the number of the run's
``n`` samples above it. When nothing changed, all ``m + n`` samples are
exchangeable, and ``M`` follows, whatever the latency distribution::

    P(M = k) = C(m - s + k, k) C(s - 1 + n - k, n - k) / C(m + n, n)

(above ``X_b(s)``: ``m - s`` baseline and ``k`` current samples, below it
``s - 1`` and ``n - k``, every interleaving equally likely). The one-sided
p-value of "slower" is ``P(M >= k_obs)``, of "faster" ``P(M <= k_obs)``; buckets
are counted at their conservative edge (a sample in the same HDR bucket as
``X_b(s)`` is never "above" for slower, always for faster).

So a p99 doubled with 200 samples on each side is decided: about 200 of the
run's samples lie above the baseline's p99 where 2 or 3 would if nothing had
changed (p far below 1e-10). Runs so small that even the most extreme outcome
(every sample above) could not reach alpha are *undecidable* (3 a side for a
p99 at 0.01: 1 chance in 20), and :func:`samples_to_decide_change` says how
many samples on each side would decide an observed slowdown, if the
distributions stay as observed. The run's distribution-free confidence bounds
of the percentile (issue 27's, :mod:`~pytest_llmperf.slo.quantile_bounds`,
``--llm-confidence``) are computed beside it, and quoted where a change beyond
the threshold is left undecided.

The null hypothesis is "the same distribution", the one every two-sample test
of this gate tests (the bootstrap before it too): a change of shape that keeps
the percentile but moves the samples around it may read as significant. What no
test can do is bound the *baseline's* p99 from above with 200 samples (at 0.99
that needs 459): that is why the run's bounds alone do not decide.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.metrics.sample_size import nearest_rank
from pytest_llmperf.slo.quantile_bounds import rank_bounds

__all__ = [
    "PercentileChange",
    "compare_percentile",
    "exceedance_tail",
    "samples_to_decide_change",
]

_CAP = 1_000_000  # samples_to_decide_change looks no further (per side)


def _log_choose(a: int, b: int) -> float:
    return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)


def _null_pmf(m: int, n: int, s: int) -> np.ndarray:
    """``P(M = k)`` for ``k = 0 .. n`` when nothing changed (``M``: the number of ``n``
    current samples above the ``s``-th smallest of ``m`` baseline samples), normalised
    from its log, whose ratios of consecutive terms are exact."""
    j = np.arange(n, dtype=np.float64)  # log pmf(j + 1) - log pmf(j), j = 0 .. n - 1
    steps = np.log(m - s + j + 1) - np.log(j + 1) + np.log(n - j) - np.log(s - 1 + n - j)
    first = _log_choose(s - 1 + n, n) - _log_choose(m + n, n)
    log_pmf = np.concatenate(([first], first + np.cumsum(steps)))
    pmf: np.ndarray = np.exp(log_pmf - np.max(log_pmf))
    pmf /= np.sum(pmf)
    return pmf


def _tail(pmf: np.ndarray, k: int, *, upper: bool) -> float:
    """``P(M >= k)`` (``upper``) or ``P(M <= k)`` from :func:`_null_pmf`'s ``pmf``."""
    n = len(pmf) - 1
    if (upper and k <= 0) or (not upper and k >= n):
        return 1.0
    if (upper and k > n) or (not upper and k < 0):
        return 0.0
    share = np.sum(pmf[k:]) if upper else np.sum(pmf[: k + 1])
    return float(min(1.0, share))


def exceedance_tail(m: int, n: int, s: int, k: int, *, upper: bool) -> float:
    """``P(M >= k)`` (``upper``) or ``P(M <= k)`` when nothing changed: ``M`` the number
    of ``n`` current samples above the ``s``-th smallest of ``m`` baseline samples."""
    if (upper and k <= 0) or (not upper and k >= n):
        return 1.0  # certain, whatever the law: not worth computing it
    return _tail(_null_pmf(m, n, s), k, upper=upper)


def _slower_p(size: int, share_above: float, percentile: float) -> float:
    """The exceedance p-value with ``size`` samples on each side and ``share_above`` of
    the run's above the baseline's percentile."""
    s = nearest_rank(percentile, size)
    return exceedance_tail(size, size, s, math.floor(share_above * size), upper=True)


def _smallest(decides: Callable[[int], bool], start: int) -> int | None:
    """The smallest size >= ``start`` at which ``decides(size)`` holds (doubling, then
    bisection), None beyond :data:`_CAP`."""
    lo, hi = max(1, start), max(1, start)
    while not decides(hi):
        lo, hi = hi, hi * 2
        if hi > _CAP:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if decides(mid):
            hi = mid
        else:
            lo = mid
    return hi


def samples_to_decide_change(
    share_above: float, percentile: float, alpha: float, *, start: int = 1
) -> int | None:
    """About how many samples on each side would make a slowdown with ``share_above`` of
    the run's samples above the baseline's ``percentile`` significant at ``alpha``; None
    when no number would (the run is not above the baseline's percentile more than
    chance makes it)."""
    if share_above <= 1 - percentile / 100:
        return None
    return _smallest(lambda size: _slower_p(size, share_above, percentile) < alpha, start)


@dataclass(frozen=True)
class PercentileChange:
    """What the order statistics say of one percentile, baseline against run."""

    p_slower: float
    p_faster: float
    lower: float  # the run's percentile: its lower confidence bound (ms)
    upper: float  # and upper (inf: none)
    beyond: bool  # lower > (1 + threshold) x the baseline's value: surely beyond it
    decidable: bool  # the most extreme run of these sizes would be decided
    needed: int | None  # samples on each side that would decide it (undecided slowdowns)
    sizes: tuple[int, int]


def _bounds(
    hist: LatencyHistogram, n: int, percentile: float, confidence: float
) -> tuple[float, float]:
    """The run's percentile bounds at ``confidence`` over ``n`` independent samples (the
    histogram's count, or fewer: ITL's requests), read at the conservative bucket edge."""
    r_lo, r_hi = rank_bounds(n, percentile, confidence)
    scale = hist.count / n
    lower = hist.rank_range_ms(max(1, math.floor(r_lo * scale)))[0] if r_lo else 0.0
    upper = hist.rank_range_ms(min(hist.count, math.ceil(r_hi * scale)))[1] if r_hi else math.inf
    return lower, upper


def compare_percentile(
    before: LatencyHistogram,
    after: LatencyHistogram,
    percentile: float,
    *,
    limit: float,
    alpha: float,
    confidence: float,
    sizes: tuple[int | None, int | None] = (None, None),
) -> PercentileChange:
    """``percentile`` of ``after`` (the run) against ``before`` (the baseline), both with
    samples; ``sizes`` the effective sample counts where samples are not independent (ITL:
    the request counts), None the histogram's count."""
    m = max(1, min(int(sizes[0] or before.count), before.count))
    n = max(1, min(int(sizes[1] or after.count), after.count))
    base = before.stat(f"p{percentile:g}")
    lo_b, hi_b = before.rank_range_ms(nearest_rank(percentile, before.count))
    _, above = after.split_at_ms(hi_b)  # surely above the baseline's percentile's bucket
    below, _ = after.split_at_ms(lo_b)  # surely below it
    k_slow = math.floor(above * n / after.count)
    k_fast = n - math.floor(below * n / after.count)
    law = _null_pmf(m, n, s=nearest_rank(percentile, m))  # one law for the three tails
    p_slower = _tail(law, k_slow, upper=True)
    p_faster = _tail(law, k_fast, upper=False)
    lower, upper = _bounds(after, n, percentile, confidence)
    decidable = _tail(law, n, upper=True) < alpha
    needed = None
    if not decidable:
        needed = _smallest(lambda size: _slower_p(size, 1.0, percentile) < alpha, n)
    elif after.stat(f"p{percentile:g}") > (1 + limit) * base and p_slower >= alpha:
        needed = samples_to_decide_change(k_slow / n, percentile, alpha, start=n)
    return PercentileChange(
        p_slower=p_slower,
        p_faster=p_faster,
        lower=lower,
        upper=upper,
        beyond=lower > (1 + limit) * base,
        decidable=decidable,
        needed=needed,
        sizes=(m, n),
    )
