"""The markers: their help texts, what a test stashes, and reading them into specs.

Bad marker arguments are usage errors that name the test and the bad word
(collected in :mod:`~pytest_llmperf.plugin.collection`, before any request is sent).
So is a marker named ``llm_*`` that is not one of ours (``llm_slos``, a typo that
pytest would only warn about, and that would leave the test unjudged), unless the
user registered it (the ini's ``markers``, or another plugin's): ``llm_*`` marks of
their own are theirs.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

import pytest

from pytest_llmperf.errors import (
    LlmPerfUsageError,
    did_you_mean,
)
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.options import InconclusivePolicy
from pytest_llmperf.plugin.endpoints import EndpointSpec
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.workloads.apis import Api, parse_api

MARKERS = {
    "llm_workload": "llm_workload(name, requests=N, seed=S, **params): the requests an "
    "llm_loadgen run sends (pytest-llmperf)",
    "llm_load": "llm_load(pattern, rate=R | concurrency=C, duration=S): when requests are sent; "
    "pattern is poisson, constant, concurrency or max-throughput (pytest-llmperf)",
    "llm_slo": "llm_slo('ttft.p99 < 500ms', ..., ruleset=NAME): objectives judged on the "
    "test's runs after the test body (pytest-llmperf)",
    "llm_endpoint": "llm_endpoint('sim:PROFILE' | URL, model=None, api=None): the endpoint this "
    "test's llm_loadgen measures (--llm-endpoint on the command line overrides the server) and "
    "the API it drives (chat, completions, responses, messages, embeddings; default --llm-api) "
    "(pytest-llmperf)",
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


def registered_elsewhere(config: pytest.Config) -> frozenset[str]:
    """The ``llm_*`` markers registered by the user's ini (``markers =``) or another
    plugin, not by us: marks of the user's own, which collection leaves alone."""
    lines: list[str] = config.getini("markers")
    names = {line.split(":")[0].split("(")[0].strip() for line in lines}
    return frozenset(n for n in names if n.startswith("llm_") and n not in MARKERS)


def unknown_marks(item: pytest.Item, registered: frozenset[str]) -> list[str]:
    """One line per ``llm_*`` mark on ``item`` (at any level) that is neither ours nor
    ``registered``: its name, the nearest of ours, and all of ours."""
    names = dict.fromkeys(m.name for m in item.iter_markers())  # first seen, once each
    return [
        f"unknown marker {name}{did_you_mean(name, MARKERS)}; pytest-llmperf's markers are "
        f"{', '.join(MARKERS)} (register a marker of your own in the ini's markers)"
        for name in names
        if name.startswith("llm_") and name not in MARKERS and name not in registered
    ]


def endpoint_spec(item: pytest.Item, mark: pytest.Mark, default: EndpointSpec) -> EndpointSpec:
    """``llm_endpoint("sim:tiny" | URL, model=None, api=None)``, or ``llm_endpoint(api=...)``
    alone (the session's endpoint, ``default``, driven through another API); a bad one
    names the test."""
    where = f"{item.nodeid} llm_endpoint marker"
    args, kwargs = mark.args, mark.kwargs
    if len(args) > 1 or set(kwargs) - {"model", "api"} or not (args or "api" in kwargs):
        raise LlmPerfUsageError(
            f"takes one spec ('sim:PROFILE' or a URL), model=... and api=..., or api=... "
            f"alone, got args={args!r} kwargs={kwargs!r}",
            where=where,
        )
    api = parse_api(kwargs["api"], where=f"{where} api=") if "api" in kwargs else None
    if not args:
        if "model" in kwargs:
            raise LlmPerfUsageError("model= needs a spec ('sim:PROFILE' or a URL)", where=where)
        return replace(default, api=api)
    return EndpointSpec.parse(args[0], model=kwargs.get("model"), api=api, where=where)


def api_of_test(item: pytest.Item, default: EndpointSpec, session_api: str) -> Api:
    """The API ``item`` drives: its ``llm_endpoint`` marker's ``api=``, else the session's."""
    mark = item.get_closest_marker("llm_endpoint")
    spec = endpoint_spec(item, mark, default) if mark is not None else None
    return Api(spec.api if spec is not None and spec.api is not None else session_api)


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
