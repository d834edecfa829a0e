"""The pytest plugin: wires pytest's options, markers, fixtures and hooks to the library.

Nothing here measures or judges; it only moves data between pytest and
:mod:`pytest_llmperf`'s packages:

- options and ini keys -> :class:`~pytest_llmperf.options.LlmPerfOptions`
- markers -> :class:`~pytest_llmperf.specs.perf.PerfSpec` at collection (bad ones
  are usage errors that name the test and the bad word)
- ``llm_endpoint`` / ``llm_loadgen`` fixtures -> the endpoint (simulator
  started on first use) and a :class:`~pytest_llmperf.methodology.llm_loadgen.LlmLoadgen`
- after each test body: SLO verdicts fail the test itself, JUnit properties
- the call report carries the runs, so the session data also forms under xdist
- session end: merged histograms, session ruleset, terminal summary, JSON.
"""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Callable, Generator
from typing import Any

import pytest

from pytest_llmperf.asyncio_scope import set_default_fixture_loop_scope
from pytest_llmperf.client.endpoint import Endpoint, redact_url
from pytest_llmperf.client.negotiation import UserFields
from pytest_llmperf.endpoints import EndpointPool, EndpointSpec, several_endpoints
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.hook_calls import (
    HookFailure,
    call_run_finished,
    call_session_finished,
    call_update_json,
)
from pytest_llmperf.interrupts import terminate_as_interrupt
from pytest_llmperf.live_progress import progress_sink
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.loadgen.scale_out.ray_workers import RayCluster, import_ray
from pytest_llmperf.methodology.llm_loadgen import LlmLoadgen
from pytest_llmperf.options import OPTIONS, InconclusivePolicy, LlmPerfOptions, WorkerBackend
from pytest_llmperf.output_paths import check_output_paths
from pytest_llmperf.reports.baseline import (
    BaselineSource,
    build_baseline,
    load_comparison,
    write_baseline,
)
from pytest_llmperf.reports.html import write_html_report
from pytest_llmperf.reports.json_report import build_report, write_json_report
from pytest_llmperf.reports.junit import (
    ab_properties,
    error_properties,
    junit_properties,
    regression_properties,
)
from pytest_llmperf.reports.outcome import judge_test
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.terminal import write_terminal_summary
from pytest_llmperf.slo.paired import DEFAULT_AB_THRESHOLD
from pytest_llmperf.slo.regression import RegressionCheck, Thresholds
from pytest_llmperf.slo.session import evaluate_session
from pytest_llmperf.slo.verdicts import SloVerdict, evaluate_runs
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.specs.rulesets import Ruleset, load_ruleset
from pytest_llmperf.workloads.tokenizer import Tokenizer

__all__ = [
    "LlmPerfInconclusiveWarning",
    "LlmPerfPlugin",
    "LlmPerfTokenLengthWarning",
    "llm_endpoint",
    "llm_endpoints",
    "llm_inconclusive",
    "llm_loadgen",
]

MARKERS = {
    "llm_workload": "llm_workload(name, requests=N, seed=S, **params): the requests an "
    "llm_loadgen run sends (pytest-llmperf)",
    "llm_load": "llm_load(pattern, rate=R | concurrency=C, duration=S): when requests are sent; "
    "pattern is poisson, constant, concurrency or max-throughput (pytest-llmperf)",
    "llm_slo": "llm_slo('ttft.p99 < 500ms', ..., ruleset=NAME): objectives judged on the "
    "test's runs after the test body (pytest-llmperf)",
    "llm_endpoint": "llm_endpoint('sim:PROFILE' | URL, model=None): the endpoint this test's "
    "llm_loadgen measures; --llm-endpoint on the command line overrides it (pytest-llmperf)",
    "llm_inconclusive": "llm_inconclusive('fail' | 'warn' | 'skip'): what an inconclusive SLO "
    "does to this test; --llm-inconclusive on the command line overrides it (pytest-llmperf)",
}
_LLM_MARKERS = tuple(MARKERS)
PLUGIN_KEY = pytest.StashKey["LlmPerfPlugin"]()
SPEC_KEY = pytest.StashKey[PerfSpec]()
GEN_KEY = pytest.StashKey[LoadGenerator]()
PAYLOAD_KEY = pytest.StashKey[dict[str, Any]]()
INCONCLUSIVE_KEY = pytest.StashKey[str]()  # the llm_inconclusive fixture's value for a test


