"""A given endpoint checked once, before any test: a real endpoint that does not answer,
or a server the gate starts that does not start, ends the session here.

Without xdist this runs as collection ends (:mod:`.collection`). Under xdist the
controller collects nothing and a worker's usage error is an internal error, so
the controller checks as the session is configured (:mod:`.configure`), before
xdist starts any worker (:func:`preflight_controller`).
"""

from __future__ import annotations

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.gate_states import StopPhase
from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.plugin.stops import record_stop, stop_exception
from pytest_llmperf.plugin.under_test import reference_label, start_endpoint, start_reference

__all__ = ["preflight", "preflight_controller"]


def preflight(state: SessionState, items: list[pytest.Item]) -> None:
    """As collection ends: check the given servers if a collected test will use them."""
    if not _given_servers(state) or state.config.option.collectonly:
        return
    if hasattr(state.config, "workerinput"):
        return  # an xdist worker: the controller checked (see preflight_controller)
    if not any(
        {"llm_endpoint", "llm_loadgen"} & set(getattr(i, "fixturenames", ())) for i in items
    ):
        return
    _preflight_now(state)


def preflight_controller(state: SessionState) -> None:
    """Under xdist, as the session is configured. A stop turns the distribution off (no
    worker starts for a session that will not run) and is raised as collection starts
    (``state.stop_at_collection``, :mod:`.collection`): raised before the session
    starts, pytest would end it without ``pytest_sessionfinish``, and so without a
    report saying why."""
    if not _given_servers(state) or state.config.option.collectonly:
        return
    try:
        _preflight_now(state)
    except (pytest.UsageError, pytest.Session.Failed) as exc:
        state.stop_at_collection = exc
        option = state.config.option  # read by xdist's pytest_configure, which runs last
        option.dist, option.numprocesses, option.tx = "no", 0, []


def _given_servers(state: SessionState) -> bool:
    """A server given (a URL) or started by the gate (``--llm-server-cmd``,
    ``--llm-reference-cmd``): checked once, before any test."""
    opts = state.options
    return bool(opts.endpoint_url or opts.reference_url or opts.server or opts.reference_server)


def _preflight_now(state: SessionState) -> None:
    """Raises what ends the session (:func:`~.stops.stop_exception`), the stop recorded."""
    opts = state.options
    try:
        if opts.endpoint_url is not None or opts.server is not None:
            state.endpoint = start_endpoint(state)
    except LlmPerfUsageError as exc:
        where = "--llm-server-cmd: " if opts.server is not None else ""
        label = opts.endpoint_url or state.endpoints.default_spec.label
        record_stop(state, exc, StopPhase.PREFLIGHT, label, where)
        raise stop_exception(state) from None
    try:
        if opts.reference_url is not None or opts.reference_server is not None:
            state.reference = start_reference(state)
    except LlmPerfUsageError as exc:
        where = (
            "--llm-reference-cmd: "
            if opts.reference_server is not None
            else "--llm-reference-endpoint: "
        )
        record_stop(state, exc, StopPhase.PREFLIGHT, reference_label(opts), where)
        raise stop_exception(state) from None
