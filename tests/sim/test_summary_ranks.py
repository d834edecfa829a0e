"""The simulator's own summaries use the same exact nearest rank as the run metrics."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_llmperf.sim.summary import latency_stats, nearest_rank


@pytest.mark.parametrize("count", [1000, 2000, 5000])
def test_p99_9_is_the_exact_rank_not_one_above(count: int) -> None:
    values = np.arange(1, count + 1, dtype=np.float64)
    assert nearest_rank(values, 99.9) == count * 999 // 1000
    assert nearest_rank(values, 50) == count // 2


def test_latency_stats_reads_the_same_ranks() -> None:
    stats = latency_stats(np.arange(1, 1001, dtype=np.float64) / 1000.0)  # 1..1000 ms
    assert stats["p99.9"] == pytest.approx(999.0) and stats["max"] == pytest.approx(1000.0)
