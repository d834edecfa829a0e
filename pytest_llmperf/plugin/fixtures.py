"""The fixtures: ``llm_endpoint``, ``llm_endpoints``, ``llm_inconclusive``, ``llm_loadgen``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.hook_calls import (
    call_run_finished,
)
from pytest_llmperf.methodology.llm_loadgen import LlmLoadgen
from pytest_llmperf.options import InconclusivePolicy
from pytest_llmperf.plugin.endpoints import EndpointPool
from pytest_llmperf.plugin.judging import rulesets_of
from pytest_llmperf.plugin.live_progress import progress_sink
from pytest_llmperf.plugin.markers import GEN_KEY, INCONCLUSIVE_KEY, SPEC_KEY, marked_affinity
from pytest_llmperf.plugin.otel_export import events_dir as otel_events_dir
from pytest_llmperf.plugin.servers import endpoint_for
from pytest_llmperf.plugin.state import STATE_KEY
from pytest_llmperf.plugin.under_test import check_comparability, reference_endpoint
from pytest_llmperf.plugin.under_test import endpoint as session_endpoint
from pytest_llmperf.slo.sequential import decider
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.specs.rulesets import ruleset_bars


@pytest.fixture(scope="session")
def llm_endpoint(pytestconfig: pytest.Config) -> Endpoint:
    """The endpoint under test: URL, model, API and an ``httpx.AsyncClient`` factory.

    With no ``--llm-endpoint`` (or ``sim``/``sim:PROFILE``) this starts the
    embedded simulator for the session. ``llm_endpoint.client()`` must be
    called inside the running event loop. A directory measures another endpoint
    by overriding this fixture in its ``conftest.py`` with ``llm_endpoints.get(...)``.
    """
    return session_endpoint(pytestconfig.stash[STATE_KEY])


@pytest.fixture(scope="session")
def llm_endpoints(pytestconfig: pytest.Config) -> EndpointPool:
    """The session's endpoints by spec: ``llm_endpoints.get("sim:tiny")`` or a URL, started
    and preflighted once (docs/endpoints.md); every one when ``--llm-endpoint`` is given."""
    return pytestconfig.stash[STATE_KEY].endpoints


@pytest.fixture(scope="session")
def llm_inconclusive(pytestconfig: pytest.Config) -> str:
    """What an inconclusive SLO does to a test (fail, warn, skip); a directory overrides this
    fixture in its ``conftest.py``, a test the ``llm_inconclusive`` marker."""
    return pytestconfig.stash[STATE_KEY].options.inconclusive.value


@pytest.fixture
def llm_loadgen(request: pytest.FixtureRequest) -> LlmLoadgen:
    """The load generator configured from this test's markers; ``await llm_loadgen.run()``.

    It measures the ``llm_endpoint`` marker's endpoint if the test has one, else the
    ``llm_endpoint`` fixture (a directory's override or the session's endpoint).
    """
    state = request.config.stash[STATE_KEY]
    item = request.node
    spec = item.stash.get(SPEC_KEY, None) or PerfSpec.from_markers(None, None, [])
    endpoint = endpoint_for(state, item) or request.getfixturevalue("llm_endpoint")
    affinity = marked_affinity(item, endpoint.affinity)  # checked at collection
    if affinity is not None:  # the marker's affinity=: same server, same identity
        endpoint = replace(endpoint, affinity=affinity)
    policy = request.getfixturevalue("llm_inconclusive")  # a directory's conftest may override
    if policy not in [p.value for p in InconclusivePolicy]:
        pytest.fail(
            f"pytest-llmperf: {item.nodeid}: the llm_inconclusive fixture must return "
            f"fail, warn or skip, got {policy!r}",
            pytrace=False,
        )
    item.stash[INCONCLUSIVE_KEY] = policy
    if state.baseline is not None:  # before anything is measured: a --llm-baseline-strict
        check_comparability(state, state.endpoints.describe(endpoint))  # stop wastes no run
    reference = reference_endpoint(state, endpoint.api)
    # greedy outputs: the alone pass when asked for, or when nothing else compares them
    consistency = any(slo.metric == "output_consistency" for slo in spec.slos) or (
        state.baseline is None and reference is None
    )
    generator = LlmLoadgen(
        endpoint,
        spec,
        scale=state.options.scale,
        events_dir=otel_events_dir(request, state),  # --llm-events; kept for --llm-otel
        events_name=item.nodeid,
        workers=state.options.workers,
        ray=state.ray,  # --llm-workers=ray:N|ray:auto
        tokenizer=state.endpoints.tokenizer(endpoint),
        on_result=lambda result: call_run_finished(item, result),  # pytest_llmperf_run_finished
        # --llm-reference-endpoint: gated runs are A/B, both sides through the test's API
        reference=reference,
        consistency=consistency,  # output_consistency: the alone pass after greedy runs
        thresholds=state.ab_thresholds,  # --llm-ab-threshold
        ab_blocks=state.options.ab_blocks,
        progress=progress_sink(request.config, state.options, item.nodeid),  # --llm-progress
        server_metrics=state.endpoints.metrics_source(endpoint),  # --llm-server-metrics
        gpus=state.gpus,  # --llm-gpu: this machine's GPUs, read around every run
        reset_cache=state.endpoints.cache_resetter(endpoint),  # --llm-reset-cache
        # until="decided": a stop also waits for the test's rulesets' minimums
        decider=decider(
            spec.slos, state.options.confidence, bars=ruleset_bars(rulesets_of(state, item))
        ),
        until_decided=state.options.until_decided,  # --llm-until-decided
        # the server processes the gate started (--llm-server-cmd, --llm-reference-cmd):
        # watched over every run, their resources and any exit in the run's record
        server=state.endpoints.server_for(endpoint),
        reference_server=state.endpoints.server_for(reference) if reference else None,
    )
    item.stash[GEN_KEY] = generator
    return generator
