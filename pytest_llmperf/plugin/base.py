"""The plugin's session state and the endpoints under test (and the A/B reference)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.client.endpoint import Endpoint, redact_url
from pytest_llmperf.client.negotiation import UserFields
from pytest_llmperf.errors import (
    LlmPerfUsageError,
)
from pytest_llmperf.gate_states import GateState, StopPhase, stop_state
from pytest_llmperf.hook_calls import (
    HookFailure,
)
from pytest_llmperf.loadgen.scale_out.ray_workers import RayCluster
from pytest_llmperf.options import LlmPerfOptions, WorkerBackend
from pytest_llmperf.plugin.endpoints import REFERENCE_SERVER, EndpointPool, EndpointSpec
from pytest_llmperf.plugin.interrupts import terminate_as_interrupt
from pytest_llmperf.plugin.live_progress import server_progress
from pytest_llmperf.plugin.markers import endpoint_spec
from pytest_llmperf.reports.baseline import (
    BaselineSource,
)
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.slo.paired import DEFAULT_AB_THRESHOLD
from pytest_llmperf.slo.regression import Thresholds
from pytest_llmperf.slo.verdicts import SloVerdict
from pytest_llmperf.specs.rulesets import Ruleset
from pytest_llmperf.workloads.tokenizer import Tokenizer

SHARED_SERVERS_KEY = "llmperf_servers"  # workerinput: the controller's started servers
WORKER_SERVERS_KEY = "llmperf_started_servers"  # workeroutput: the servers a worker started
WORKER_STOP_KEY = "llmperf_stop"  # workeroutput: a worker's stop (its session server exited)


class PluginBase:
    """The plugin's session state, and the endpoints it measures (started on first use).

    Each job of the plugin object is a part over this state: collection, judging,
    reports (:class:`~pytest_llmperf.plugin.core.LlmPerfPlugin` joins them).
    """

    def __init__(
        self,
        config: pytest.Config,
        options: LlmPerfOptions,
        ruleset: Ruleset | None,
        *,
        baseline: BaselineSource | None = None,
        thresholds: Thresholds | None = None,
        ab_thresholds: Thresholds | None = None,
    ) -> None:
        self.config = config
        self.options = options
        self.ruleset = ruleset
        self.baseline = baseline
        self.thresholds = thresholds or Thresholds()  # --llm-baseline-threshold
        self.ab_thresholds = ab_thresholds or Thresholds(DEFAULT_AB_THRESHOLD)  # --llm-ab-threshold
        self.server_identity: dict[str, Any] = {}
        # the baseline's (or history's) fingerprint against this session's, checked once
        self.comparability: dict[str, Any] | None = None
        self._rulesets: dict[str, Ruleset] = {}
        self.data = SessionData()
        self.measuring_tests = 0  # collected tests that can measure: the alpha's split
        self.session_verdicts: list[SloVerdict] = []
        self._endpoint: Endpoint | None = None
        self._reference: Endpoint | None = None  # --llm-reference-endpoint, started on first use
        self._reference_by_api: dict[str, Endpoint] = {}  # ... driven through a test's API
        self.tokenizer: Tokenizer | None = None  # --llm-tokenizer, resolved after the preflight
        self.written: list[str] = []
        self.hook_failures: list[HookFailure] = []  # session hooks that raised (hook_calls.py)
        self.history: Any = None  # --llm-history's HistoryOutcome, at session end
        # why the session stopped before load (JSON session.stopped; gate_states.py)
        self.stop: dict[str, Any] | None = None
        self.stop_said_here = False  # pytest does not print it: the llmperf section does
        self.worker_lost: list[dict[str, str]] = []  # xdist workers that crashed mid-test
        self._started_at = _utc_now()  # the session's start, for the history
        self._user_fields: list[UserFields] = []  # tests' extra_body, probed at preflight
        self._restore_sigterm: Callable[[], None] = lambda: None
        # --llm-workers=ray:N: connected (or a local instance started) at the first Ray run
        self.ray = (
            RayCluster(options.ray_address, auto=options.workers_auto)
            if options.worker_backend is WorkerBackend.RAY
            else None
        )
        # every endpoint of the session by spec (endpoints.py); --llm-endpoint on the
        # command line pins them all to one server
        # --llm-server-cmd on the command line pins them to the server it starts; under
        # xdist a worker measures the controller's (workerinput, plugin/servers.py)
        workerinput = getattr(config, "workerinput", None) or {}
        self.endpoints = EndpointPool(
            options,
            self._user_fields,
            pinned=config.getoption("llm_endpoint", default=None) is not None
            or config.getoption("llm_server_cmd", default=None) is not None,
            on_first_use=self._arm_sigterm,
            log_dir=self._server_log_dir,
            progress=lambda: server_progress(config, options),
            shared=workerinput.get(SHARED_SERVERS_KEY),
        )
        self.worker_servers: list[dict[str, Any]] = []  # xdist: servers the workers started

    def _server_log_dir(self) -> Path:
        """``--llm-server-log-dir``, else ``llmperf-servers/`` under pytest's basetemp."""
        if self.options.server_log_dir:
            return Path(self.options.server_log_dir).resolve()
        factory = getattr(self.config, "_tmp_path_factory", None)
        if factory is None and not self.config.option.basetemp:
            # an xdist controller starts the session's server as it is configured, before
            # pytest's own factory exists: a numbered basetemp of its own, as pytest's
            with contextlib.suppress(Exception):
                factory = pytest.TempPathFactory.from_config(self.config, _ispytest=True)
        if factory is not None:
            return Path(factory.getbasetemp()) / "llmperf-servers"
        return Path(tempfile.mkdtemp(prefix="llmperf-servers-"))

    def endpoint(self) -> Endpoint:
        if self._endpoint is None:
            try:
                self._endpoint = self._start_endpoint()
            except LlmPerfUsageError as exc:  # one clear message for the whole session
                label = self.endpoints.default_spec.label
                state = self.record_stop(exc, StopPhase.ENDPOINT_START, label)
                pytest.exit(f"pytest-llmperf: {exc}", state.exit_status)
        return self._endpoint

    def record_stop(
        self, exc: LlmPerfUsageError, phase: StopPhase, endpoint: str | None, prefix: str = ""
    ) -> GateState:
        """Remember why the session stops before load (JSON ``session.stopped``, the JUnit
        error, the first line of the Markdown and HTML, the history's session row) and
        return its state, whose exit status the caller stops the session with: a server
        that answers but is broken fails the gate (1), a mistake of the user's is a
        usage error (4) (gate_states.py; ``exc.cause`` was decided where it was raised)."""
        state = stop_state(exc.cause)
        if self.stop is None:  # the first stop is the one that ended the session
            self.stop = {
                "phase": phase.value,
                "reason": f"{prefix}{exc}",
                "server_says": exc.server_says,
                "endpoint": redact_url(endpoint) if endpoint else None,
                "state": state.value,
                "exit_status": state.exit_status,
            }
        return state

    def _start_endpoint(self) -> Endpoint:
        endpoint = self.endpoints.default()  # raises one LlmPerfUsageError (endpoints.py)
        self.server_identity = self.endpoints.identity(endpoint)
        self.tokenizer = self.endpoints.tokenizer(endpoint)
        return endpoint

    def check_comparability(self, endpoint: dict[str, Any]) -> None:
        """Once, as the first test that could be compared gets its load generator (before
        it measures anything): is the baseline's (or the history's) server and machine
        this session's? Flagged on every comparison; with ``--llm-baseline-strict`` a
        difference stops the session (exit 4), naming it, before a run is spent."""
        if self.baseline is None or self.comparability is not None:
            return
        try:
            self.comparability = self.baseline.check_comparability(
                endpoint.get("fingerprint"), strict=self.options.baseline_strict
            )
        except LlmPerfUsageError as exc:
            url = endpoint.get("url") or endpoint.get("simulator")
            state = self.record_stop(exc, StopPhase.COMPARABILITY, url)
            pytest.exit(f"pytest-llmperf: {exc}", state.exit_status)

    def _arm_sigterm(self) -> None:
        # From here on the session measures: a CI timeout's SIGTERM acts as Ctrl-C (drain,
        # partial report). Sessions that never use an endpoint keep the default SIGTERM.
        self._restore_sigterm()
        self._restore_sigterm = terminate_as_interrupt()

    def endpoint_for(self, item: pytest.Item) -> Endpoint | None:
        """The ``llm_endpoint`` marker's endpoint for ``item`` (None without the marker);
        one that cannot be started or reached fails the test, naming it and the marker."""
        mark = item.get_closest_marker("llm_endpoint")
        if mark is None:
            return None
        try:
            return self.endpoints.get(endpoint_spec(item, mark, self.endpoints.default_spec))
        except LlmPerfUsageError as exc:
            pytest.fail(f"pytest-llmperf: {item.nodeid} llm_endpoint marker: {exc}", False)

    def reference_endpoint(self, api: str | None = None) -> Endpoint | None:
        """``--llm-reference-endpoint``'s server (None without one): a URL preflighted like
        the endpoint under test (same API, timeouts, request fields and key variable), or
        a simulator in its own process, independent of the endpoint's simulator.

        ``api``: the API of the test it is compared in (``llm_endpoint(api=...)``): the
        same server, preflighted once more for that API, so both sides of an A/B send
        the same requests."""
        opts = self.options
        if (
            opts.reference_url is None
            and opts.reference_sim_profile is None
            and opts.reference_server is None
        ):
            return None
        label = self._reference_label()
        if self._reference is None:
            try:
                self._reference = self._start_reference()
            except LlmPerfUsageError as exc:
                where = "--llm-reference-endpoint: "
                state = self.record_stop(exc, StopPhase.REFERENCE, label, where)
                pytest.exit(f"pytest-llmperf: {where}{exc}", state.exit_status)
        if api is None or api == self._reference.api:
            return self._reference
        if api not in self._reference_by_api:
            try:
                self._reference_by_api[api] = self.endpoints.through_api(self._reference, api)
            except LlmPerfUsageError as exc:
                where = f"--llm-reference-endpoint ({api}): "
                state = self.record_stop(exc, StopPhase.REFERENCE, label, where)
                pytest.exit(f"pytest-llmperf: {where}{exc}", state.exit_status)
        return self._reference_by_api[api]

    def _reference_label(self) -> str:
        opts = self.options
        if opts.reference_server is not None:
            return str(opts.reference_server.describe()["cmd"])
        return opts.reference_url or f"sim:{opts.reference_sim_profile}"

    def _start_reference(self) -> Endpoint:
        opts = self.options
        if opts.reference_server is not None:  # --llm-reference-cmd: started, own process
            spec = EndpointSpec(
                server=opts.reference_server, server_key=REFERENCE_SERVER, model=opts.model
            )
        else:
            spec = EndpointSpec(opts.reference_url, opts.reference_sim_profile, opts.model)
        return self.endpoints.start_apart(spec)

    def servers_at_end(self) -> list[dict[str, Any]]:
        """At the session's end: every server this process started, stopped, described
        (an xdist worker sends its own to the controller), with the workers'."""
        servers = self.endpoints.servers()
        self.endpoints.close()
        described = [s.describe() for s in servers] + self.endpoints.not_started()
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKER_SERVERS_KEY] = described
            if self.stop is not None:  # the controller's reports record it
                workeroutput[WORKER_STOP_KEY] = dict(self.stop)
        return described + list(self.worker_servers)

    def close(self) -> None:
        self._restore_sigterm()
        if self.ray is not None:  # its actors; a local Ray instance the session started
            self.ray.close()
        self.endpoints.close()  # the reference's simulator too

    def _preflight(self, items: list[pytest.Item]) -> None:
        """A real endpoint that does not answer, or a server the gate starts that does not
        start, ends the session here, once, before any test."""
        if not self._given_servers() or self.config.option.collectonly:
            return
        if hasattr(self.config, "workerinput"):
            return  # an xdist worker: the controller checked (see preflight_controller)
        if not any(
            {"llm_endpoint", "llm_loadgen"} & set(getattr(i, "fixturenames", ())) for i in items
        ):
            return
        self._preflight_now()

    def _given_servers(self) -> bool:
        """A server given (a URL) or started by the gate (``--llm-server-cmd``,
        ``--llm-reference-cmd``): checked once, before any test."""
        opts = self.options
        return bool(opts.endpoint_url or opts.reference_url or opts.server or opts.reference_server)

    def _preflight_now(self) -> None:
        """Raises what ends the session (:meth:`_stop_exception`), the stop recorded."""
        opts = self.options
        try:
            if opts.endpoint_url is not None or opts.server is not None:
                self._endpoint = self._start_endpoint()
        except LlmPerfUsageError as exc:
            where = "--llm-server-cmd: " if opts.server is not None else ""
            label = opts.endpoint_url or self.endpoints.default_spec.label
            self.record_stop(exc, StopPhase.PREFLIGHT, label, where)
            raise self._stop_exception() from None
        try:
            if opts.reference_url is not None or opts.reference_server is not None:
                self._reference = self._start_reference()
        except LlmPerfUsageError as exc:
            where = (
                "--llm-reference-cmd: "
                if opts.reference_server is not None
                else "--llm-reference-endpoint: "
            )
            self.record_stop(exc, StopPhase.PREFLIGHT, self._reference_label(), where)
            raise self._stop_exception() from None

    def _stop_exception(self) -> Exception:
        """What ends a session stopped at preflight, during collection (its reports are
        written: ``pytest_sessionfinish`` runs): a usage error (exit status 4) is pytest's
        one ``ERROR: pytest-llmperf: ...`` line; a broken server fails the session (1),
        said once in red at the end of the llmperf section (:attr:`stop_said_here`)."""
        assert self.stop is not None
        message = f"pytest-llmperf: {self.stop['reason']}"
        if self.stop["exit_status"] == GateState.STOPPED_USAGE.exit_status:
            return pytest.UsageError(message)
        self.stop_said_here = True
        return pytest.Session.Failed(message)

    def _junit_testcase_properties(self) -> bool:
        """xunit1 allows ``<properties>`` in a testcase; xunit2 (the default) only in the suite."""
        try:
            return self.config.getini("junit_family") in ("xunit1", "legacy")
        except ValueError:
            return False

    def _junit_xml(self) -> Any:
        try:
            from _pytest.junitxml import xml_key
        except ImportError:  # pragma: no cover - pytest moved it
            return None
        return self.config.stash.get(xml_key, None)


def _utc_now() -> str:
    from pytest_llmperf.history.session import utc_now

    return utc_now()
