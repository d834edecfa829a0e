"""Metrics: HDR latency histograms, per-run accumulation, and the run's event log."""

from pytest_llmperf.metrics.accumulator import LATENCY_METRICS, RATE_METRICS, MetricsAccumulator
from pytest_llmperf.metrics.event_log import analyse_event_log, read_meta, read_records
from pytest_llmperf.metrics.histogram import PERCENTILES, LatencyHistogram
from pytest_llmperf.metrics.recorder import EventRecorder
from pytest_llmperf.metrics.sample_size import min_samples, supported_percentile

__all__ = [
    "LATENCY_METRICS",
    "PERCENTILES",
    "RATE_METRICS",
    "EventRecorder",
    "LatencyHistogram",
    "MetricsAccumulator",
    "analyse_event_log",
    "min_samples",
    "read_meta",
    "read_records",
    "supported_percentile",
]
