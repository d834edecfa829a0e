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

__all__ = ["PERCENTILES", "latency_stats", "nearest_rank", "summarize"]

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


def summarize(requests: Sequence[Request], issued: int, failed: int) -> dict[str, Any]:
    """Counts and metrics of the completed ``requests`` (all others failed or dropped)."""
    done = [r for r in requests if r.state == FINISHED]
    if done:
        arrival = np.array([r.arrival for r in done])
        first = np.array([r.first_token_time for r in done])
        last = np.array([r.finish_time for r in done])
        n_out = np.array([r.generated for r in done])
        n_in = np.array([r.prompt_len for r in done])
        multi = n_out > 1
        tpot = (last[multi] - first[multi]) / (n_out[multi] - 1)
        itl = _pooled_itl(done, n_out)
        window = float(last.max() - min(r.arrival for r in requests))
    else:
        arrival = first = last = tpot = itl = np.array([])
        n_out = n_in = np.array([], dtype=np.int64)
        window = 0.0
    completed = len(done)
    metrics: dict[str, Any] = {
        "ttft": latency_stats(first - arrival),
        "tpot": latency_stats(tpot),
        "itl": latency_stats(itl, reuse=True),
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
