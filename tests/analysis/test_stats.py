"""The statistics behind comparisons and fits, against known values."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.analysis.stats import (
    jain_index,
    linear_fit,
    mean_interval,
    nearest_rank,
    power_fit,
    t_quantile,
    t_sf,
    welch_test,
)


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [(0.975, 2, 4.302653), (0.975, 10, 2.228139), (0.95, 4, 2.131847), (0.995, 30, 2.749996)],
)
def test_t_quantiles_match_tables(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=1e-5)


def test_t_tail_is_symmetric_and_bounded() -> None:
    assert t_sf(0.0, 7) == pytest.approx(0.5)
    assert t_sf(2.0, 5) == pytest.approx(0.0509697, abs=1e-6)
    assert t_sf(-2.0, 5) == pytest.approx(1 - 0.0509697, abs=1e-6)


def test_welch_test_matches_a_known_case() -> None:
    # Reference values: Welch's t-test of [13, 14, 15.5] vs [10, 11, 12].
    result = welch_test([10, 11, 12], [13, 14, 15.5])
    assert result.t == pytest.approx(3.4125007, abs=1e-6)
    assert result.p_value == pytest.approx(0.0291453, abs=1e-6)
    assert result.difference == pytest.approx(3.1666667)
    assert result.low < result.difference < result.high and result.low > 0
    assert result.significant
    same = welch_test([10, 11, 12], [10.5, 11, 11.5])
    assert not same.significant


def test_mean_interval_and_degenerate_inputs() -> None:
    ci = mean_interval([1, 2, 3, 4])
    assert ci.mean == 2.5 and ci.half_width == pytest.approx(3.182446 * 1.2909944 / 2, rel=1e-5)
    one = mean_interval([5.0])
    assert one.mean == 5.0 and math.isnan(one.low)
    assert math.isnan(welch_test([1.0], [2.0, 3.0]).p_value)


def test_jain_index_bounds() -> None:
    assert jain_index([3, 3, 3]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([1, 2]) == pytest.approx(9 / 10)


def test_fits_recover_known_laws() -> None:
    xs = [1000, 2000, 4000, 8000]
    quadratic = power_fit(xs, [3e-6 * x * x for x in xs])
    assert quadratic.slope == pytest.approx(2.0) and quadratic.r_squared == pytest.approx(1.0)
    line = linear_fit(xs, [5 + 0.07 * x for x in xs])
    assert line.slope == pytest.approx(0.07) and line.intercept == pytest.approx(5)


def test_nearest_rank_definition() -> None:
    values = list(range(1, 101))
    assert nearest_rank(values, 50) == 50 and nearest_rank(values, 99) == 99
    assert nearest_rank([7.0], 99) == 7.0 and math.isnan(nearest_rank([], 50))


@pytest.mark.parametrize("count", [1000, 2000, 5000])
def test_nearest_rank_is_exact_where_binary_floats_round_up(count: int) -> None:
    """99.9 / 100 * 1000 is a hair above 999 in binary floating point: the rank must not be."""
    values = list(range(1, count + 1))
    assert nearest_rank(values, 99.9) == count * 999 // 1000
