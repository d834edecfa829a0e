"""The load generator: when to send which request, and the run's lifecycle.

Layers below: :mod:`pytest_llmperf.specs` (what a test declares),
:mod:`pytest_llmperf.client` (one request) and :mod:`pytest_llmperf.results`
(what a run measured: the generator writes its records there and returns a
:class:`RunResult`, re-exported here). :mod:`pytest_llmperf.slo` and
:mod:`pytest_llmperf.analysis` read results without importing the generator;
:mod:`pytest_llmperf.methodology` drives :class:`LoadGenerator` through sweeps,
searches, warm-up and multi-configuration runs.

Each name is imported on first use (PEP 562 ``__getattr__``): a worker process or
Ray actor imports a module of this package (its entry module, by name), which
imports this ``__init__`` first, and must not load the generator, the run, the
dispatcher and the pools with it: it runs only its share
(``tests/loadgen/test_worker_imports.py`` checks what a worker loads).
"""

from __future__ import annotations

from pytest_llmperf.lazy_names import lazy_names

# typing.TYPE_CHECKING without importing typing; mypy and pyright read it alike
TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads these
    from pytest_llmperf.loadgen.generator import LoadGenerator
    from pytest_llmperf.loadgen.issue.delivery import RecordObserver
    from pytest_llmperf.loadgen.plan.arrivals import arrival_offsets_ns
    from pytest_llmperf.loadgen.plan.planner import RunPlan, ScheduleShare
    from pytest_llmperf.loadgen.plan.sample_order import SampleOrder
    from pytest_llmperf.loadgen.run import LoadRun, run_load
    from pytest_llmperf.results.run_result import RunResult

# public name -> the module that defines it (keep in step with the TYPE_CHECKING block)
_EXPORTS: dict[str, str] = {
    "LoadGenerator": "pytest_llmperf.loadgen.generator",
    "LoadRun": "pytest_llmperf.loadgen.run",
    "RecordObserver": "pytest_llmperf.loadgen.issue.delivery",
    "RunPlan": "pytest_llmperf.loadgen.plan.planner",
    "RunResult": "pytest_llmperf.results.run_result",
    "SampleOrder": "pytest_llmperf.loadgen.plan.sample_order",
    "ScheduleShare": "pytest_llmperf.loadgen.plan.planner",
    "arrival_offsets_ns": "pytest_llmperf.loadgen.plan.arrivals",
    "run_load": "pytest_llmperf.loadgen.run",
}

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


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
