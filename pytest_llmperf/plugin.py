"""The pytest plugin: wires pytest's options, markers, fixtures and hooks to the library.

Nothing here measures or judges; it only moves data between pytest and
:mod:`pytest_llmperf`'s packages:

- options and ini keys -> :class:`~pytest_llmperf.options.LlmPerfOptions`
- markers -> :class:`~pytest_llmperf.config.PerfSpec` at collection (bad ones
  are usage errors that name the test and the bad word)
- ``llm_endpoint`` / ``llm_loadgen`` fixtures -> the endpoint (simulator
  started on first use) and a :class:`~pytest_llmperf.loadgen.generator.LoadGenerator`
- after each test body: SLO verdicts fail the test itself, JUnit properties
- the call report carries the runs, so the session data also forms under xdist
- session end: merged histograms, session ruleset, terminal summary, JSON.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Generator
from typing import Any

import pytest

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.models_sync import resolve_model_sync
from pytest_llmperf.config import PerfSpec
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.options import OPTIONS, LlmPerfOptions
from pytest_llmperf.reports.json_report import build_report, write_json_report
from pytest_llmperf.reports.junit import junit_properties
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.table import verdict_table
from pytest_llmperf.reports.terminal import write_terminal_summary
from pytest_llmperf.slo.rulesets import Ruleset, load_ruleset
from pytest_llmperf.slo.verdicts import SloVerdict, evaluate, evaluate_runs

__all__ = ["LlmPerfInconclusiveWarning", "LlmPerfPlugin", "llm_endpoint", "llm_loadgen"]

MARKERS = {
    "llm_workload": "llm_workload(name, requests=N, seed=S, **params): the requests an "
    "llm_loadgen run sends (pytest-llmperf)",
    "llm_load": "llm_load(pattern, rate=R | concurrency=C, duration=S): when requests are sent; "
    "pattern is poisson, constant, concurrency or max-throughput (pytest-llmperf)",
    "llm_slo": "llm_slo('ttft.p99 < 500ms', ..., ruleset=NAME): objectives judged on the "
    "test's runs after the test body (pytest-llmperf)",
}
_LLM_MARKERS = tuple(MARKERS)
PLUGIN_KEY = pytest.StashKey["LlmPerfPlugin"]()
SPEC_KEY = pytest.StashKey[PerfSpec]()
GEN_KEY = pytest.StashKey[LoadGenerator]()
PAYLOAD_KEY = pytest.StashKey[dict[str, Any]]()


class LlmPerfInconclusiveWarning(UserWarning):
    """An SLO could not be judged (too few samples, or the load generator was the bottleneck)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("llmperf", "LLM serving performance (pytest-llmperf)")
    for option in OPTIONS:
        group.addoption(option.flag, dest=option.dest, default=None, help=option.help)
        parser.addini(option.dest, option.help, default=None)


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")

    def get(option: Any) -> Any:
        cli = config.getoption(option.dest, default=None)
        return cli if cli is not None else config.getini(option.dest)

    try:
        options = LlmPerfOptions.resolve(get)
        ruleset = load_ruleset(options.ruleset) if options.ruleset else None
    except LlmPerfUsageError as exc:
        raise pytest.UsageError(f"pytest-llmperf: {exc}") from None
    plugin = LlmPerfPlugin(config, options, ruleset)
    config.stash[PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "llmperf-session")


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
    called inside the running event loop.
    """
    return pytestconfig.stash[PLUGIN_KEY].endpoint()


@pytest.fixture
def llm_loadgen(request: pytest.FixtureRequest, llm_endpoint: Endpoint) -> LoadGenerator:
    """The load generator configured from this test's markers; ``await llm_loadgen.run()``."""
    plugin = request.config.stash[PLUGIN_KEY]
    item = request.node
    spec = item.stash.get(SPEC_KEY, None) or PerfSpec.from_markers(None, None, [])
    generator = LoadGenerator(llm_endpoint, spec, scale=plugin.options.scale)
    item.stash[GEN_KEY] = generator
    return generator


