"""Metrics: HDR latency histograms and per-run accumulation of request records."""

from pytest_llmperf.metrics.accumulator import LATENCY_METRICS, RATE_METRICS, MetricsAccumulator
from pytest_llmperf.metrics.histogram import PERCENTILES, LatencyHistogram

__all__ = [
    "LATENCY_METRICS",
    "PERCENTILES",
    "RATE_METRICS",
    "LatencyHistogram",
    "MetricsAccumulator",
]
