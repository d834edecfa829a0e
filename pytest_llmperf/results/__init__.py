"""Results: what a run measured, the floor the load generator writes into.

The client makes a ``RequestRecord`` where the bytes are read; the load generator
hands each to a ``MetricsAccumulator`` (and an ``EventRecorder`` for the event log)
and ends the run as a ``RunResult``. Verdicts (``slo/``), analyses, reports and the
history read these and never the load generator: they sit above this floor, the
load generator above it too.
"""

from pytest_llmperf.results.accumulator import LATENCY_METRICS, RATE_METRICS, MetricsAccumulator
from pytest_llmperf.results.event_log import analyse_event_log, read_meta, read_records
from pytest_llmperf.results.recorder import EventRecorder
from pytest_llmperf.results.run_result import RunResult, StopReason, token_length_warnings

__all__ = [
    "LATENCY_METRICS",
    "RATE_METRICS",
    "EventRecorder",
    "MetricsAccumulator",
    "RunResult",
    "StopReason",
    "analyse_event_log",
    "read_meta",
    "read_records",
    "token_length_warnings",
]
