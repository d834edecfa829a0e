import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmperf.metrics import LatencyHistogram


def exact_nearest_rank(values: np.ndarray, p: float) -> float:
    ordered = np.sort(values)  # rank in exact decimals: in floats 99.9/100*20000 > 19980
    return float(ordered[math.ceil(Fraction(str(p)) * len(ordered) / 100) - 1])


@pytest.mark.parametrize("p", [50, 90, 95, 99, 99.9])
def test_percentiles_match_exact_nearest_rank_within_resolution(p: float) -> None:
    rng = np.random.default_rng(7)
    values = rng.lognormal(np.log(80e6), 0.6, 20_000).astype(np.int64)
    hist = LatencyHistogram()
    for v in values:
        hist.record_ns(int(v))
    exact_ms = exact_nearest_rank(values, p) / 1e6
    assert hist.p(p) == pytest.approx(exact_ms, rel=6e-4)


def test_small_values_are_exact_to_the_microsecond() -> None:
    hist = LatencyHistogram()
    for us in (100, 200, 300, 400):
        hist.record_ns(us * 1000)
    assert hist.p(50) == pytest.approx(0.2)
    assert hist.p(75) == pytest.approx(0.3)
    assert hist.max == pytest.approx(0.4) and hist.min == pytest.approx(0.1)
    assert hist.mean == pytest.approx(0.25)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 10**10), min_size=1, max_size=200),
    st.lists(st.integers(0, 10**10), min_size=1, max_size=200),
)
def test_merge_equals_recording_everything_in_one(a: list[int], b: list[int]) -> None:
    left, right, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    for v in a:
        left.record_ns(v)
        both.record_ns(v)
    for v in b:
        right.record_ns(v)
        both.record_ns(v)
    left.merge(right)
    assert left.count == both.count and left.sum_ns == both.sum_ns
    assert left.min_ns == both.min_ns and left.max_ns == both.max_ns
    for p in (50, 90, 99, 99.9):
        assert left.p(p) == both.p(p)


def test_state_round_trip_is_lossless() -> None:
    hist = LatencyHistogram()
    for v in range(1, 5000, 7):
        hist.record_ns(v * 1_000_003)
    copy = LatencyHistogram.from_state(hist.to_state())
    assert copy.summary() == hist.summary()
    assert LatencyHistogram.from_state(LatencyHistogram().to_state()).count == 0


def test_empty_histogram_reports_nothing() -> None:
    hist = LatencyHistogram()
    assert math.isnan(hist.p(99)) and math.isnan(hist.mean)
    assert hist.summary()["p99"] is None and hist.summary()["count"] == 0


def test_weighted_record_counts_each_unit() -> None:
    hist = LatencyHistogram()
    hist.record_ns(10_000_000, count=9)
    hist.record_ns(50_000_000)
    assert hist.count == 10 and hist.p(90) == pytest.approx(10.0, rel=1e-3)
    assert hist.p(100) == pytest.approx(50.0)
