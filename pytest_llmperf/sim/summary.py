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
from typing import Any

import numpy as np

from .request import FINISHED, Request

__all__ = ["PERCENTILES", "latency_stats", "nearest_rank", "summarize"]

PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)


def nearest_rank(sorted_values: np.ndarray, p: float) -> float:
    """The nearest-rank p-th percentile of already sorted values."""
    n = len(sorted_values)
    # on the decimal p as written: in binary floating point 99.9 / 100 * 1000 is a hair
    # above 999, and its ceiling would be the slowest of 1,000 values, not the 999th
    rank = max(1, math.ceil(Fraction(repr(float(p))) * n / 100))
    return float(sorted_values[rank - 1])


def latency_stats(values_s: np.ndarray) -> dict[str, float | int | None]:
    """p50..p99.9, mean, max (milliseconds) and count of latencies in seconds."""
    n = len(values_s)
    keys = [f"p{p:g}" for p in PERCENTILES]
    if n == 0:
        return {**dict.fromkeys(keys), "mean": None, "max": None, "count": 0}
    ms = np.sort(np.asarray(values_s, dtype=np.float64) * 1000.0)
    out: dict[str, float | int | None] = {
        k: round(nearest_rank(ms, p), 6) for k, p in zip(keys, PERCENTILES, strict=True)
    }
    out["mean"] = round(float(ms.mean()), 6)
    out["max"] = round(float(ms[-1]), 6)
    out["count"] = n
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
        flat = np.fromiter(
            (t for r in done for t in r.token_times), dtype=np.float64, count=int(n_out.sum())
        )
        gaps = np.diff(flat)
        bounds = np.cumsum(n_out)[:-1] - 1  # gap from one request's last token to the next's first
        itl = np.delete(gaps, bounds)
        window = float(last.max() - min(r.arrival for r in requests))
    else:
        arrival = first = last = tpot = itl = np.array([])
        n_out = n_in = np.array([], dtype=np.int64)
        window = 0.0
    completed = len(done)
    metrics: dict[str, Any] = {
        "ttft": latency_stats(first - arrival),
        "tpot": latency_stats(tpot),
        "itl": latency_stats(itl),
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
