"""Why a session stops before load, recorded once, and how it ends pytest's session.

A server that answers but is broken fails the gate (exit status 1), a mistake of
the user's is a usage error (4) (:mod:`pytest_llmperf.gate_states`; the error's
``cause`` was decided where it was raised). The first stop is the one the reports
name: JSON ``session.stopped``, the JUnit error, the first line of the Markdown and
HTML, the history's session row.
"""

from __future__ import annotations

from typing import NoReturn

import pytest

from pytest_llmperf.client.endpoint import redact_url
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.gate_states import GateState, StopPhase, stop_state
from pytest_llmperf.plugin.state import SessionState

__all__ = ["exit_session", "record_stop", "stop_exception", "stopped_mid_session"]


def record_stop(
    state: SessionState,
    exc: LlmPerfUsageError,
    phase: StopPhase,
    endpoint: str | None,
    prefix: str = "",
) -> GateState:
    """Remember why the session stops (the first stop only) and return its state, whose
    exit status the caller stops the session with."""
    gate = stop_state(exc.cause)
    if state.stop is None:  # the first stop is the one that ended the session
        state.stop = {
            "phase": phase.value,
            "reason": f"{prefix}{exc}",
            "server_says": exc.server_says,
            "endpoint": redact_url(endpoint) if endpoint else None,
            "state": gate.value,
            "exit_status": gate.exit_status,
        }
    return gate


def exit_session(
    state: SessionState,
    exc: LlmPerfUsageError,
    phase: StopPhase,
    endpoint: str | None,
    prefix: str = "",
) -> NoReturn:
    """Record the stop and end the session now (``pytest.exit`` with its exit status)."""
    gate = record_stop(state, exc, phase, endpoint, prefix)
    pytest.exit(f"pytest-llmperf: {prefix}{exc}", gate.exit_status)


def stop_exception(state: SessionState) -> Exception:
    """What ends a session stopped at preflight, during collection (its reports are
    written: ``pytest_sessionfinish`` runs): a usage error (exit status 4) is pytest's
    one ``ERROR: pytest-llmperf: ...`` line; a broken server fails the session (1),
    said once in red at the end of the llmperf section (``stop_said_here``)."""
    assert state.stop is not None
    message = f"pytest-llmperf: {state.stop['reason']}"
    if state.stop["exit_status"] == GateState.STOPPED_USAGE.exit_status:
        return pytest.UsageError(message)
    state.stop_said_here = True
    return pytest.Session.Failed(message)


def stopped_mid_session(state: SessionState) -> bool:
    """The session's started server exited and the session stopped (servers.py)."""
    return bool(state.stop and state.stop.get("phase") == StopPhase.SERVER_EXITED.value)
