"""The endpoint under test and the A/B reference, started on first use, and the baseline's
comparability with them.

Each is prepared through the session's :class:`~pytest_llmperf.plugin.endpoints.EndpointPool`
(``state.endpoints``) and kept in the :class:`~pytest_llmperf.plugin.state.SessionState`
(``endpoint``, ``reference``, ``reference_by_api``); one that cannot be started or
reached ends the session once, its stop recorded (:mod:`.stops`).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.gate_states import StopPhase
from pytest_llmperf.options import LlmPerfOptions
from pytest_llmperf.plugin.endpoints import REFERENCE_SERVER, EndpointSpec
from pytest_llmperf.plugin.interrupts import terminate_as_interrupt
from pytest_llmperf.plugin.markers import endpoint_spec
from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.plugin.stops import exit_session

__all__ = [
    "arm_sigterm",
    "check_comparability",
    "endpoint",
    "has_reference",
    "marked_endpoint",
    "reference_endpoint",
    "reference_label",
    "start_endpoint",
    "start_reference",
]


def endpoint(state: SessionState) -> Endpoint:
    """The session's endpoint (``--llm-endpoint``, ``--llm-server-cmd``'s server, or the
    simulator), started and preflighted on first use."""
    if state.endpoint is None:
        try:
            state.endpoint = start_endpoint(state)
        except LlmPerfUsageError as exc:  # one clear message for the whole session
            label = state.endpoints.default_spec.label
            exit_session(state, exc, StopPhase.ENDPOINT_START, label)
    return state.endpoint


def start_endpoint(state: SessionState) -> Endpoint:
    """Raises one :class:`LlmPerfUsageError` (endpoints.py) if it cannot be prepared."""
    prepared = state.endpoints.default()
    state.endpoints.tokenizer(prepared)  # bound to its API now, as the preflight ends
    return prepared


def marked_endpoint(state: SessionState, item: pytest.Item) -> Endpoint | None:
    """The ``llm_endpoint`` marker's endpoint for ``item`` (None without the marker);
    one that cannot be started or reached fails the test, naming it and the marker."""
    mark = item.get_closest_marker("llm_endpoint")
    if mark is None:
        return None
    try:
        return state.endpoints.get(endpoint_spec(item, mark, state.endpoints.default_spec))
    except LlmPerfUsageError as exc:
        pytest.fail(f"pytest-llmperf: {item.nodeid} llm_endpoint marker: {exc}", False)


def has_reference(options: LlmPerfOptions) -> bool:
    """``--llm-reference-endpoint`` (a URL or a simulator) or ``--llm-reference-cmd`` given."""
    return bool(options.reference_url or options.reference_sim_profile or options.reference_server)


def reference_endpoint(state: SessionState, api: str | None = None) -> Endpoint | None:
    """``--llm-reference-endpoint``'s server (None without one): a URL preflighted like
    the endpoint under test (same API, timeouts, request fields and key variable), or
    a simulator in its own process, independent of the endpoint's simulator.

    ``api``: the API of the test it is compared in (``llm_endpoint(api=...)``): the
    same server, preflighted once more for that API, so both sides of an A/B send
    the same requests."""
    opts = state.options
    if (
        opts.reference_url is None
        and opts.reference_sim_profile is None
        and opts.reference_server is None
    ):
        return None
    label = reference_label(opts)
    if state.reference is None:
        try:
            state.reference = start_reference(state)
        except LlmPerfUsageError as exc:
            where = "--llm-reference-endpoint: "
            exit_session(state, exc, StopPhase.REFERENCE, label, where)
    reference = state.reference
    if api is None or api == reference.api:
        return reference
    if api not in state.reference_by_api:
        try:
            state.reference_by_api[api] = state.endpoints.through_api(reference, api)
        except LlmPerfUsageError as exc:
            where = f"--llm-reference-endpoint ({api}): "
            exit_session(state, exc, StopPhase.REFERENCE, label, where)
    return state.reference_by_api[api]


def reference_label(opts: LlmPerfOptions) -> str:
    """The reference as the user gave it: its command, URL or ``sim:PROFILE``."""
    if opts.reference_server is not None:
        return str(opts.reference_server.describe()["cmd"])
    return opts.reference_url or f"sim:{opts.reference_sim_profile}"


def start_reference(state: SessionState) -> Endpoint:
    """The reference started apart (never the candidate's server, even of one profile)."""
    opts = state.options
    if opts.reference_server is not None:  # --llm-reference-cmd: started, own process
        spec = EndpointSpec(
            server=opts.reference_server, server_key=REFERENCE_SERVER, model=opts.model
        )
    else:
        spec = EndpointSpec(opts.reference_url, opts.reference_sim_profile, opts.model)
    return state.endpoints.start_apart(spec)


def check_comparability(state: SessionState, described: dict[str, Any]) -> None:
    """Once, as the first test that could be compared gets its load generator (before
    it measures anything): is the baseline's (or the history's) server and machine
    this session's? Flagged on every comparison; with ``--llm-baseline-strict`` a
    difference stops the session (exit 4), naming it, before a run is spent."""
    if state.baseline is None or state.comparability is not None:
        return
    try:
        state.comparability = state.baseline.check_comparability(
            described.get("fingerprint"), strict=state.options.baseline_strict
        )
    except LlmPerfUsageError as exc:
        url = described.get("url") or described.get("simulator")
        exit_session(state, exc, StopPhase.COMPARABILITY, url)


def arm_sigterm(state: SessionState) -> None:
    """From here on the session measures: a CI timeout's SIGTERM acts as Ctrl-C (drain,
    partial report). Sessions that never use an endpoint keep the default SIGTERM."""
    state.restore_sigterm()
    state.restore_sigterm = terminate_as_interrupt()