class LlmPerfInconclusiveWarning(UserWarning):
    """An SLO could not be judged (too few samples, or the load generator was the bottleneck)."""


class LlmPerfTokenLengthWarning(UserWarning):
    """Prompts or outputs reached the server more than 10% off the lengths the workload asked
    for: the tokenizer is not the model's, or the model stopped early."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Other plugins and conftest.py files extend pytest-llmperf through these (hooks.py)."""
    from pytest_llmperf import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("llmperf", "LLM serving performance (pytest-llmperf)")
    for option in OPTIONS:
        # argparse %-formats help texts: "10%" must reach it as "10%%"
        group.addoption(
            option.flag, dest=option.dest, default=None, help=option.help.replace("%", "%%")
        )
        parser.addini(option.dest, option.help, default=None)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before pytest-asyncio's ``pytest_configure`` reads it: its fixture loop scope, if the
    user has not set one, so a bare suite runs without its warning (asyncio_scope.py)."""
    set_default_fixture_loop_scope(early_config)


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")

    def get(option: Any) -> Any:
        cli = config.getoption(option.dest, default=None)
        return cli if cli is not None else config.getini(option.dest)

    try:
        options = LlmPerfOptions.resolve(get)
        if options.worker_backend is WorkerBackend.RAY:
            import_ray()  # ray:N without the [ray] extra: a usage error before any test runs
            if _under_xdist(config) and not (options.ray_address or os.environ.get("RAY_ADDRESS")):
                raise LlmPerfUsageError(
                    "with pytest-xdist (-n) every xdist worker would start a local Ray "
                    "instance of its own: start one (`ray start --head`) and give its address "
                    "with --llm-ray-address, or drop -n",
                    where="--llm-workers",
                )
        ruleset = (
            load_ruleset(options.ruleset, base_dir=config.rootpath) if options.ruleset else None
        )
        thresholds = Thresholds.parse(options.baseline_threshold)
        ab_thresholds = Thresholds.parse(
            options.ab_threshold, where="--llm-ab-threshold", default=DEFAULT_AB_THRESHOLD
        )
        if options.history and not hasattr(config, "workerinput"):  # the controller appends
            from pytest_llmperf.history.check import check_history_target

            check_history_target(options.history)  # read-only: before any load, not at the end
        # a baseline file, or history[:N]: the last N comparable runs in --llm-history
        baseline = load_comparison(options.baseline_compare, history=options.history)
        if not hasattr(config, "workerinput"):  # the xdist controller writes the reports
            check_output_paths(
                [
                    ("--llm-json", options.json),
                    ("--llm-html", options.html),
                    ("--llm-baseline-save", options.baseline_save),
                ],
                [("--llm-events", options.events)],
            )
    except LlmPerfUsageError as exc:
        raise pytest.UsageError(f"pytest-llmperf: {exc}") from None
    plugin = LlmPerfPlugin(
        config,
        options,
        ruleset,
        baseline=baseline,
        thresholds=thresholds,
        ab_thresholds=ab_thresholds,
    )
    config.stash[PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "llmperf-session")


def _workers_word(opts: LlmPerfOptions) -> str:
    """`` workers=ray:2`` for the header, nothing for the default single process."""
    if opts.worker_backend is WorkerBackend.RAY:
        return f" workers=ray:{'auto' if opts.workers_auto else opts.workers}"
    return f" workers={opts.workers}" if opts.workers > 1 else ""


def _under_xdist(config: pytest.Config) -> bool:
    """An xdist worker, or a controller that will start workers (``-n N``, ``-n auto``)."""
    if hasattr(config, "workerinput"):
        return True
    n = getattr(config.option, "numprocesses", None)
    return bool(n) and getattr(config.option, "dist", "no") != "no"


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.stash.get(PLUGIN_KEY, None)
    if plugin is not None:
        plugin.close()
        config.pluginmanager.unregister(plugin)
        del config.stash[PLUGIN_KEY]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: object) -> None:
    """Mark async tests that use pytest-llmperf as asyncio tests (also in strict mode)."""
    if not inspect.iscoroutinefunction(obj):
        return
    marks = getattr(obj, "pytestmark", [])
    uses_llm = any(getattr(m, "name", "") in _LLM_MARKERS for m in marks) or any(
        p.startswith("llm_") for p in inspect.signature(obj).parameters
    )
    if uses_llm and not any(getattr(m, "name", "") == "asyncio" for m in marks):
        pytest.mark.asyncio(obj)


@pytest.fixture(scope="session")
def llm_endpoint(pytestconfig: pytest.Config) -> Endpoint:
    """The endpoint under test: URL, model, API and an ``httpx.AsyncClient`` factory.

    With no ``--llm-endpoint`` (or ``sim``/``sim:PROFILE``) this starts the
    embedded simulator for the session. ``llm_endpoint.client()`` must be
    called inside the running event loop. A directory measures another endpoint
    by overriding this fixture in its ``conftest.py`` with ``llm_endpoints.get(...)``.
    """
    return pytestconfig.stash[PLUGIN_KEY].endpoint()


@pytest.fixture(scope="session")
def llm_endpoints(pytestconfig: pytest.Config) -> EndpointPool:
    """The session's endpoints by spec: ``llm_endpoints.get("sim:tiny")`` or a URL, started
    and preflighted once (docs/endpoints.md); every one when ``--llm-endpoint`` is given."""
    return pytestconfig.stash[PLUGIN_KEY].endpoints


@pytest.fixture(scope="session")
def llm_inconclusive(pytestconfig: pytest.Config) -> str:
    """What an inconclusive SLO does to a test (fail, warn, skip); a directory overrides this
    fixture in its ``conftest.py``, a test the ``llm_inconclusive`` marker."""
    return pytestconfig.stash[PLUGIN_KEY].options.inconclusive.value


@pytest.fixture
def llm_loadgen(request: pytest.FixtureRequest) -> LlmLoadgen:
    """The load generator configured from this test's markers; ``await llm_loadgen.run()``.

    It measures the ``llm_endpoint`` marker's endpoint if the test has one, else the
    ``llm_endpoint`` fixture (a directory's override or the session's endpoint).
    """
    plugin = request.config.stash[PLUGIN_KEY]
    item = request.node
    spec = item.stash.get(SPEC_KEY, None) or PerfSpec.from_markers(None, None, [])
    endpoint = plugin.endpoint_for(item) or request.getfixturevalue("llm_endpoint")
    policy = request.getfixturevalue("llm_inconclusive")  # a directory's conftest may override
    if policy not in [p.value for p in InconclusivePolicy]:
        pytest.fail(
            f"pytest-llmperf: {item.nodeid}: the llm_inconclusive fixture must return "
            f"fail, warn or skip, got {policy!r}",
            pytrace=False,
        )
    item.stash[INCONCLUSIVE_KEY] = policy
    generator = LlmLoadgen(
        endpoint,
        spec,
        scale=plugin.options.scale,
        events_dir=plugin.options.events,
        events_name=item.nodeid,
        workers=plugin.options.workers,
        ray=plugin.ray,  # --llm-workers=ray:N|ray:auto
        tokenizer=plugin.endpoints.tokenizer(endpoint),
        on_result=lambda result: call_run_finished(item, result),  # pytest_llmperf_run_finished
        reference=plugin.reference_endpoint(),  # --llm-reference-endpoint: gated runs are A/B
        thresholds=plugin.ab_thresholds,  # --llm-ab-threshold
        ab_blocks=plugin.options.ab_blocks,
        progress=progress_sink(request.config, plugin.options, item.nodeid),  # --llm-progress
    )
    item.stash[GEN_KEY] = generator
    return generator


class LlmPerfPlugin:
    """Session state: options, the simulator process, collected results."""

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
        self._rulesets: dict[str, Ruleset] = {}
        self.data = SessionData()
        self.session_verdicts: list[SloVerdict] = []
        self._endpoint: Endpoint | None = None
        self._reference: Endpoint | None = None  # --llm-reference-endpoint, started on first use
        self.tokenizer: Tokenizer | None = None  # --llm-tokenizer, resolved after the preflight
        self.written: list[str] = []
        self.hook_failures: list[HookFailure] = []  # session hooks that raised (hook_calls.py)
        self.history: Any = None  # --llm-history's HistoryOutcome, at session end
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
        self.endpoints = EndpointPool(
            options,
            self._user_fields,
            pinned=config.getoption("llm_endpoint", default=None) is not None,
            on_first_use=self._arm_sigterm,
        )

    # -- endpoint --------------------------------------------------------------

    def endpoint(self) -> Endpoint:
        if self._endpoint is None:
            try:
                self._endpoint = self._start_endpoint()
            except LlmPerfUsageError as exc:  # one clear message for the whole session
                pytest.exit(f"pytest-llmperf: {exc}", 4)
        return self._endpoint

    def _start_endpoint(self) -> Endpoint:
        endpoint = self.endpoints.default()  # raises one LlmPerfUsageError (endpoints.py)
        self.server_identity = self.endpoints.identity(endpoint)
        self.tokenizer = self.endpoints.tokenizer(endpoint)
        return endpoint

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
            return self.endpoints.get(_endpoint_spec(item, mark))
        except LlmPerfUsageError as exc:
            pytest.fail(f"pytest-llmperf: {item.nodeid} llm_endpoint marker: {exc}", False)

    def reference_endpoint(self) -> Endpoint | None:
        """``--llm-reference-endpoint``'s server (None without one): a URL preflighted like
        the endpoint under test (same API, timeouts, request fields and key variable), or
        a simulator in its own process, independent of the endpoint's simulator."""
        opts = self.options
        if opts.reference_url is None and opts.reference_sim_profile is None:
            return None
        if self._reference is None:
            try:
                self._reference = self._start_reference()
            except LlmPerfUsageError as exc:
                pytest.exit(f"pytest-llmperf: --llm-reference-endpoint: {exc}", 4)
        return self._reference

    def _start_reference(self) -> Endpoint:
        opts = self.options
        spec = EndpointSpec(opts.reference_url, opts.reference_sim_profile, opts.model)
        return self.endpoints.start_apart(spec)

    def close(self) -> None:
        self._restore_sigterm()
        if self.ray is not None:  # its actors; a local Ray instance the session started
            self.ray.close()
        self.endpoints.close()  # the reference's simulator too

    # -- collection ------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        errors: list[str] = []
        for item in items:
            if not any(item.iter_markers(name) for name in _LLM_MARKERS):
                continue
            try:
                spec = item.stash[SPEC_KEY] = _spec_for(item)
                mark = item.get_closest_marker("llm_endpoint")
                if mark is not None:
                    _endpoint_spec(item, mark)  # a bad spec or profile: a usage error here
                _marked_inconclusive(item)
            except LlmPerfUsageError as exc:
                errors.append(f"{item.nodeid}: {exc}")
                continue
            if spec.run.extra_body:
                where = f"{item.nodeid} llm_workload(extra_body=...)"
                self._user_fields.append(UserFields(where, spec.run.extra_body))
        if errors:
            raise pytest.UsageError("pytest-llmperf: bad markers\n" + "\n".join(errors))
        self._preflight(items)

    def _preflight(self, items: list[pytest.Item]) -> None:
        """A real endpoint that does not answer ends the session here, once, before any test."""
        given = self.options.endpoint_url or self.options.reference_url
        if given is None or self.config.option.collectonly:
            return
        if hasattr(self.config, "workerinput"):
            return  # an xdist worker: the controller checked (see pytest_sessionstart)
        if not any(
            {"llm_endpoint", "llm_loadgen"} & set(getattr(i, "fixturenames", ())) for i in items
        ):
            return
        self._preflight_now()

    def _preflight_now(self) -> None:
        try:
            if self.options.endpoint_url is not None:
                self._endpoint = self._start_endpoint()
        except LlmPerfUsageError as exc:
            raise pytest.UsageError(f"pytest-llmperf: {exc}") from None
        try:
            if self.options.reference_url is not None:
                self._reference = self._start_reference()
        except LlmPerfUsageError as exc:
            raise pytest.UsageError(f"pytest-llmperf: --llm-reference-endpoint: {exc}") from None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Under xdist the controller collects nothing and a worker's usage error is an
        internal error, so the controller checks a given endpoint here, once."""
        dist_controller = self.config.pluginmanager.getplugin("dsession") is not None
        given = self.options.endpoint_url or self.options.reference_url
        if dist_controller and given and not self.config.option.collectonly:
            self._preflight_now()

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        opts = self.options
        if opts.endpoint_url is None:
            # started on first use; "(default)": nothing configured, say where it comes from
            how = " (default)" if not opts.endpoint_given else ""
            where = f"embedded simulator, profile {opts.sim_profile}{how}"
        else:
            where = Endpoint(opts.endpoint_url).label
        lines = [f"llmperf: endpoint under test: {where}"]
        if opts.reference_url or opts.reference_sim_profile:
            ref = (
                Endpoint(opts.reference_url).label
                if opts.reference_url
                else f"embedded simulator, profile {opts.reference_sim_profile} (own process)"
            )
            lines.append(f"llmperf: A/B reference endpoint: {ref}")
        lines.append(
            f"llmperf: api={opts.api} model={opts.model or 'auto (GET /v1/models)'} "
            f"timeout={opts.timeouts.total:g}s scale={opts.scale:g}" + _workers_word(opts)
        )
        if self.ruleset:
            lines.append(f"llmperf: ruleset {self.ruleset.name} ({self.ruleset.source})")
        return lines

    # -- per test --------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            result = yield
        except BaseException as exc:
            # Record what was measured even when the body raised; its error stands.
            self._judge(item, raise_failures=False)
            if isinstance(exc, KeyboardInterrupt) and PAYLOAD_KEY in item.stash:
                # pytest makes no report for an interrupted test: keep its partial runs here.
                self.data.add(item.nodeid, "interrupted", item.stash[PAYLOAD_KEY])
                self.data.interrupted = True
            raise
        self._judge(item, raise_failures=True)
        return result

    def _judge(self, item: pytest.Item, *, raise_failures: bool) -> None:
        spec = item.stash.get(SPEC_KEY, None)
        generator = item.stash.get(GEN_KEY, None)
        results: list[RunResult] = generator.results if generator else []
        slos = spec.slos if spec else ()
        verdicts = evaluate_runs(slos, results, rulesets=self._test_rulesets(item))
        checks: list[RegressionCheck] = []
        if results or slos:
            endpoint = self.endpoints.describe(generator.endpoint if generator else self.endpoint())
            if self.baseline is not None and results:
                checks = self.baseline.compare(
                    item.nodeid, results, endpoint=endpoint, thresholds=self.thresholds
                )
            comparisons = list(getattr(generator, "comparisons", ()))
            props = (
                junit_properties(verdicts)
                + regression_properties(checks)
                + (
                    [("llm_baseline.compared_with", self.baseline.describe(item.nodeid))]
                    if checks and self.baseline is not None
                    else []
                )
                + ab_properties(comparisons)
                + error_properties((r.label, r.error_samples) for r in results)
            )
            item.stash[PAYLOAD_KEY] = {
                "endpoint": endpoint,
                "runs": [r.to_dict() for r in results],
                "slos": [v.to_dict() for v in verdicts],
                "states": [r.accumulator.to_state() for r in results],
                "analyses": list(generator.analyses) if generator else [],
                "baseline": [c.to_dict() for c in checks],
                "junit": props,
            }
            by_run = {c.run: c for c in comparisons}  # --llm-reference-endpoint: A/B runs
            for run in item.stash[PAYLOAD_KEY]["runs"]:
                if run["label"] in by_run:
                    run["reference"] = by_run.pop(run["label"]).to_dict()
            if self._junit_testcase_properties():
                item.user_properties.extend(props)
            for r in results:
                for warning in r.token_lengths["warnings"]:
                    warnings.warn(LlmPerfTokenLengthWarning(f"{r.label}: {warning}"), stacklevel=1)
        if not raise_failures:
            return
        outcome = judge_test(
            item.nodeid,
            slos,
            results,
            verdicts,
            checks,
            baseline=self.baseline.describe(item.nodeid) if self.baseline else "",
            ab=[c for ab in getattr(generator, "comparisons", ()) for c in ab.checks],
            reference=self._reference.label if self._reference is not None else "",
        )
        if outcome.kind == "fail":
            pytest.fail(outcome.message, pytrace=False)
        if outcome.kind == "inconclusive":
            policy = self._inconclusive_policy(item)
            if policy == "fail":
                pytest.fail(
                    outcome.message + "\n(--llm-inconclusive=warn|skip to relax)", pytrace=False
                )
            elif policy == "skip":
                pytest.skip(outcome.message)
            else:
                warnings.warn(LlmPerfInconclusiveWarning(outcome.message), stacklevel=1)

    def _inconclusive_policy(self, item: pytest.Item) -> InconclusivePolicy:
        """``--llm-inconclusive`` on the command line, else the test's marker, else the
        ``llm_inconclusive`` fixture (a directory's override), else the ini or default."""
        if self.config.getoption("llm_inconclusive", default=None) is not None:
            return self.options.inconclusive
        marked = _marked_inconclusive(item)
        if marked is not None:
            return marked
        return InconclusivePolicy(item.stash.get(INCONCLUSIVE_KEY, self.options.inconclusive))

    def _test_rulesets(self, item: pytest.Item) -> list[Ruleset]:
        """The rulesets named by ``llm_slo(ruleset=...)`` (their minimum samples and duration)."""
        out: list[Ruleset] = []
        for mark in item.iter_markers("llm_slo"):
            name = mark.kwargs.get("ruleset")
            if isinstance(name, str):
                if name not in self._rulesets:
                    self._rulesets[name] = load_ruleset(name, base_dir=self.config.rootpath)
                out.append(self._rulesets[name])
        return out

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

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "call" and PAYLOAD_KEY in item.stash:
            # An attribute of our own on pytest's report (xdist ships it to the controller
            # with the rest of the report's __dict__); TestReport does not declare it.
            report.llmperf = item.stash[PAYLOAD_KEY]  # type: ignore[attr-defined]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "llmperf", None)
        if report.when == "call" and payload is not None:
            outcome: str = report.outcome
            if hasattr(report, "wasxfail"):  # pytest reports xfail as skipped, xpass as passed
                outcome = "xfailed" if report.skipped else "xpassed"
            self.data.add(report.nodeid, outcome, payload)
            xml = self._junit_xml()
            if xml is not None and not self._junit_testcase_properties():
                for name, value in payload.get("junit", []):
                    xml.add_global_property(f"{report.nodeid}::{name}", value)

    # -- session ---------------------------------------------------------------

    def pytest_keyboard_interrupt(self) -> None:
        self.data.interrupted = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):
            return  # an xdist worker: its reports travel to the controller, which aggregates
        groups = self.data.groups()
        if self.ruleset:
            self.session_verdicts = evaluate_session(groups, self.ruleset)
            failing = {"fail"} | (
                {"inconclusive"} if self.options.inconclusive == "fail" else set()
            )
            if any(v.verdict in failing for v in self.session_verdicts) and session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            xml = self._junit_xml()
            if xml is not None:
                for name, value in junit_properties(self.session_verdicts, prefix="llm_session"):
                    xml.add_global_property(name, value)
        endpoint = self._report_endpoint()
        session_info = {
            "ruleset": self.ruleset.describe() if self.ruleset else None,
            "slos": [v.to_dict() for v in self.session_verdicts],
            "baseline": {
                "compared_with": self.baseline.path if self.baseline else None,
                "baseline_created_at": self.baseline.created_at if self.baseline else None,
                "baseline_endpoint": self.baseline.endpoint if self.baseline else None,
                "thresholds": self.thresholds.describe(),
                "saved_to": self.options.baseline_save,
            },
            "options": self._run_options(),
            "exitstatus": int(session.exitstatus),
        }
        if self.options.baseline_save:
            document = build_baseline(self.data, endpoint=endpoint, options=self._run_options())
            self.written.append(str(write_baseline(self.options.baseline_save, document)))
        report, failure = call_update_json(
            self.config, lambda: build_report(self.data, endpoint=endpoint, session=session_info)
        )
        if self.options.json:
            self.written.append(str(write_json_report(self.options.json, report)))
        if self.options.html:
            trends = _report_trends(self.options.history, report) if self.options.history else None
            html = write_html_report(self.options.html, report, self.data, trends)
            self.written.append(str(html))
        failures = [failure, call_session_finished(session, report)]
        self.hook_failures = [f for f in failures if f is not None]
        if self.hook_failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        self._append_history(session)

    def _append_history(self, session: pytest.Session) -> None:
        """``--llm-history``: append the session, after every other output is written (a
        failure is a red line and exit status 3, like a failing hook, and loses nothing)."""
        if not self.options.history or self.config.option.collectonly:
            return
        from pytest_llmperf.history.session import history_at_session_end

        self.history = history_at_session_end(
            self.options.history,
            self.data.measured_tests(),
            endpoint=self._report_endpoint(),
            options=self._run_options(),
            started_at=self._started_at,
            tag=self.options.history_tag,
            rootdir=self.config.rootpath,
        )
        if self.history.error and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def _report_endpoint(self) -> dict[str, Any]:
        """What the tests measured (under xdist: the workers' endpoints); with several
        endpoints no single one is claimed (each test's ``endpoint`` says which)."""
        measured = [dict(t.endpoint) for t in self.data.measured_tests() if t.endpoint]
        several = several_endpoints(measured)
        if several is not None:
            return several
        if measured:
            return measured[0]
        if self._endpoint is not None:
            return self.endpoints.describe(self._endpoint)
        return self._planned_endpoint()

    def _planned_endpoint(self) -> dict[str, Any]:
        opts = self.options
        url = redact_url(opts.endpoint_url) if opts.endpoint_url else None
        return {"url": url, "simulator": opts.sim_profile, "api": opts.api}

    def _run_options(self) -> dict[str, Any]:
        """The options that shape measurements (never the key, only its variable's name)."""
        opts = self.options
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
            "ab_threshold": opts.ab_threshold
            if self.options.reference_url or self.options.reference_sim_profile
            else None,
            "ab_blocks": opts.ab_blocks,
        }

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write_terminal_summary(
            terminalreporter,
            self.data,
            self.session_verdicts,
            self.written,
            errors=[f.message() for f in self.hook_failures]
            + ([self.history.error] if self.history and self.history.error else []),
        )
        if self.history and self.history.note:
            terminalreporter.write_line(self.history.note)


