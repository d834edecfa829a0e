"""Change points in a metric's history: E-divisive means with a permutation test.

The method of Matteson & James (2014, "A nonparametric approach for multiple
change point analysis of multivariate data"), as MongoDB's
signal-processing-algorithms and Apache Otava (formerly Hunter) use it on
their CI performance results:

1. For a segment ``z[0:n]`` and each split ``τ`` (both sides at least
   ``min_size`` long), the energy statistic between left ``X = z[:τ]`` and
   right ``Y = z[τ:]``::

       q(τ) = m·k/(m+k) · (2·mean|x−y| − mean|x−x'| − mean|y−y'|)

   (``m``, ``k`` the sides' lengths, means over distinct pairs). It is zero
   in expectation when both sides come from one distribution, whatever its
   shape, so latency tails and skew need no model.
2. Divisive search: the candidate is the split with the largest ``q`` over
   all current segments.
3. Significance: the values of each segment are shuffled within their
   segment (``permutations`` times, a seeded generator) and the largest
   ``q`` over all segments recomputed; ``p = (1 + #{shuffled ≥ observed}) /
   (permutations + 1)``. A candidate with ``p < alpha`` becomes a change
   point and the search goes on in the new segments; the first candidate
   that is not significant ends it.

Why our own implementation (numpy only) rather than a library: both
maintained implementations install, but neither cleanly beside this package
(measured on Python 3.11, see docs/change-points.md): signal-processing-
algorithms 2.1.6 is an sdist with a C extension that pins ``numpy<2``,
``setuptools<71``, gevent, structlog and scipy and only supports Python 3.11;
apache-otava 0.8.0 pins ``numpy==2.2.0`` and brings scipy, the Google
BigQuery client, slack-sdk, pg8000 and ~40 other packages. The algorithm is
a few dozen lines; its results match theirs on the same series.

The costs: ``O(n²)`` memory and ``O(permutations · n²)`` time per change
point found; 30 points with 199 permutations take a few milliseconds, 500
points well under a second.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["ChangePoint", "detect_change_points", "energy_statistics"]

_F = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ChangePoint:
    """A change between ``values[index - 1]`` and ``values[index]``.

    ``index`` is the first point of the new regime; ``mean_before`` and
    ``mean_after`` are the means of the segments on either side (bounded by
    the neighbouring change points); ``relative_change`` is
    ``mean_after / mean_before − 1`` (``nan`` when ``mean_before`` is 0).
    """

    index: int
    p_value: float
    mean_before: float
    mean_after: float
    relative_change: float


def energy_statistics(values: Sequence[float] | _F, min_size: int = 2, exponent: float = 1.0) -> _F:
    """``q(τ)`` for every split ``τ`` of ``values`` (index ``τ``: ``values[:τ]`` on the left).

    ``nan`` where a side is shorter than ``min_size``; distances are raised
    to ``exponent`` (α of the paper, in (0, 2]).
    """
    z = np.asarray(values, dtype=np.float64)
    n = z.size
    out = np.full(n + 1, np.nan)
    low, high = max(2, min_size), n - max(2, min_size)
    if high < low:
        return out
    dist = np.abs(z[:, None] - z[None, :]) ** exponent
    upper = np.triu(dist, 1)
    # within-left sums: pairs i < j < τ; within-right: τ ≤ i < j
    left = np.concatenate(([0.0], np.cumsum(upper.sum(axis=0))))  # left[τ] = Σ_{i<j<τ}
    right_rows = upper.sum(axis=1)
    right = np.concatenate((np.cumsum(right_rows[::-1])[::-1], [0.0]))  # right[τ] = Σ_{τ≤i<j}
    total = left[n]
    taus = np.arange(low, high + 1)
    m = taus.astype(np.float64)
    k = n - m
    w_left, w_right = left[taus], right[taus]
    cross = total - w_left - w_right
    q = (m * k / n) * (
        2.0 * cross / (m * k) - w_left / (m * (m - 1) / 2) - w_right / (k * (k - 1) / 2)
    )
    out[taus] = q
    return out


def _best_split(z: _F, min_size: int, exponent: float = 1.0) -> tuple[int, float]:
    """The split with the largest ``q`` (and ``q``); ``(-1, -inf)`` when none fits."""
    q = energy_statistics(z, min_size, exponent)
    if np.all(np.isnan(q)):
        return -1, -math.inf
    tau = int(np.nanargmax(q))
    return tau, float(q[tau])


def _segments(bounds: list[int]) -> list[tuple[int, int]]:
    return list(itertools.pairwise(bounds))


def detect_change_points(
    values: Sequence[float],
    *,
    alpha: float = 0.05,
    permutations: int = 199,
    min_size: int = 3,
    seed: int = 0,
    exponent: float = 1.0,
) -> list[ChangePoint]:
    """Change points of ``values`` (in order), by E-divisive means with a permutation test.

    ``alpha`` is the significance each change point must reach (``p <
    alpha``; with ``permutations`` shuffles the smallest possible p is
    ``1 / (permutations + 1)``, so keep ``permutations ≥ 2 / alpha``).
    ``min_size`` is the fewest points a regime may have (so a change in the
    last ``min_size − 1`` points is not reported yet). ``seed`` makes the
    permutation test, and so the result, reproducible. ``exponent`` is the
    power of the distances (α in the paper, in (0, 2]; 1, the default, is
    what Otava and MongoDB use: any difference in distribution counts; 2
    would see differences in means only).

    Raises ``ValueError`` on non-finite values or bad parameters.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), not {alpha!r}")
    if permutations < 1:
        raise ValueError(f"permutations must be at least 1, not {permutations!r}")
    if not 0 < exponent <= 2:
        raise ValueError(f"exponent must be in (0, 2], not {exponent!r}")
    if min_size < 2:
        raise ValueError(f"min_size must be at least 2, not {min_size!r}")
    z = np.asarray(values, dtype=np.float64)
    if z.ndim != 1:
        raise ValueError("values must be a flat sequence of numbers")
    if not np.all(np.isfinite(z)):
        raise ValueError("values must be finite (drop missing runs before detecting)")
    rng = np.random.default_rng(seed)
    bounds = [0, z.size]
    found: dict[int, float] = {}
    while True:
        candidates = [(_best_split(z[a:b], min_size, exponent), a) for a, b in _segments(bounds)]
        (tau, q), start = max(candidates, key=lambda c: c[0][1])
        if tau < 0 or not q > 0:
            break
        exceed = 0
        segments = [z[a:b].copy() for a, b in _segments(bounds)]
        for _ in range(permutations):
            best = -math.inf
            for seg in segments:
                rng.shuffle(seg)
                best = max(best, _best_split(seg, min_size, exponent)[1])
            if best >= q:
                exceed += 1
        p_value = (exceed + 1) / (permutations + 1)
        if p_value >= alpha:
            break
        found[start + tau] = p_value
        bounds = sorted([*bounds, start + tau])
    result = []
    for i, index in enumerate(bounds[1:-1], start=1):
        before = float(z[bounds[i - 1] : index].mean())
        after = float(z[index : bounds[i + 1]].mean())
        change = after / before - 1.0 if before != 0 else math.nan
        result.append(ChangePoint(index, found[index], before, after, change))
    return result
