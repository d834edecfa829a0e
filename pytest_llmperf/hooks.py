"""Hook specifications: how other plugins and ``conftest.py`` files extend pytest-llmperf.

The plugin registers these with ``pluginmanager.add_hookspecs`` in
``pytest_addhooks``, so a ``conftest.py`` (or an installed plugin) implements
one by defining a function of the same name, as with pytest's own hooks. A
plugin that must also load without pytest-llmperf installed marks its
implementations ``@pytest.hookimpl(optionalhook=True)``.

Why hooks rather than reading the JSON afterwards: a run's
:class:`~pytest_llmperf.results.run_result.RunResult` holds the merged HDR
histograms and the run's configuration, which the JSON only summarises, and
a hook sees it in the process that measured it (an xdist worker too).

Where each is called (the plugin does the calling; the library stays free of
pytest): ``pytest_llmperf_run_finished`` in the process that ran the test,
the other two once per session in the process that writes the reports (the
xdist controller). A hook implementation that raises never costs the
reports; what it does instead is documented on each hook and in
docs/extending.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_llmperf.results.run_result import RunResult

__all__ = [
    "pytest_llmperf_run_finished",
    "pytest_llmperf_session_finished",
    "pytest_llmperf_update_json",
]


@pytest.hookspec
def pytest_llmperf_run_finished(item: pytest.Item, result: RunResult) -> None:
    """Called after each load-generator run of a test, with that run's result.

    Every run a test makes counts: ``llm_loadgen.run()``, each point of
    ``sweep()``, the probes of ``max_rate()``/``max_concurrency()`` and
    ``warm_up()``, a comparison's runs; ungated ones have ``result.gated``
    false. Called in the process that ran the test (an xdist worker under
    ``-n``), before the test's SLOs are judged, so an implementation sees
    the full-resolution histograms (``result.metrics["ttft"].p(99)`` in ms,
    ``result.accumulator``) and may send them elsewhere.

    :param item: the test that made the run.
    :param result: the run's :class:`~pytest_llmperf.results.run_result.RunResult`
        (``label``, ``load``, ``workload``, ``counts``, ``metrics``,
        ``self_check``). Treat it as read-only: the test's verdicts and
        reports are computed from it.

    If an implementation raises, the test fails with an error that names the
    hook and where it raised; the run is kept in the reports.
    """


@pytest.hookspec
def pytest_llmperf_update_json(config: pytest.Config, report: dict[str, Any]) -> None:
    """Called once per session with the report before it is written, to add to it.

    ``report`` is the dict that ``--llm-json`` writes (and ``--llm-html``
    renders): add keys at any level, e.g. ``report["ci"] = {"commit": sha}``
    or a metric of your own in ``report["tests"][i]["runs"][j]["metrics"]``.
    Values must be JSON (no NaN). Renaming or removing the core keys breaks
    the report's contract (docs/reports.md). Called in the process that
    writes the reports (the xdist controller, never a worker), whether or not
    a file is asked for, before :func:`pytest_llmperf_session_finished`.

    :param config: the pytest config (e.g. ``config.getoption("llm_json")``).
    :param report: the session's report, modified in place.

    If an implementation raises or leaves the report unwritable as JSON, the
    report is written without any plugin's additions, with the error under
    ``report["session"]["hook_errors"]``; the terminal names the hook and
    where it raised, and a session that would have passed exits with
    ``pytest.ExitCode.INTERNAL_ERROR`` (3).
    """


@pytest.hookspec
def pytest_llmperf_session_finished(session: pytest.Session, report: dict[str, Any]) -> None:
    """Called once per session after the reports are written, with the final report.

    For sending a session's results elsewhere (a dashboard, a pull-request
    comment), or acting on the session-wide verdicts
    (``report["session"]["slos"]``) and each test's outcome and SLO verdicts
    (``report["tests"]``): the report as written, additions from
    :func:`pytest_llmperf_update_json` included. Called in the process that
    writes the reports (the xdist controller), whether or not a file was
    asked for; changes to ``report`` are not written anywhere. An
    implementation may set ``session.exitstatus``.

    :param session: the pytest session.
    :param report: the session's report (as ``--llm-json`` wrote it).

    If an implementation raises, the reports stay as written; the terminal
    names the hook and where it raised, and a session that would have
    passed exits with ``pytest.ExitCode.INTERNAL_ERROR`` (3).
    """