def _report_trends(target: str, report: Any) -> Any:
    """``--llm-history`` with ``--llm-html``: the report's trend sections (never raises)."""
    from pytest_llmperf.history.trends import report_trends

    return report_trends(target, report)


def _utc_now() -> str:
    from pytest_llmperf.history.session import utc_now

    return utc_now()


def _endpoint_spec(item: pytest.Item, mark: pytest.Mark) -> EndpointSpec:
    """``llm_endpoint("sim:tiny" | URL, model=None)``; a bad one names the test."""
    where = f"{item.nodeid} llm_endpoint marker"
    if len(mark.args) != 1 or set(mark.kwargs) - {"model"}:
        raise LlmPerfUsageError(
            f"takes one spec ('sim:PROFILE' or a URL) and model=..., got "
            f"args={mark.args!r} kwargs={mark.kwargs!r}",
            where=where,
        )
    return EndpointSpec.parse(mark.args[0], model=mark.kwargs.get("model"), where=where)


def _marked_inconclusive(item: pytest.Item) -> InconclusivePolicy | None:
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


def _spec_for(item: pytest.Item) -> PerfSpec:
    workload = item.get_closest_marker("llm_workload")
    load = item.get_closest_marker("llm_load")
    # Every llm_slo applies: module, class and function levels add up.
    slos = [(m.args, m.kwargs) for m in item.iter_markers("llm_slo")]
    return PerfSpec.from_markers(
        (workload.args, workload.kwargs) if workload else None,
        (load.args, load.kwargs) if load else None,
        slos,
    )
