"""Knee, saturation and search logic on known curves (no server needed)."""

from __future__ import annotations

import pytest

from pytest_llmperf.methodology.search import _search
from pytest_llmperf.methodology.sweep import find_knee, find_saturation
from pytest_llmperf.methodology.warm_up import consecutive_variation


def test_knee_is_first_level_with_p99_over_twice_the_minimum() -> None:
    levels = [2, 6, 10, 14, 18, 22]
    p99 = [423, 448, 462, 898, 1234, 2345]  # the draft's example table (TTFT P99)
    assert find_knee(levels, p99) == 14
    assert find_knee(levels, [10, 11, 12, 13, 14, 15]) is None
    assert find_knee([1, 2], [float("nan"), 5.0]) is None


def test_saturation_is_where_throughput_stops_rising() -> None:
    levels = [2, 6, 10, 14, 18, 22, 26]
    achieved = [284, 852, 1420, 1988, 2534, 2712, 2700]
    assert find_saturation(levels, achieved) == 22  # 2712 -> 2700 does not rise
    assert find_saturation(levels[:6], achieved[:6]) is None  # still rising by > 5%
    assert find_saturation([1, 2, 3], [100, 103, 200]) == 1  # a rise under 5% counts as a stop


class _Server:
    """A pretend capacity: a level passes when it is at most ``limit``."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.probed: list[float] = []

    async def probe(self, level: float):
        self.probed.append(level)
        return level <= self.limit, None, []


@pytest.mark.asyncio
@pytest.mark.parametrize("limit", [7.0, 33.3, 99.0])
async def test_rate_search_brackets_the_limit_within_tolerance(limit: float) -> None:
    server = _Server(limit)
    record: list = []
    best = await _search(
        server.probe, 5.0, 100.0, integer=False, tolerance=0.05, max_probes=20, record=record
    )
    assert best is not None and best <= limit
    assert (limit - best) <= 0.05 * best + 1e-9 or best == 100.0
    assert len(record) == len(server.probed) <= 20


@pytest.mark.asyncio
async def test_rate_search_reports_none_when_the_lowest_level_fails() -> None:
    server = _Server(1.0)
    assert await _search(server.probe, 5.0, 100.0, integer=False, tolerance=0.1,
                         max_probes=8, record=[]) is None  # fmt: skip
    assert server.probed == [5.0]


@pytest.mark.asyncio
async def test_concurrency_search_doubles_then_bisects_to_the_exact_integer() -> None:
    server = _Server(45)
    record: list = []
    best = await _search(
        server.probe, 8, 512, integer=True, tolerance=0.0, max_probes=20,
        expand_from=8, record=record,
    )  # fmt: skip
    assert best == 45
    assert server.probed[:4] == [8, 16, 32, 64]  # the doubling phase
    top = _Server(10_000)
    assert await _search(top.probe, 8, 64, integer=True, tolerance=0.0, max_probes=20,
                         expand_from=8, record=[]) == 64  # fmt: skip


def test_consecutive_variation() -> None:
    assert consecutive_variation([100, 105, 104]) == pytest.approx(0.05)
    assert consecutive_variation([1.0]) is None
