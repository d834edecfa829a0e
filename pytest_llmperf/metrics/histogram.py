"""Latency distributions that merge exactly across tests and processes.

Every histogram in the project has the same HDR parameters (integer
microseconds, 1 µs to 1 hour, 3 significant digits), so any two can be added
bucket by bucket: per-run histograms merge into a session's, worker
processes ship theirs back encoded, and baselines store them rather than raw
samples. Count, sum, min and max are tracked exactly beside the buckets.

Recording is on the load generator's hot path (one call per token gap), so
values are appended to a small buffer and added to the HDR buckets in
vectorised batches (numpy computes HDR's own bucket index); count, sum, min
and max are updated at once. Every reader flushes the buffer first, so the
result is identical to recording one value at a time.

Percentiles are **nearest rank** over the buckets: the smallest recorded
value such that at least p% of samples are <= it. Three significant digits
bound the reported value to within 0.05% of the exact sample (1 µs
resolution below 2 ms, 0.25 ms near 500 ms, 1 ms near 2 s). Any percentile
0 < p <= 100 can be read (``p(75)``, ``stat("p99.99")``); :data:`PERCENTILES`
are only the ones every summary shows.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from pytest_llmperf.metrics.sample_size import nearest_rank
from pytest_llmperf.specs.slo import percentile_of

__all__ = ["HIGHEST_US", "PERCENTILES", "SIGNIFICANT_DIGITS", "LatencyHistogram"]

LOWEST_US = 1
HIGHEST_US = 3_600_000_000
SIGNIFICANT_DIGITS = 3
PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)
_FLUSH_AT = 4096  # buffered values before a vectorised flush: bounds memory at 32 KiB


def _stat_key(p: float) -> str:
    return f"p{p:g}"


class LatencyHistogram:
    """An HDR histogram of durations recorded in nanoseconds, reported in milliseconds."""

    __slots__ = (
        "_hdr",
        "_pending",
        "_pending_weighted",
        "_pending_weights",
        "count",
        "max_ns",
        "min_ns",
        "sum_ns",
    )

    def __init__(self) -> None:
        self._hdr = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        self._pending = array("q")
        self._pending_weighted = array("q")  # values recorded with a count > 1 ...
        self._pending_weights = array("q")  # ... and those counts
        self.count = 0
        self.sum_ns = 0
        self.min_ns = 0
        self.max_ns = 0

    def record_ns(self, value_ns: int, count: int = 1) -> None:
        """Record ``count`` samples of ``value_ns`` (negative clamps to 0, beyond 1 h to 1 h)."""
        value_ns = int(value_ns)
        if value_ns < 0:
            value_ns = 0
        if count == 1:
            self._pending.append(value_ns)
            if len(self._pending) >= _FLUSH_AT:
                self._flush()
        else:
            self._pending_weighted.append(value_ns)
            self._pending_weights.append(count)
            if len(self._pending_weighted) >= _FLUSH_AT:
                self._flush()
        if self.count == 0 or value_ns < self.min_ns:
            self.min_ns = value_ns
        if value_ns > self.max_ns:
            self.max_ns = value_ns
        self.count += count
        self.sum_ns += value_ns * count

    def record_many_ns(self, values_ns: list[int]) -> None:
        """Record each of ``values_ns`` once (a request's token gaps: one call, not one each)."""
        if not values_ns:
            return
        low = min(values_ns)
        if low < 0:
            values_ns = [max(0, v) for v in values_ns]
            low = 0
        high = max(values_ns)
        self._pending.extend(values_ns)
        if len(self._pending) >= _FLUSH_AT:
            self._flush()
        if self.count == 0 or low < self.min_ns:
            self.min_ns = low
        if high > self.max_ns:
            self.max_ns = high
        self.count += len(values_ns)
        self.sum_ns += sum(values_ns)

    def _flush(self) -> None:
        """Add the buffered values to the HDR buckets, exactly as record_value would."""
        if self._pending:
            values, self._pending = self._pending, array("q")
            self._add_to_buckets(np.frombuffer(values, dtype=np.int64), None)
        if self._pending_weighted:
            values, self._pending_weighted = self._pending_weighted, array("q")
            weights, self._pending_weights = self._pending_weights, array("q")
            self._add_to_buckets(
                np.frombuffer(values, dtype=np.int64), np.frombuffer(weights, dtype=np.int64)
            )

    def _add_to_buckets(self, values_ns: np.ndarray, weights: np.ndarray | None) -> None:
        hdr = self._hdr
        us = np.minimum(HIGHEST_US, (values_ns + 500) // 1000)
        # HDR's index: bucket from the bit length of (value | sub_bucket_mask), then sub-bucket.
        # Values stay below 2**53, so frexp's exponent is the exact bit length.
        bits = np.frexp((us | hdr.sub_bucket_mask).astype(np.float64))[1].astype(np.int64)
        bucket = bits - hdr.unit_magnitude - (hdr.sub_bucket_half_count_magnitude + 1)
        sub = us >> (bucket + hdr.unit_magnitude)
        index = ((bucket + 1) << hdr.sub_bucket_half_count_magnitude) + sub
        index -= hdr.sub_bucket_half_count
        counts = np.ctypeslib.as_array(hdr.counts)[: hdr.counts_len]
        if weights is None:
            added = np.bincount(index, minlength=hdr.counts_len)
            hdr.total_count += len(us)
        else:  # integer sums: float64 bincount weights would round past 2**53
            added = np.zeros(hdr.counts_len, dtype=np.int64)
            np.add.at(added, index, weights)
            hdr.total_count += int(weights.sum())
        counts += added.astype(counts.dtype)
        hdr.min_value = min(hdr.min_value, int(us.min()))
        hdr.max_value = max(hdr.max_value, int(us.max()))

    def merge(self, other: LatencyHistogram) -> None:
        if other.count == 0:
            return
        self._flush()
        other._flush()
        self._hdr.add(other._hdr)
        self.min_ns = other.min_ns if self.count == 0 else min(self.min_ns, other.min_ns)
        self.max_ns = max(self.max_ns, other.max_ns)
        self.count += other.count
        self.sum_ns += other.sum_ns

    # -- reading ---------------------------------------------------------------

    def p(self, percentile: float) -> float:
        """Nearest-rank ``percentile`` (0 < p <= 100) in milliseconds; NaN when empty."""
        if not 0 < percentile <= 100:
            raise ValueError(f"percentile must be in (0, 100], got {percentile}")
        if self.count == 0:
            return math.nan
        if percentile == 100:
            return self.max_ns / 1e6
        self._flush()
        counts = np.ctypeslib.as_array(self._hdr.counts)[: self._hdr.counts_len]
        rank = nearest_rank(percentile, self.count)
        index = int(np.searchsorted(np.cumsum(counts), rank))
        low: int = self._hdr.get_value_from_index(index)  # hdrh is untyped: its values are ints
        high: int = self._hdr.get_highest_equivalent_value(low)
        mid_us = (low + high) / 2.0
        return min(max(mid_us * 1000.0, self.min_ns), self.max_ns) / 1e6

    def _edges_ns(self, index: int) -> tuple[int, int]:
        """The values (ns) a sample counted in HDR bucket ``index`` may have had: the
        bucket's microseconds widened by the half microsecond recording rounds off, within
        the exact min and max (a value beyond the 1 h top is known only from max)."""
        low: int = self._hdr.get_value_from_index(index)
        high: int = self._hdr.get_highest_equivalent_value(low)
        lo_ns = max(low * 1000 - 500, self.min_ns)
        hi_ns = self.max_ns if high >= HIGHEST_US else min(high * 1000 + 499, self.max_ns)
        return lo_ns, hi_ns

    def rank_range_ms(self, rank: int) -> tuple[float, float]:
        """The range (ms) the ``rank``-th smallest sample (1-based) lies in: its HDR bucket's
        edges; exact for the first (min) and the last (max)."""
        if not 1 <= rank <= self.count:
            raise ValueError(f"rank must be in 1..{self.count}, got {rank}")
        if rank == self.count:
            return self.max_ns / 1e6, self.max_ns / 1e6
        if rank == 1:
            return self.min_ns / 1e6, self.min_ns / 1e6
        self._flush()
        counts = np.ctypeslib.as_array(self._hdr.counts)[: self._hdr.counts_len]
        lo_ns, hi_ns = self._edges_ns(int(np.searchsorted(np.cumsum(counts), rank)))
        return lo_ns / 1e6, hi_ns / 1e6

    def split_at_ms(self, target_ms: float) -> tuple[int, int]:
        """``(below, above)``: the samples surely under ``target_ms`` (their bucket's top
        is under it) and surely at or over it (their bucket's bottom is); the samples of
        the bucket that holds the target are in neither."""
        if self.count == 0:
            return 0, 0
        self._flush()
        counts = np.ctypeslib.as_array(self._hdr.counts)[: self._hdr.counts_len]
        below = above = 0
        target_ns = target_ms * 1e6
        for i in np.flatnonzero(counts):
            lo_ns, hi_ns = self._edges_ns(int(i))
            if hi_ns < target_ns:
                below += int(counts[i])
            elif lo_ns >= target_ns:
                above += int(counts[i])
        return below, above

    @property
    def mean(self) -> float:
        return self.sum_ns / self.count / 1e6 if self.count else math.nan

    @property
    def max(self) -> float:
        return self.max_ns / 1e6 if self.count else math.nan

    @property
    def min(self) -> float:
        return self.min_ns / 1e6 if self.count else math.nan

    def stat(self, name: str) -> float:
        """A statistic by its SLO name: any percentile ``pN`` / ``pN.M`` (``p50``, ``p75``,
        ``p99.99``), ``mean``, ``max``, ``min``; KeyError names a word that is none of them."""
        if name in ("mean", "max", "min"):
            return float(getattr(self, name))
        try:
            percentile = percentile_of(name)
        except ValueError as exc:
            raise KeyError(str(exc)) from None
        assert percentile is not None  # mean/max/min returned above
        return self.p(percentile)

    def summary(self, extra: tuple[str, ...] = ()) -> dict[str, float | int | None]:
        """The report's view: percentiles, mean, max (ms) and count; None where empty.

        ``extra`` are further statistics by name (``("p75", "p99.99")``, the ones a
        test's SLOs read), keyed as written, after the standard percentiles.
        """
        out: dict[str, float | int | None] = {}
        for p in PERCENTILES:
            out[_stat_key(p)] = _finite(self.p(p))
        for name in extra:
            out.setdefault(name, _finite(self.stat(name)) if self.count else None)
        out["mean"] = _finite(self.mean)
        out["max"] = _finite(self.max)
        out["min"] = _finite(self.min)
        out["count"] = self.count
        return out

    def buckets_ms(self) -> list[list[float]]:
        """The non-empty HDR buckets as ``[[upper_ms, count], …]``, ascending (``upper_ms``
        the highest value the bucket holds): the shape of a Prometheus histogram's bucket
        deltas, for readers that take percentiles from buckets."""
        if self.count == 0:
            return []
        self._flush()
        hdr = self._hdr
        counts = np.ctypeslib.as_array(hdr.counts)[: hdr.counts_len]
        return [
            [
                hdr.get_highest_equivalent_value(hdr.get_value_from_index(int(i))) / 1000.0,
                int(counts[i]),
            ]
            for i in np.flatnonzero(counts)
        ]

    def resolution_ms(self, value_ms: float) -> float:
        """The width of the HDR bucket that holds ``value_ms`` (1 µs below 2 ms, then
        about 0.1% of the value): how exactly a percentile near it is known."""
        us = max(LOWEST_US, min(HIGHEST_US, round(value_ms * 1000)))
        hdr = self._hdr
        low: int = hdr.get_lowest_equivalent_value(us)
        high: int = hdr.get_highest_equivalent_value(us)
        return (high - low + 1) / 1000.0

    def cdf_points(self, max_points: int = 200) -> list[tuple[float, float]]:
        """(value ms, cumulative fraction) pairs for plotting, at most ``max_points``."""
        if self.count == 0:
            return []
        self._flush()
        counts = np.ctypeslib.as_array(self._hdr.counts)[: self._hdr.counts_len]
        nonzero = np.flatnonzero(counts)
        cum = np.cumsum(counts[nonzero]) / self.count
        step = max(1, len(nonzero) // max_points)
        picks = list(range(0, len(nonzero), step))
        if picks[-1] != len(nonzero) - 1:
            picks.append(len(nonzero) - 1)
        return [
            (
                self._hdr.get_highest_equivalent_value(
                    self._hdr.get_value_from_index(int(nonzero[i]))
                )
                / 1000.0,
                float(cum[i]),
            )
            for i in picks
        ]

    # -- transport -------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """A JSON-able, lossless form (HDR's compressed base64 encoding plus exact moments)."""
        self._flush()
        return {
            "hdr": self._hdr.encode().decode("ascii") if self.count else "",
            "count": self.count,
            "sum_ns": self.sum_ns,
            "min_ns": self.min_ns,
            "max_ns": self.max_ns,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> LatencyHistogram:
        hist = cls()
        if state.get("count"):
            decoded = HdrHistogram.decode(state["hdr"].encode("ascii"))
            hist._hdr.add(decoded)
            hist.count = int(state["count"])
            hist.sum_ns = int(state["sum_ns"])
            hist.min_ns = int(state["min_ns"])
            hist.max_ns = int(state["max_ns"])
        return hist

    def __repr__(self) -> str:
        if not self.count:
            return "LatencyHistogram(empty)"
        return (
            f"LatencyHistogram(count={self.count}, p50={self.p(50):.3f}ms, "
            f"p99={self.p(99):.3f}ms, max={self.max:.3f}ms)"
        )


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)
