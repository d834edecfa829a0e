"""Run metrics of a virtual-time run, in the JSON report's shape.

Same definitions as the plugin (docs/measurement.md, "Metrics"): the virtual
client sends exactly on schedule, so ``t_sched = t_send = arrival`` and
``schedule_lag`` is 0; ``ttft = t_first - t_sched``, ``e2e = t_last - t_sched``,
``tpot = (t_last - t_first)/(n_out - 1)``, ``itl`` pooled over every gap.
Percentiles are nearest-rank and exact (numpy on all samples) — virtual runs
are small enough that no histogram approximation is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from itertools import chain
from typing import Any

import numpy as np

from .request import FINISHED, Request

__all__ = [
    "PERCENTILES",
    "latency_stats",
    "nearest_rank",
    "run_summary",
    "summarize",
    "weighted_latency_stats",
]

PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
_ITL_SLICE = 4096  # requests per slice of _pooled_itl


def nearest_rank(sorted_values: np.ndarray, p: float) -> float:
    """The nearest-rank p-th percentile of already sorted values."""
    n = len(sorted_values)
    # on the decimal p as written: in binary floating point 99.9 / 100 * 1000 is a hair
    # above 999, and its ceiling would be the slowest of 1,000 values, not the 999th
    rank = max(1, math.ceil(Fraction(repr(float(p))) * n / 100))
    return float(sorted_values[rank - 1])


def latency_stats(values_s: np.ndarray, *, reuse: bool = False) -> dict[str, float | int | None]:
    """p50..p99.9, mean, max (milliseconds) and count of latencies in seconds.

    ``reuse``: ``values_s`` is a float64 array the caller no longer needs; it is scaled
    and sorted in place (the pooled ITLs of a long run are hundreds of megabytes)."""
    n = len(values_s)
    keys = [f"p{p:g}" for p in PERCENTILES]
    if n == 0:
        return {**dict.fromkeys(keys), "mean": None, "max": None, "count": 0}
    if reuse:
        ms = np.multiply(values_s, 1000.0, out=values_s)
    else:
        ms = np.asarray(values_s, dtype=np.float64) * 1000.0
    ms.sort()
    out: dict[str, float | int | None] = {
        k: round(nearest_rank(ms, p), 6) for k, p in zip(keys, PERCENTILES, strict=True)
    }
    out["mean"] = round(float(ms.mean()), 6)
    out["max"] = round(float(ms[-1]), 6)
    out["count"] = n
    return out


def _pooled_itl(done: Sequence[Request], n_out: np.ndarray) -> np.ndarray:
    """Every gap between two consecutive tokens of a request, all requests pooled.

    Built a slice of requests at a time into one array: an hour at 100 req/s has 46
    million token times, and each fresh array of that size costs its page faults
    (here more than the arithmetic)."""
    out = np.empty(int(n_out.sum()) - len(done), dtype=np.float64)
    pos = 0
    for k in range(0, len(done), _ITL_SLICE):
        part = done[k : k + _ITL_SLICE]
        counts = n_out[k : k + _ITL_SLICE]
        flat = np.fromiter(
            chain.from_iterable([r.token_times for r in part]),
            dtype=np.float64,
            count=int(counts.sum()),
        )
        gaps = np.diff(flat)
        last = np.cumsum(counts)[:-1] - 1  # gap from a request's last token to the next's first
        gaps = np.delete(gaps, last)
        out[pos : pos + len(gaps)] = gaps
        pos += len(gaps)
    return out


def weighted_latency_stats(
    values_s: np.ndarray, weights: np.ndarray
) -> dict[str, float | int | None]:
    """:func:`latency_stats` of ``values_s`` each repeated ``weights`` times, without
    the repetition (virtual_ledger.py: an hour's 46 million gaps are a few hundred
    thousand distinct ones).

    The percentiles and the maximum are the same values :func:`latency_stats` picks
    (the same ``value * 1000.0`` per sample, the same nearest rank); the mean is the
    exact weighted sum rounded once (:func:`_exact_weighted_sum`), where numpy's
    pairwise sum of every sample is within a few units in the last place of it: the
    same after rounding to 6 decimals unless the mean lies that close to a rounding
    boundary."""
    keys = [f"p{p:g}" for p in PERCENTILES]
    n = int(weights.sum())
    if n == 0:
        return {**dict.fromkeys(keys), "mean": None, "max": None, "count": 0}
    ms = np.asarray(values_s, dtype=np.float64) * 1000.0
    order = np.argsort(ms, kind="stable")
    ms = ms[order]
    w = np.asarray(weights, dtype=np.int64)[order]
    cum = np.cumsum(w)
    out: dict[str, float | int | None] = {}
    for k, p in zip(keys, PERCENTILES, strict=True):
        rank = max(1, math.ceil(Fraction(repr(float(p))) * n / 100))
        out[k] = round(float(ms[int(np.searchsorted(cum, rank))]), 6)
    out["mean"] = round(_exact_weighted_sum(ms, w) / n, 6)
    out["max"] = round(float(ms[-1]), 6)
    out["count"] = n
    return out


def _exact_weighted_sum(values: np.ndarray, weights: np.ndarray) -> float:
    """``sum(values * weights)`` correctly rounded: each value split in two halves of at
    most 26 significant bits (Veltkamp), so a weight below 2**26 times either half is an
    exact float, and ``math.fsum`` adds the exact products without error."""
    if len(weights) and int(weights.max()) >= 1 << 26:
        return float(sum(Fraction(float(v)) * int(c) for v, c in zip(values, weights, strict=True)))
    split = values * 134217729.0  # 2**27 + 1
    hi = split - (split - values)
    lo = values - hi
    wf = weights.astype(np.float64)
    step = 1 << 16  # as Python floats a slice at a time: a long run has 10**5+ distinct gaps
    return math.fsum(
        x
        for part in (hi * wf, lo * wf)
        for k in range(0, len(part), step)
        for x in part[k : k + step].tolist()
    )


def run_summary(
    arrival: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    n_out: np.ndarray,
    n_in: np.ndarray,
    itl: dict[str, float | int | None],
    *,
    issued: int,
    failed: int,
    first_arrival: float,
) -> dict[str, Any]:
    """Counts and metrics from the completed requests' arrays (in any order), their
    pooled ITL's statistics and the earliest arrival of any request."""
    completed = len(arrival)
    if completed:
        multi = n_out > 1
        tpot = (last[multi] - first[multi]) / (n_out[multi] - 1)
        window = float(last.max() - first_arrival)
    else:
        tpot = np.array([])
        window = 0.0
    metrics: dict[str, Any] = {
        "ttft": latency_stats(first - arrival),
        "tpot": latency_stats(tpot),
        "itl": itl,
        "e2e": latency_stats(last - arrival),
        "schedule_lag": latency_stats(np.zeros(completed)),
        "request_throughput": round(completed / window, 6) if window > 0 else None,
        "output_throughput": round(float(n_out.sum()) / window, 6) if window > 0 else None,
        "input_throughput": round(float(n_in.sum()) / window, 6) if window > 0 else None,
        "error_rate": round(failed / issued, 6) if issued else None,
        "goodput": round(completed / issued, 6) if issued else None,
    }
    return {
        "counts": {"issued": issued, "completed": completed, "failed": failed},
        "metrics": metrics,
        "window_s": round(window, 6),
    }


def summarize(requests: Sequence[Request], issued: int, failed: int) -> dict[str, Any]:
    """Counts and metrics of the completed ``requests`` (all others failed or dropped)."""
    done = [r for r in requests if r.state == FINISHED]
    if not done:
        empty = np.array([])
        none = np.array([], dtype=np.int64)
        return run_summary(
            empty, empty, empty, none, none, latency_stats(empty),
            issued=issued, failed=failed, first_arrival=0.0,
        )  # fmt: skip
    n_out = np.array([r.generated for r in done])
    return run_summary(
        np.array([r.arrival for r in done]),
        np.array([r.first_token_time for r in done]),
        np.array([r.finish_time for r in done]),
        n_out,
        np.array([r.prompt_len for r in done]),
        latency_stats(_pooled_itl(done, n_out), reuse=True),
        issued=issued,
        failed=failed,
        first_arrival=min(r.arrival for r in requests),
    )
