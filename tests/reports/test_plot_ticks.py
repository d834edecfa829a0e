"""Axis ticks of the report's plots: distinct values on a 1-2-5 step, labelled with as
many decimals as the step needs (a narrow CDF once read "21 22 22 22")."""

from __future__ import annotations

import itertools
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.reports.plots import cdf_plot, histogram_plot, ttft_split_plot
from pytest_llmperf.reports.time_split import SplitPart, TimeSplit
from pytest_llmperf.svg import nice_ticks, tick_labels


def axis_labels(svg: str, axis: str) -> list[str]:
    return re.findall(rf'class="tick" data-axis="{axis}">([^<]*)</text>', svg)


def number(label: str) -> float:
    return float(label.replace(",", ""))


def assert_nice(labels: list[str]) -> float:
    """Distinct labels, increasing by one 1-2-5 step, each written with the step's
    decimals (and no more): returns the step."""
    assert len(labels) >= 2, labels
    assert len(set(labels)) == len(labels), labels
    values = [number(label) for label in labels]
    steps = {round(b - a, 9) for a, b in itertools.pairwise(values)}
    assert len(steps) == 1, labels
    (step,) = steps
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1, 2, 5), labels
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    for label in labels:
        written = len(label.partition(".")[2])
        assert written == decimals or label == "0", (label, labels)
    return step


def narrow_histogram(low_ms: float, high_ms: float, n: int = 400) -> LatencyHistogram:
    hist = LatencyHistogram()
    for i in range(n):
        value_ms = low_ms + (high_ms - low_ms) * i / (n - 1)
        hist.record_ns(round(value_ms * 1e6))
    return hist


def test_a_narrow_cdf_reads_distinct_labels_with_the_steps_decimals() -> None:
    svg = cdf_plot(narrow_histogram(20.5, 23.0), "ttft")
    labels = axis_labels(svg, "x")
    # the old labels: "20 21 22 22 22 23" (whole milliseconds at 0.5 ms steps)
    assert assert_nice(labels) == 0.5
    every = ["20.5", "21.0", "21.5", "22.0", "22.5", "23.0"]  # the HDR buckets' bounds decide
    assert len(labels) >= 4 and labels == every[every.index(labels[0]) :][: len(labels)]
    assert axis_labels(svg, "y") == ["0", "50", "100"]  # the share: whole percent


def test_a_narrower_histogram_gets_a_finer_step_and_more_decimals() -> None:
    svg = histogram_plot(narrow_histogram(20.50, 20.62), "tpot")
    labels = axis_labels(svg, "x")
    assert assert_nice(labels) <= 0.05
    assert all(len(label) == len("20.50") for label in labels)
    assert all(20.5 <= number(label) <= 20.63 for label in labels)


def test_the_ttft_split_bars_label_their_axis_alike() -> None:
    queue = SplitPart("server_queue", "server queue", {"mean": 0.4, "p50": 0.3, "p99": 0.9})
    split = TimeSplit(
        per_request=False,
        count=100,
        ttft={"mean": 1.1, "p50": 1.0, "p99": 1.3},
        parts=(queue,),
        server_ttft={},
    )
    labels = axis_labels(ttft_split_plot(split), "x")
    assert labels == ["0", "0.5", "1.0"]


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (20.5, 23.0, ["20.5", "21.0", "21.5", "22.0", "22.5", "23.0"]),
        (0.0, 100.0, ["0", "20", "40", "60", "80", "100"]),
        (995.0, 1012.0, ["995", "1,000", "1,005", "1,010"]),
        (0.001, 0.004, ["0.001", "0.002", "0.003", "0.004"]),
        (-3.0, 3.0, ["-2", "0", "2"]),
    ],
)
def test_tick_labels(low: float, high: float, expected: list[str]) -> None:
    assert tick_labels(nice_ticks(low, high)) == expected


def test_a_step_off_the_series_still_reads_distinct() -> None:
    assert tick_labels([20.0, 20.25, 20.5]) == ["20.00", "20.25", "20.50"]
    assert tick_labels([7.0]) == ["7"]


@settings(deadline=None)  # CPU-timed: no wall-clock limit on a busy machine
@given(
    low=st.floats(-1e5, 1e5, allow_nan=False, allow_infinity=False),
    width=st.floats(1e-3, 1e5, allow_nan=False, allow_infinity=False),
    count=st.integers(5, 8),  # a step under (high - low) / 2: two ticks at least
)
def test_ticks_are_distinct_and_each_label_reads_back_its_value(
    low: float, width: float, count: int
) -> None:
    high = low + width
    ticks = nice_ticks(low, high, count)
    assert len(ticks) >= 2
    assert all(low - 1e-9 * width <= t <= high + 1e-9 * width for t in ticks)
    labels = tick_labels(ticks)
    assert_nice(labels)
    step = ticks[1] - ticks[0]
    for tick, label in zip(ticks, labels, strict=True):
        assert math.isclose(number(label), tick, rel_tol=0, abs_tol=step * 1e-6)
