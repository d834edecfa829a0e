"""The load generator: when to send which request, and the run's lifecycle."""

from pytest_llmperf.loadgen.patterns import LOAD_PATTERNS, LoadSpec, arrival_offsets_ns
from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.loadgen.sample_order import SAMPLE_ORDERS, SampleOrder
from pytest_llmperf.loadgen.session import LoadRun, ScheduleShare, run_load

__all__ = [
    "LOAD_PATTERNS",
    "SAMPLE_ORDERS",
    "LoadRun",
    "LoadSpec",
    "RunResult",
    "SampleOrder",
    "ScheduleShare",
    "arrival_offsets_ns",
    "run_load",
]
