"""pytest-llmperf: performance tests of LLM serving endpoints, and the library under them.

pytest loads the plugin (:mod:`pytest_llmperf.plugin`) by its entry point;
this module is the library's front door: the names needed to run a workload
against an endpoint, read the results and judge SLOs, with or without pytest
(``__all__``). Sub-packages export more (``pytest_llmperf.analysis``,
``.metrics``, ``.reports``, ``.sim``, …); extension hooks are in
:mod:`pytest_llmperf.hooks` (docs/extending.md).

Each name is imported on first use (PEP 562 ``__getattr__``), ``__version__``
too: the whole list pulls in numpy, the HDR histograms, httpx and aiohttp
(~0.45 s), and every pytest run, with or without a performance test, imports
this package first (``import pytest_llmperf`` alone imports nothing else).
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing typing (~2 ms); mypy and pyright read it alike
TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads these
    from pytest_llmperf.client.endpoint import Endpoint, Timeouts
    from pytest_llmperf.client.records import ErrorKind, RequestRecord
    from pytest_llmperf.errors import (
        LlmPerfBlankWarning,
        LlmPerfInconclusiveWarning,
        LlmPerfTokenLengthWarning,
        LlmPerfUsageError,
    )
    from pytest_llmperf.hook_calls import LlmPerfHookError
    from pytest_llmperf.loadgen.generator import LoadGenerator
    from pytest_llmperf.loadgen.run import run_load
    from pytest_llmperf.methodology.llm_loadgen import LlmLoadgen
    from pytest_llmperf.metrics.histogram import LatencyHistogram
    from pytest_llmperf.results.accumulator import MetricsAccumulator
    from pytest_llmperf.results.event_log import analyse_event_log
    from pytest_llmperf.results.run_result import RunResult
    from pytest_llmperf.session_tokenizer import TokenizerFallbackWarning
    from pytest_llmperf.sim.process import SimProcess, start_sim_process
    from pytest_llmperf.sim.virtual import VirtualResult, run_virtual
    from pytest_llmperf.slo.verdict_record import SloVerdict
    from pytest_llmperf.slo.verdicts import evaluate_runs
    from pytest_llmperf.specs.load import LoadSpec
    from pytest_llmperf.specs.perf import PerfSpec
    from pytest_llmperf.specs.rulesets import Ruleset, load_ruleset
    from pytest_llmperf.specs.run import RunSpec
    from pytest_llmperf.specs.slo import Slo, parse_slo
    from pytest_llmperf.workloads.base import (
        Sample,
        Workload,
        build_workload,
        register_workload,
        workload_names,
    )
    from pytest_llmperf.workloads.tokenizer import Tokenizer

    __version__: str

# public name -> the module that defines it (keep in step with the TYPE_CHECKING block;
# tests/core/test_public_api.py checks both)
_EXPORTS: dict[str, str] = {
    # the endpoint and the wire
    "Endpoint": "pytest_llmperf.client.endpoint",
    "Timeouts": "pytest_llmperf.client.endpoint",
    "ErrorKind": "pytest_llmperf.client.records",
    "RequestRecord": "pytest_llmperf.client.records",
    # what a test declares
    "PerfSpec": "pytest_llmperf.specs.perf",
    "RunSpec": "pytest_llmperf.specs.run",
    "LoadSpec": "pytest_llmperf.specs.load",
    "Slo": "pytest_llmperf.specs.slo",
    "parse_slo": "pytest_llmperf.specs.slo",
    "Ruleset": "pytest_llmperf.specs.rulesets",
    "load_ruleset": "pytest_llmperf.specs.rulesets",
    # workloads
    "Sample": "pytest_llmperf.workloads.base",
    "Workload": "pytest_llmperf.workloads.base",
    "build_workload": "pytest_llmperf.workloads.base",
    "register_workload": "pytest_llmperf.workloads.base",
    "workload_names": "pytest_llmperf.workloads.base",
    "Tokenizer": "pytest_llmperf.workloads.tokenizer",
    # running load, and what a run yields
    "LoadGenerator": "pytest_llmperf.loadgen.generator",
    "RunResult": "pytest_llmperf.results.run_result",
    "run_load": "pytest_llmperf.loadgen.run",  # one run of a RunSpec, no generator
    "LlmLoadgen": "pytest_llmperf.methodology.llm_loadgen",  # the llm_loadgen fixture's type
    "MetricsAccumulator": "pytest_llmperf.results.accumulator",
    "LatencyHistogram": "pytest_llmperf.metrics.histogram",
    "analyse_event_log": "pytest_llmperf.results.event_log",
    # verdicts
    "SloVerdict": "pytest_llmperf.slo.verdict_record",
    "evaluate_runs": "pytest_llmperf.slo.verdicts",
    # the embedded simulator
    "SimProcess": "pytest_llmperf.sim.process",
    "start_sim_process": "pytest_llmperf.sim.process",
    "VirtualResult": "pytest_llmperf.sim.virtual",
    "run_virtual": "pytest_llmperf.sim.virtual",
    # errors and warnings (for pytest.raises, pytest.warns, filterwarnings)
    "LlmPerfUsageError": "pytest_llmperf.errors",
    "LlmPerfHookError": "pytest_llmperf.hook_calls",
    "LlmPerfBlankWarning": "pytest_llmperf.errors",
    "LlmPerfInconclusiveWarning": "pytest_llmperf.errors",
    "LlmPerfTokenLengthWarning": "pytest_llmperf.errors",
    "TokenizerFallbackWarning": "pytest_llmperf.session_tokenizer",
}

__all__ = [
    "Endpoint",
    "ErrorKind",
    "LatencyHistogram",
    "LlmLoadgen",
    "LlmPerfBlankWarning",
    "LlmPerfHookError",
    "LlmPerfInconclusiveWarning",
    "LlmPerfTokenLengthWarning",
    "LlmPerfUsageError",
    "LoadGenerator",
    "LoadSpec",
    "MetricsAccumulator",
    "PerfSpec",
    "RequestRecord",
    "Ruleset",
    "RunResult",
    "RunSpec",
    "Sample",
    "SimProcess",
    "Slo",
    "SloVerdict",
    "Timeouts",
    "Tokenizer",
    "TokenizerFallbackWarning",
    "VirtualResult",
    "Workload",
    "analyse_event_log",
    "build_workload",
    "evaluate_runs",
    "load_ruleset",
    "parse_slo",
    "register_workload",
    "run_load",
    "run_virtual",
    "start_sim_process",
    "workload_names",
]

DISTRIBUTION = "pytest-llmperf"
UNKNOWN_VERSION = "0+unknown"


def __getattr__(name: str) -> object:
    if name == "__version__":
        value: object = _version()
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})


def _version() -> str:
    """The installed distribution's version; from a source checkout, its pyproject.toml's.

    ``importlib.metadata`` costs ~20 ms to import, hence only when asked.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return _checkout_version() or UNKNOWN_VERSION


def _checkout_version() -> str | None:
    """The version in the ``pyproject.toml`` beside this package, if it is this project's."""
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if project.get("name") != DISTRIBUTION or not isinstance(project.get("version"), str):
        return None
    return str(project["version"])
