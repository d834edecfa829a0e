"""Small statistics the analyses share: nearest-rank percentiles, t intervals, fits.

Implemented here (numpy only) rather than taking a dependency on scipy:
the Student-t distribution is computed from the regularised incomplete beta
function (Lentz's continued fraction), accurate to ~1e-10, which is ample
for confidence intervals and p-values over a handful of repetitions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_llmperf.metrics.sample_size import nearest_rank as exact_rank

__all__ = [
    "LinearFit",
    "MeanInterval",
    "WelchTest",
    "jain_index",
    "linear_fit",
    "mean_interval",
    "nearest_rank",
    "power_fit",
    "t_quantile",
    "t_sf",
    "welch_test",
]


def nearest_rank(values: Sequence[float], percentile: float) -> float:
    """The nearest-rank percentile (the same definition as the run metrics); NaN if empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = exact_rank(percentile, len(ordered))  # exact decimals: p99.9 of 1,000 is the 999th
    return float(ordered[min(rank, len(ordered)) - 1])


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index ``(Σx)² / (n·Σx²)``: 1 = equal, 1/n = one takes all."""
    xs = [float(v) for v in values]
    if not xs:
        return math.nan
    square_sum = sum(x * x for x in xs)
    if square_sum == 0:
        return 1.0
    return sum(xs) ** 2 / (len(xs) * square_sum)


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    if math.isnan(t) or df <= 0:
        return math.nan
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (bisection on :func:`t_sf`)."""
    lo, hi = -1e4, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2
        if 1.0 - t_sf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class MeanInterval:
    """A mean with its two-sided confidence interval over independent repetitions."""

    mean: float
    low: float
    high: float
    n: int
    std: float
    confidence: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> MeanInterval:
    """Student-t interval of the mean; with one value the interval is unbounded (NaN)."""
    xs = np.asarray([v for v in values if v == v], dtype=float)
    n = len(xs)
    if n == 0:
        return MeanInterval(math.nan, math.nan, math.nan, 0, math.nan, confidence)
    mean = float(xs.mean())
    if n == 1:
        return MeanInterval(mean, math.nan, math.nan, 1, math.nan, confidence)
    std = float(xs.std(ddof=1))
    half = t_quantile(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)
    return MeanInterval(mean, mean - half, mean + half, n, std, confidence)


@dataclass(frozen=True)
class WelchTest:
    """Welch's unequal-variance t-test of mean(b) − mean(a)."""

    difference: float
    relative: float
    t: float
    df: float
    p_value: float
    low: float
    high: float
    confidence: float

    @property
    def significant(self) -> bool:
        return self.p_value < 1 - self.confidence


def welch_test(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> WelchTest:
    """Is ``b``'s mean different from ``a``'s? Difference, its interval and a two-sided p."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    diff = float(xb.mean() - xa.mean()) if len(xa) and len(xb) else math.nan
    relative = diff / float(xa.mean()) if len(xa) and xa.mean() != 0 else math.nan
    if len(xa) < 2 or len(xb) < 2:
        return WelchTest(
            diff, relative, math.nan, math.nan, math.nan, math.nan, math.nan, confidence
        )
    va, vb = xa.var(ddof=1) / len(xa), xb.var(ddof=1) / len(xb)
    se = math.sqrt(va + vb)
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
        return WelchTest(diff, relative, math.inf, math.inf, p, diff, diff, confidence)
    df = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1))
    t = diff / se
    p = min(1.0, 2 * t_sf(abs(t), df))
    half = t_quantile(0.5 + confidence / 2, df) * se
    return WelchTest(diff, relative, t, df, p, diff - half, diff + half, confidence)


@dataclass(frozen=True)
class LinearFit:
    """``y = slope·x + intercept`` by least squares, with R²."""

    slope: float
    intercept: float
    r_squared: float


def linear_fit(x: Sequence[float], y: Sequence[float]) -> LinearFit:
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xs) < 2 or np.ptp(xs) == 0:
        return LinearFit(math.nan, math.nan, math.nan)
    slope, intercept = np.polyfit(xs, ys, 1)
    residual = float(((ys - (slope * xs + intercept)) ** 2).sum())
    total = float(((ys - ys.mean()) ** 2).sum())
    r2 = 1.0 - residual / total if total > 0 else 1.0
    return LinearFit(float(slope), float(intercept), r2)


def power_fit(x: Sequence[float], y: Sequence[float]) -> LinearFit:
    """Fit ``y = c·x**k`` in log-log space: ``slope`` is the exponent k, R² of the log fit."""
    pairs = [(a, b) for a, b in zip(x, y, strict=True) if a > 0 and b > 0]
    if len(pairs) < 2:
        return LinearFit(math.nan, math.nan, math.nan)
    return linear_fit([math.log(a) for a, _ in pairs], [math.log(b) for _, b in pairs])
