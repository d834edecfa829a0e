"""Collection: every test's markers become a spec (a bad one, or an ``llm_*`` marker we do
not know, is a usage error naming the test), then a real endpoint is preflighted once
(:mod:`.preflight`); how many collected tests can measure.
"""

from __future__ import annotations

import pytest

from pytest_llmperf.client.negotiation import UserFields
from pytest_llmperf.errors import (
    LlmPerfUsageError,
)
from pytest_llmperf.plugin.markers import (
    LLM_MARKERS,
    SPEC_KEY,
    api_of_test,
    marked_affinity,
    marked_inconclusive,
    registered_elsewhere,
    server_command,
    spec_for,
    unknown_marks,
)
from pytest_llmperf.plugin.preflight import preflight
from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.specs.api_fit import check_api_fit

__all__ = ["CollectionHooks"]


class CollectionHooks:
    """Markers into specs at collection; a given endpoint preflighted once, before any test."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        """Under xdist: the controller's preflight stop (:mod:`.preflight`), raised here."""
        if self.state.stop_at_collection is not None:
            raise self.state.stop_at_collection

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        state = self.state
        errors: list[str] = []
        registered = registered_elsewhere(state.config)
        for item in items:
            unknown = unknown_marks(item, registered)
            if unknown:
                errors += [f"{item.nodeid}: {line}" for line in unknown]
                continue
            if not any(item.iter_markers(name) for name in LLM_MARKERS):
                continue
            try:
                spec = item.stash[SPEC_KEY] = spec_for(item)
                # a bad spec, profile or API: a usage error here; then does the spec fit the API?
                api = api_of_test(item, state.endpoints.default_spec, state.options.api)
                check_api_fit(spec, api, where=f"api {api.value}")
                marked_affinity(item, state.options.affinity)
                marked_inconclusive(item)
                server = item.get_closest_marker("llm_server")
                if server is not None:  # a bad llm_server marker names the test
                    server_command(item, server, state.options.server)
            except LlmPerfUsageError as exc:  # named once: some errors name the test already
                message = str(exc)
                errors.append(
                    message if message.startswith(item.nodeid) else f"{item.nodeid}: {exc}"
                )
                continue
            if spec.run.extra_body:
                where = f"{item.nodeid} llm_workload(extra_body=...)"
                state.user_fields.append(UserFields(where, spec.run.extra_body, api.value))
        if len(errors) == 1:  # one ERROR line, as for a bad option
            raise pytest.UsageError(f"pytest-llmperf: {errors[0]}")
        if errors:
            raise pytest.UsageError("pytest-llmperf: bad markers\n" + "\n".join(errors))
        preflight(state, items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """How many collected tests can measure: the session's alpha is split among them
        (slo/multiplicity.py). Known here, before any test runs (xdist: on each worker,
        which collects the whole session)."""
        self.state.measuring_tests = sum(
            1 for item in session.items if "llm_loadgen" in getattr(item, "fixturenames", ())
        )
