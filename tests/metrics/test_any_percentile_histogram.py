"""Any percentile read from the HDR histogram is the nearest-rank sample of the raw data.

The reference is a plain sorted list: the p-th percentile is the sample at
rank ``ceil(p/100 × n)`` (in exact decimals), see docs/measurement.md. The
data sit on a 1% geometric grid, so neighbouring distinct samples differ by
at least 1% while the histogram is within 0.05% of each: a rank off by one
cannot pass as rounding.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from pytest_llmperf.metrics.histogram import LatencyHistogram

FIXED = [0.5, 1, 12.5, 33.3, 50, 75, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100]


def sorted_list_nearest_rank(ordered: list[int], percentile: float) -> int:
    rank = max(1, math.ceil(Fraction(str(percentile)) * len(ordered) / 100))
    return ordered[rank - 1]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("count", [1, 4, 7, 40, 999, 1000, 2000, 20_000])
def test_any_percentile_matches_a_sorted_list_on_random_data(seed: int, count: int) -> None:
    rng = np.random.default_rng(seed * 100_003 + count)
    steps = rng.integers(0, 1500, size=count)  # with repeats: ties are part of the test
    values_ns = [round(1e6 * 1.01 ** int(k)) for k in steps]  # 1 ms .. ~50 min
    hist = LatencyHistogram()
    for v in values_ns:
        hist.record_ns(v)
    ordered = sorted(values_ns)
    randoms = [round(float(x), 3) for x in rng.uniform(0.001, 99.999, size=10)]
    for p in [*FIXED, *randoms]:
        if p <= 0:
            continue
        exact_ms = sorted_list_nearest_rank(ordered, p) / 1e6
        assert hist.p(p) == pytest.approx(exact_ms, rel=6e-4), (p, count)


def test_stat_reads_any_percentile_by_its_slo_name() -> None:
    hist = LatencyHistogram()
    for ms in range(1, 101):
        hist.record_ns(ms * 1_000_000)
    assert hist.stat("p75") == hist.p(75) == pytest.approx(75, rel=6e-4)
    assert hist.stat("p99.99") == hist.p(99.99) == pytest.approx(100, rel=6e-4)
    assert hist.stat("p0.5") == pytest.approx(1, rel=6e-4)
    assert hist.stat("mean") == pytest.approx(50.5)
    for bad in ("p100.5", "p0", "p", "p7x", "p50.", "median"):
        with pytest.raises(KeyError, match="unknown statistic"):
            hist.stat(bad)


def test_summary_adds_requested_percentiles_beside_the_standard_ones() -> None:
    hist = LatencyHistogram()
    for ms in range(1, 1001):
        hist.record_ns(ms * 1_000_000)
    summary = hist.summary(("p75", "p99.99", "p99"))
    keys = list(summary)
    assert keys[:5] == ["p50", "p90", "p95", "p99", "p99.9"]
    assert keys[5:7] == ["p75", "p99.99"]  # p99 is standard: not twice
    assert summary["p75"] == pytest.approx(750, rel=6e-4)
    assert summary["p99.99"] == pytest.approx(1000, rel=6e-4)
    assert list(LatencyHistogram().summary(("p75",)).items())[5] == ("p75", None)
    assert "p75" not in hist.summary()  # not requested, not shown
