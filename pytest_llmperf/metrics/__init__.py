"""Metrics: HDR latency histograms and how many samples a percentile needs.

A run's accumulation of these (records -> histograms -> ``RunResult``) lives in
:mod:`pytest_llmperf.results`, the floor the load generator writes into.
"""

from pytest_llmperf.metrics.histogram import PERCENTILES, LatencyHistogram
from pytest_llmperf.metrics.sample_size import min_samples, supported_percentile

__all__ = [
    "PERCENTILES",
    "LatencyHistogram",
    "min_samples",
    "supported_percentile",
]
