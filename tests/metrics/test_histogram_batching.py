"""Batched HDR recording is bucket-for-bucket what recording one value at a time gives."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from pytest_llmperf.metrics.histogram import (
    HIGHEST_US,
    LOWEST_US,
    SIGNIFICANT_DIGITS,
    LatencyHistogram,
)


def reference(values: list[int]) -> HdrHistogram:
    ref = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
    for v in values:
        ref.record_value(min(HIGHEST_US, (max(0, v) + 500) // 1000))
    return ref


def counts(h: HdrHistogram) -> np.ndarray:
    return np.ctypeslib.as_array(h.counts)[: h.counts_len].copy()


def test_batched_buckets_equal_one_by_one_over_every_magnitude() -> None:
    rng = random.Random(5)
    values = [int(rng.expovariate(1 / 10 ** rng.randint(2, 13))) for _ in range(30_000)]
    values += [-5, 0, 499, 500, 1_000_000, 10**19 // 10**6]  # edges, negatives, beyond range
    hist = LatencyHistogram()
    for v in values:
        hist.record_ns(v)
    state = hist.to_state()  # flushes
    ref = reference(values)
    assert (counts(hist._hdr) == counts(ref)).all()
    assert hist._hdr.total_count == ref.total_count == len(values)
    back = LatencyHistogram.from_state(state)
    assert back.p(99) == hist.p(99)
    assert back.count == hist.count


def test_readers_see_values_still_in_the_buffer() -> None:
    hist = LatencyHistogram()
    for ms in (1, 2, 3, 4, 100):
        hist.record_ns(ms * 1_000_000)
    assert hist.p(50) == pytest.approx(3.0, rel=5e-4)  # HDR: 3 significant digits
    assert hist.p(100) == 100.0
    other = LatencyHistogram()
    other.record_ns(7_000_000)
    hist.merge(other)
    assert hist.count == 6
    assert hist.p(90) == pytest.approx(100.0, rel=5e-4)
    assert hist.cdf_points()[-1][1] == 1.0


def test_weighted_and_bulk_recording_equal_one_by_one() -> None:
    """``record_ns(v, count)`` and ``record_many_ns`` land in the buckets as single records do."""
    rng = random.Random(11)
    weighted = [
        (int(rng.expovariate(1 / 10 ** rng.randint(3, 10))), rng.randint(1, 400))
        for _ in range(5_000)
    ]
    bulk = [[int(rng.expovariate(1e-7)) for _ in range(rng.randint(0, 40))] for _ in range(300)]
    bulk.append([-3, 0, 12_000])  # a negative gap clamps to 0
    hist = LatencyHistogram()
    for value, count in weighted:
        hist.record_ns(value, count)
    for gaps in bulk:
        hist.record_many_ns(gaps)
    flat = [v for v, c in weighted for _ in range(c)] + [max(0, v) for g in bulk for v in g]
    ref = reference(flat)
    hist.to_state()  # flushes the buffers
    assert (counts(hist._hdr) == counts(ref)).all()
    assert hist.count == hist._hdr.total_count == ref.total_count == len(flat)
    assert hist.sum_ns == sum(flat)
    assert hist.min_ns == min(flat)
    assert hist.max_ns == max(flat)
