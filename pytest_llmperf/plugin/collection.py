"""Collection: every test's markers become a spec (a bad one, or an ``llm_*`` marker we do
not know, is a usage error naming the test), then a real endpoint is preflighted once.
"""

from __future__ import annotations

import pytest

from pytest_llmperf.client.negotiation import UserFields
from pytest_llmperf.errors import (
    LlmPerfUsageError,
)
from pytest_llmperf.plugin.base import PluginBase
from pytest_llmperf.plugin.markers import (
    LLM_MARKERS,
    SPEC_KEY,
    api_of_test,
    marked_inconclusive,
    registered_elsewhere,
    server_command,
    spec_for,
    unknown_marks,
)
from pytest_llmperf.specs.api_fit import check_api_fit


class CollectionPart(PluginBase):
    """Markers into specs at collection; a given endpoint preflighted once, before any test."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        errors: list[str] = []
        registered = registered_elsewhere(self.config)
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
                api = api_of_test(item, self.endpoints.default_spec, self.options.api)
                check_api_fit(spec, api, where=f"api {api.value}")
                marked_inconclusive(item)
                server = item.get_closest_marker("llm_server")
                if server is not None:  # a bad llm_server marker names the test
                    server_command(item, server, self.options.server)
            except LlmPerfUsageError as exc:  # named once: some errors name the test already
                message = str(exc)
                errors.append(
                    message if message.startswith(item.nodeid) else f"{item.nodeid}: {exc}"
                )
                continue
            if spec.run.extra_body:
                where = f"{item.nodeid} llm_workload(extra_body=...)"
                self._user_fields.append(UserFields(where, spec.run.extra_body, api.value))
        if len(errors) == 1:  # one ERROR line, as for a bad option
            raise pytest.UsageError(f"pytest-llmperf: {errors[0]}")
        if errors:
            raise pytest.UsageError("pytest-llmperf: bad markers\n" + "\n".join(errors))
        self._preflight(items)

    def preflight_controller(self) -> None:
        """Under xdist the controller collects nothing and a worker's usage error is an
        internal error, so the controller checks a given endpoint once, as the session is
        configured (plugin/configure.py), before xdist starts any worker. A stop turns
        the distribution off (no worker starts for a session that will not run) and is
        raised as collection starts (:meth:`pytest_collection`): raised before the session
        starts, pytest would end it without ``pytest_sessionfinish``, and so without a
        report saying why."""
        if not self._given_servers() or self.config.option.collectonly:
            return
        try:
            self._preflight_now()
        except (pytest.UsageError, pytest.Session.Failed) as exc:
            self._stop_at_collection = exc
            option = self.config.option  # read by xdist's pytest_configure, which runs last
            option.dist, option.numprocesses, option.tx = "no", 0, []

    _stop_at_collection: BaseException | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        if self._stop_at_collection is not None:
            raise self._stop_at_collection
