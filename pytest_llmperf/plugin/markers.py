"""The markers: their help texts, what a test stashes, and reading them into specs.

Bad marker arguments are usage errors that name the test and the bad word
(collected in :mod:`~pytest_llmperf.plugin.collection`, before any request is sent).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from pytest_llmperf.errors import (
    LlmPerfUsageError,
)
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.options import InconclusivePolicy
from pytest_llmperf.plugin.endpoints import EndpointSpec
from pytest_llmperf.specs.perf import PerfSpec

MARKERS = {
    "llm_workload": "llm_workload(name, requests=N, seed=S, **params): the requests an "
    "llm_loadgen run sends (pytest-llmperf)",
    "llm_load": "llm_load(pattern, rate=R | concurrency=C, duration=S): when requests are sent; "
    "pattern is poisson, constant, concurrency or max-throughput (pytest-llmperf)",
    "llm_slo": "llm_slo('ttft.p99 < 500ms', ..., ruleset=NAME): objectives judged on the "
    "test's runs after the test body (pytest-llmperf)",
    "llm_endpoint": "llm_endpoint('sim:PROFILE' | URL, model=None): the endpoint this test's "
    "llm_loadgen measures; --llm-endpoint on the command line overrides it (pytest-llmperf)",
    "llm_inconclusive": "llm_inconclusive('fail' | 'warn' | 'skip'): what an inconclusive SLO "
    "does to this test; --llm-inconclusive on the command line overrides it (pytest-llmperf)",
}
LLM_MARKERS = tuple(MARKERS)
SPEC_KEY = pytest.StashKey[PerfSpec]()
GEN_KEY = pytest.StashKey[LoadGenerator]()
PAYLOAD_KEY = pytest.StashKey[dict[str, Any]]()
INCONCLUSIVE_KEY = pytest.StashKey[str]()  # the llm_inconclusive fixture's value for a test


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: object) -> None:
    """Mark async tests that use pytest-llmperf as asyncio tests (also in strict mode)."""
    if not inspect.iscoroutinefunction(obj):
        return
    marks = getattr(obj, "pytestmark", [])
    uses_llm = any(getattr(m, "name", "") in LLM_MARKERS for m in marks) or any(
        p.startswith("llm_") for p in inspect.signature(obj).parameters
    )
    if uses_llm and not any(getattr(m, "name", "") == "asyncio" for m in marks):
        pytest.mark.asyncio(obj)


def endpoint_spec(item: pytest.Item, mark: pytest.Mark) -> EndpointSpec:
    """``llm_endpoint("sim:tiny" | URL, model=None)``; a bad one names the test."""
    where = f"{item.nodeid} llm_endpoint marker"
    if len(mark.args) != 1 or set(mark.kwargs) - {"model"}:
        raise LlmPerfUsageError(
            f"takes one spec ('sim:PROFILE' or a URL) and model=..., got "
            f"args={mark.args!r} kwargs={mark.kwargs!r}",
            where=where,
        )
    return EndpointSpec.parse(mark.args[0], model=mark.kwargs.get("model"), where=where)


def marked_inconclusive(item: pytest.Item) -> InconclusivePolicy | None:
    """``llm_inconclusive("warn")`` (closest wins); a bad one names the test."""
    mark = item.get_closest_marker("llm_inconclusive")
    if mark is None:
        return None
    values = [p.value for p in InconclusivePolicy]
    if len(mark.args) != 1 or mark.kwargs or mark.args[0] not in values:
        raise LlmPerfUsageError(
            f"takes one of {', '.join(values)}, got args={mark.args!r} kwargs={mark.kwargs!r}",
            where=f"{item.nodeid} llm_inconclusive marker",
        )
    return InconclusivePolicy(mark.args[0])


def spec_for(item: pytest.Item) -> PerfSpec:
    workload = item.get_closest_marker("llm_workload")
    load = item.get_closest_marker("llm_load")
    # Every llm_slo applies: module, class and function levels add up.
    slos = [(m.args, m.kwargs) for m in item.iter_markers("llm_slo")]
    return PerfSpec.from_markers(
        (workload.args, workload.kwargs) if workload else None,
        (load.args, load.kwargs) if load else None,
        slos,
    )