class LlmPerfPlugin:
    """Session state: options, the simulator process, collected results."""

    def __init__(
        self, config: pytest.Config, options: LlmPerfOptions, ruleset: Ruleset | None
    ) -> None:
        self.config = config
        self.options = options
        self.ruleset = ruleset
        self.data = SessionData()
        self.session_verdicts: list[SloVerdict] = []
        self._endpoint: Endpoint | None = None
        self._sim: Any = None
        self.written: list[str] = []

    # -- endpoint --------------------------------------------------------------

    def endpoint(self) -> Endpoint:
        if self._endpoint is None:
            self._endpoint = self._start_endpoint()
        return self._endpoint

    def _start_endpoint(self) -> Endpoint:
        opts = self.options
        url = opts.endpoint_url
        if url is None:
            from pytest_llmperf.sim import start_sim_process

            try:
                self._sim = start_sim_process(opts.sim_profile or "fixed")
            except Exception as exc:  # a broken simulator profile must end the session once
                pytest.exit(f"pytest-llmperf: cannot start the embedded simulator: {exc}", 4)
            url = self._sim.url
        endpoint = Endpoint.from_env(
            url,
            api_key_env=opts.api_key_env if opts.endpoint_url else None,
            model=opts.model,
            api=opts.api,  # type: ignore[arg-type]
            timeouts=opts.timeouts,
            sim_profile=opts.sim_profile,
        )
        try:
            return resolve_model_sync(endpoint)
        except LlmPerfUsageError as exc:
            pytest.exit(f"pytest-llmperf: {exc}", 4)

    def close(self) -> None:
        if self._sim is not None:
            self._sim.stop()
            self._sim = None

    # -- collection ------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        errors: list[str] = []
        for item in items:
            if not any(item.iter_markers(name) for name in _LLM_MARKERS):
                continue
            try:
                item.stash[SPEC_KEY] = _spec_for(item)
            except LlmPerfUsageError as exc:
                errors.append(f"{item.nodeid}: {exc}")
        if errors:
            raise pytest.UsageError("pytest-llmperf: bad markers\n" + "\n".join(errors))

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        opts = self.options
        if opts.endpoint_url is None:
            how = "the default" if not opts.endpoint_given else "requested"
            where = f"embedded simulator, profile {opts.sim_profile} ({how}; started on first use)"
        else:
            where = Endpoint(opts.endpoint_url).label
        lines = [f"llmperf: endpoint under test: {where}"]
        lines.append(
            f"llmperf: api={opts.api} model={opts.model or 'auto (GET /v1/models)'} "
            f"timeout={opts.timeouts.total:g}s scale={opts.scale:g}"
        )
        if self.ruleset:
            lines.append(f"llmperf: ruleset {self.ruleset.name} ({self.ruleset.source})")
        return lines

    # -- per test --------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            result = yield
        except BaseException:
            # Record what was measured even when the body raised; its error stands.
            self._judge(item, raise_failures=False)
            raise
        self._judge(item, raise_failures=True)
        return result

    def _judge(self, item: pytest.Item, *, raise_failures: bool) -> None:
        spec = item.stash.get(SPEC_KEY, None)
        generator = item.stash.get(GEN_KEY, None)
        results: list[RunResult] = generator.results if generator else []
        slos = spec.slos if spec else ()
        verdicts = evaluate_runs(slos, results)
        if results or slos:
            item.stash[PAYLOAD_KEY] = {
                "endpoint": (generator.endpoint if generator else self.endpoint()).describe(),
                "runs": [r.to_dict() for r in results],
                "slos": [v.to_dict() for v in verdicts],
                "states": [r.accumulator.to_state() for r in results],
                "analyses": list(generator.analyses) if generator else [],
            }
            item.user_properties.extend(junit_properties(verdicts))
        if not raise_failures:
            return
        if slos and not any(r.gated for r in results):
            pytest.fail(
                f"{item.nodeid} declares llm_slo but made no gated llm_loadgen.run()",
                pytrace=False,
            )
        failed = [v for v in verdicts if v.verdict == "fail"]
        inconclusive = [v for v in verdicts if v.verdict == "inconclusive"]
        if failed:
            pytest.fail(f"SLO violated in {item.nodeid}:\n{verdict_table(verdicts)}", pytrace=False)
        if inconclusive:
            text = f"SLO inconclusive in {item.nodeid}:\n{verdict_table(verdicts)}"
            policy = self.options.inconclusive
            if policy == "fail":
                pytest.fail(text + "\n(--llm-inconclusive=warn|skip to relax)", pytrace=False)
            elif policy == "skip":
                pytest.skip(text)
            else:
                warnings.warn(LlmPerfInconclusiveWarning(text), stacklevel=1)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "call" and PAYLOAD_KEY in item.stash:
            report.llmperf = item.stash[PAYLOAD_KEY]  # type: ignore[attr-defined]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "llmperf", None)
        if report.when == "call" and payload is not None:
            self.data.add(report.nodeid, report.outcome, payload)

    # -- session ---------------------------------------------------------------

    def pytest_keyboard_interrupt(self) -> None:
        self.data.interrupted = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.ruleset:
            for key, acc in self.data.merged().items():
                merged = RunResult({}, {}, {}, acc, label=f"session {key}")
                self.session_verdicts.extend(evaluate(slo, merged) for slo in self.ruleset.slos)
            if any(v.verdict == "fail" for v in self.session_verdicts) and session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.options.json:
            report = build_report(
                self.data,
                endpoint=self._endpoint.describe() if self._endpoint else self._planned_endpoint(),
                session={
                    "ruleset": self.ruleset.describe() if self.ruleset else None,
                    "slos": [v.to_dict() for v in self.session_verdicts],
                    "exitstatus": int(session.exitstatus),
                },
            )
            self.written.append(str(write_json_report(self.options.json, report)))

    def _planned_endpoint(self) -> dict[str, Any]:
        opts = self.options
        return {"url": opts.endpoint_url, "simulator": opts.sim_profile, "api": opts.api}

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write_terminal_summary(terminalreporter, self.data, self.session_verdicts, self.written)


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
