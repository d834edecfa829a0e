"""Options and configuration: the command line and ini keys, the markers' help, the
plugin object registered for the session (and unregistered after it).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_llmperf.errors import (
    LlmPerfUsageError,
)
from pytest_llmperf.loadgen.scale_out.ray_workers import import_ray
from pytest_llmperf.options import OPTIONS, LlmPerfOptions, WorkerBackend
from pytest_llmperf.plugin.asyncio_scope import set_default_fixture_loop_scope
from pytest_llmperf.plugin.core import PLUGIN_KEY, LlmPerfPlugin
from pytest_llmperf.plugin.markers import MARKERS
from pytest_llmperf.plugin.output_paths import check_output_paths
from pytest_llmperf.reports.baseline import (
    load_comparison,
)
from pytest_llmperf.slo.paired import DEFAULT_AB_THRESHOLD
from pytest_llmperf.slo.regression import Thresholds
from pytest_llmperf.specs.rulesets import load_ruleset


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
    if _under_xdist(config) and not hasattr(config, "workerinput"):
        plugin.preflight_controller()  # before xdist's pytest_configure (trylast) starts workers


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
