"""How long the drain at a run's end may wait for requests still in flight.

Read by the issuer's drain (:meth:`~pytest_llmperf.loadgen.issue.issuer.Issuer.drain`,
through :class:`~pytest_llmperf.loadgen.issue.local.ShareRun`) and by the Ray pool,
which waits for its actors' drains. Imports nothing of ``loadgen/`` but the stop reasons.
"""

from __future__ import annotations

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.results.run_result import StopReason

__all__ = ["DRAIN_GRACE_S", "INTERRUPT_DRAIN_S", "drain_cap_s"]

DRAIN_GRACE_S = 5.0  # past the per-request total timeout, before in-flight = incomplete
INTERRUPT_DRAIN_S = 5.0  # after Ctrl-C / SIGTERM / cancellation: then in-flight = incomplete


def drain_cap_s(endpoint: Endpoint, stop_reason: StopReason | None) -> float:
    """How long a drain may wait: a request's total timeout plus grace, or briefly
    when someone is waiting (Ctrl-C, cancellation)."""
    cap = endpoint.timeouts.total + DRAIN_GRACE_S
    if stop_reason in (StopReason.SIGINT, StopReason.CANCELLED):
        cap = min(cap, INTERRUPT_DRAIN_S)
    return cap
