"""Options and configuration: the command line and ini keys, the markers' help, the
session's state built and stashed (:mod:`.state`), and the plugin's hook objects, one per
job, registered for the session over that state (and unregistered after it).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.client.negotiation import UserFields
from pytest_llmperf.errors import (
    LlmPerfUsageError,
)
from pytest_llmperf.gpu.local import local_gpus
from pytest_llmperf.loadgen.scale_out.ray_workers import RayCluster, import_ray
from pytest_llmperf.options import OPTIONS, LlmPerfOptions, WorkerBackend
from pytest_llmperf.plugin.asyncio_scope import set_default_fixture_loop_scope
from pytest_llmperf.plugin.collection import CollectionHooks
from pytest_llmperf.plugin.endpoints import EndpointPool
from pytest_llmperf.plugin.header import HeaderHooks
from pytest_llmperf.plugin.interrupts import InterruptHooks
from pytest_llmperf.plugin.judging import JudgingHooks
from pytest_llmperf.plugin.live_progress import server_progress
from pytest_llmperf.plugin.markers import MARKERS
from pytest_llmperf.plugin.output_paths import check_output_paths
from pytest_llmperf.plugin.preflight import preflight_controller
from pytest_llmperf.plugin.reports import ReportsHooks
from pytest_llmperf.plugin.servers import SHARED_SERVERS_KEY, ServersHooks
from pytest_llmperf.plugin.state import STATE_KEY, SessionState
from pytest_llmperf.plugin.summary import SummaryHooks
from pytest_llmperf.plugin.under_test import arm_sigterm
from pytest_llmperf.reports.baseline import BaselineSource, load_comparison
from pytest_llmperf.slo.paired import DEFAULT_AB_THRESHOLD
from pytest_llmperf.slo.regression import Thresholds
from pytest_llmperf.specs.rulesets import Ruleset, load_ruleset

__all__ = [
    "HOOKS",
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_configure",
    "pytest_load_initial_conftests",
    "pytest_unconfigure",
]

HOOKS = {
    "llmperf-collection": CollectionHooks,
    "llmperf-servers": ServersHooks,
    "llmperf-judging": JudgingHooks,
    "llmperf-header": HeaderHooks,
    "llmperf-interrupts": InterruptHooks,
    "llmperf-reports": ReportsHooks,
    "llmperf-summary": SummaryHooks,
}
"""The plugin's hook objects, one per job, each registered under its name over the
session's state (each hook of pytest's is implemented by one of them only)."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Other plugins and conftest.py files extend pytest-llmperf through these (hooks.py)."""
    from pytest_llmperf import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("llmperf", "LLM serving performance (pytest-llmperf)")
    for option in OPTIONS:
        # argparse %-formats help texts: "10%" must reach it as "10%%"
        help_text = option.help.replace("%", "%%")
        if option.switch:
            group.addoption(
                option.flag,
                dest=option.dest,
                default=None,
                action="store_const",
                const="true",
                help=help_text,
            )
        elif option.repeat:
            group.addoption(
                option.flag, dest=option.dest, default=None, action="append", help=help_text
            )
        else:
            group.addoption(option.flag, dest=option.dest, default=None, help=help_text)
        if option.repeat:
            parser.addini(option.dest, option.help, type="linelist", default=[])
        else:
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

    def on_command_line(option: Any) -> bool:
        return config.getoption(option.dest, default=None) is not None

    try:
        options = LlmPerfOptions.resolve(get, on_command_line)
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
                    ("--llm-markdown", options.markdown),
                    ("--llm-baseline-save", options.baseline_save),
                ],
                [("--llm-events", options.events)],
            )
        # --llm-gpu: NVML loaded once (a machine without a driver never imports pynvml);
        # an index it lacks is a usage error now, no GPU at all one note (the header)
        gpus = local_gpus(options.gpu)
    except LlmPerfUsageError as exc:
        raise pytest.UsageError(f"pytest-llmperf: {exc}") from None
    state = _new_state(config, options, ruleset, baseline, thresholds, ab_thresholds)
    state.gpus = gpus
    config.stash[STATE_KEY] = state
    for name, hooks in HOOKS.items():
        config.pluginmanager.register(hooks(state), name)
    if _under_xdist(config) and not hasattr(config, "workerinput"):
        preflight_controller(state)  # before xdist's pytest_configure (trylast) starts workers


def _new_state(
    config: pytest.Config,
    options: LlmPerfOptions,
    ruleset: Ruleset | None,
    baseline: BaselineSource | None,
    thresholds: Thresholds,
    ab_thresholds: Thresholds,
) -> SessionState:
    """The session's state, its endpoint pool ready to start what the tests ask for."""
    from pytest_llmperf.history.session import utc_now

    started_at = utc_now()  # the session's start, for the history
    user_fields: list[UserFields] = []  # tests' extra_body, probed at each preflight
    # every endpoint of the session by spec (endpoints.py); --llm-endpoint on the
    # command line pins them all to one server
    # --llm-server-cmd on the command line pins them to the server it starts; under
    # xdist a worker measures the controller's (workerinput, plugin/servers.py)
    workerinput = getattr(config, "workerinput", None) or {}
    state: SessionState
    endpoints = EndpointPool(
        options,
        user_fields,
        pinned=config.getoption("llm_endpoint", default=None) is not None
        or config.getoption("llm_server_cmd", default=None) is not None,
        on_first_use=lambda: arm_sigterm(state),
        log_dir=lambda: _server_log_dir(config, options),
        progress=lambda: server_progress(config, options),
        shared=workerinput.get(SHARED_SERVERS_KEY),
    )
    state = SessionState(
        config=config,
        options=options,
        endpoints=endpoints,
        user_fields=user_fields,
        ruleset=ruleset,
        baseline=baseline,
        thresholds=thresholds,
        ab_thresholds=ab_thresholds,
        # --llm-workers=ray:N: connected (or a local instance started) at the first Ray run
        ray=RayCluster(options.ray_address, auto=options.workers_auto)
        if options.worker_backend is WorkerBackend.RAY
        else None,
        started_at=started_at,
    )
    return state


def _server_log_dir(config: pytest.Config, options: LlmPerfOptions) -> Path:
    """``--llm-server-log-dir``, else ``llmperf-servers/`` under pytest's basetemp."""
    if options.server_log_dir:
        return Path(options.server_log_dir).resolve()
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None and not config.option.basetemp:
        # an xdist controller starts the session's server as it is configured, before
        # pytest's own factory exists: a numbered basetemp of its own, as pytest's
        with contextlib.suppress(Exception):
            factory = pytest.TempPathFactory.from_config(config, _ispytest=True)
    if factory is not None:
        return Path(factory.getbasetemp()) / "llmperf-servers"
    return Path(tempfile.mkdtemp(prefix="llmperf-servers-"))


def _under_xdist(config: pytest.Config) -> bool:
    """An xdist worker, or a controller that will start workers (``-n N``, ``-n auto``)."""
    if hasattr(config, "workerinput"):
        return True
    n = getattr(config.option, "numprocesses", None)
    return bool(n) and getattr(config.option, "dist", "no") != "no"


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        state.restore_sigterm()
        if state.ray is not None:  # its actors; a local Ray instance the session started
            state.ray.close()
        state.endpoints.close()  # the reference's simulator too
        for name in HOOKS:
            config.pluginmanager.unregister(name=name)
        del config.stash[STATE_KEY]
