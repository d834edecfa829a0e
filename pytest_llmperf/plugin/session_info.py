"""What the session's reports say of the session as a whole: the endpoint it measured and
the options that shaped its measurements (JSON ``endpoint`` and ``session.options``, the
baseline's and the history's)."""

from __future__ import annotations

from typing import Any

from pytest_llmperf.client.endpoint import redact_url
from pytest_llmperf.options import LlmPerfOptions
from pytest_llmperf.plugin.endpoints import several_endpoints
from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.plugin.under_test import has_reference

__all__ = ["report_endpoint", "run_options"]


def report_endpoint(state: SessionState) -> dict[str, Any]:
    """What the tests measured (under xdist: the workers' endpoints); with several
    endpoints no single one is claimed (each test's ``endpoint`` says which)."""
    measured = [dict(t.endpoint) for t in state.data.measured_tests() if t.endpoint]
    several = several_endpoints(measured)
    if several is not None:
        return several
    if measured:
        return measured[0]
    if state.endpoint is not None:
        return state.endpoints.describe(state.endpoint)
    return _planned_endpoint(state.options)


def _planned_endpoint(opts: LlmPerfOptions) -> dict[str, Any]:
    url = redact_url(opts.endpoint_url) if opts.endpoint_url else None
    return {"url": url, "simulator": opts.sim_profile, "api": opts.api}


def run_options(opts: LlmPerfOptions) -> dict[str, Any]:
    """The options that shape measurements (never the key, only its variable's name)."""
    return {
        "api": opts.api,
        "model": opts.model,
        "scale": opts.scale,
        "workers": opts.workers,
        "worker_backend": opts.worker_backend.value,
        "timeout_s": opts.timeouts.total,
        "inconclusive": opts.inconclusive.value,  # plain data for hooks and the JSON
        "ruleset": opts.ruleset,
        "api_key_env": opts.api_key_env,
        "tokenizer": opts.tokenizer,
        "ab_threshold": opts.ab_threshold if has_reference(opts) else None,
        "ab_blocks": opts.ab_blocks,
    }
