"""The load generator: when to send which request, and the run's lifecycle.

Layers below: :mod:`pytest_llmperf.specs` (what a test declares),
:mod:`pytest_llmperf.client` (one request) and :mod:`pytest_llmperf.results`
(what a run measured: the generator writes its records there and returns a
:class:`RunResult`, re-exported here). :mod:`pytest_llmperf.slo` and
:mod:`pytest_llmperf.analysis` read results without importing the generator;
:mod:`pytest_llmperf.methodology` drives :class:`LoadGenerator` through sweeps,
searches, warm-up and multi-configuration runs.
"""

from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.loadgen.issue.delivery import RecordObserver
from pytest_llmperf.loadgen.plan.arrivals import arrival_offsets_ns
from pytest_llmperf.loadgen.plan.planner import RunPlan, ScheduleShare
from pytest_llmperf.loadgen.plan.sample_order import SampleOrder
from pytest_llmperf.loadgen.run import LoadRun, run_load
from pytest_llmperf.results.run_result import RunResult

__all__ = [
    "LoadGenerator",
    "LoadRun",
    "RecordObserver",
    "RunPlan",
    "RunResult",
    "SampleOrder",
    "ScheduleShare",
    "arrival_offsets_ns",
    "run_load",
]
