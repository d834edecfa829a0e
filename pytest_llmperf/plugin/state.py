"""The plugin's session state: one plain object, held in ``config.stash[STATE_KEY]``.

Every pytest hook of the plugin lives in a module with one job (collection,
judging, reports, ...) and takes this object; none keeps state of its own, and
none reaches into another's. As pytest's own ``junitxml`` does, the state is
plain data: what the session was configured with, the endpoints it measures
(started on first use), what its tests measured and judged, why it stopped, and
what it wrote. Its fields are public: the module that owns a field is named in
its comment, and the others only read it.

Built once per session by :func:`pytest_llmperf.plugin.configure.pytest_configure`
(from the options, the ruleset and the baseline, each checked first) and
closed by ``pytest_unconfigure``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.negotiation import UserFields
from pytest_llmperf.gpu.local import LocalGpus
from pytest_llmperf.hook_calls import HookFailure
from pytest_llmperf.loadgen.scale_out.ray_workers import RayCluster
from pytest_llmperf.options import LlmPerfOptions
from pytest_llmperf.plugin.endpoints import EndpointPool
from pytest_llmperf.reports.baseline import BaselineSource
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.slo.paired import DEFAULT_AB_THRESHOLD
from pytest_llmperf.slo.regression import Thresholds
from pytest_llmperf.slo.verdicts import SloVerdict
from pytest_llmperf.specs.rulesets import Ruleset

__all__ = ["STATE_KEY", "SessionState"]


def _ab_default() -> Thresholds:
    return Thresholds(DEFAULT_AB_THRESHOLD)


def _no_restore() -> None:
    """Nothing to put back: SIGTERM is armed only once an endpoint is used."""


@dataclass(eq=False)
class SessionState:
    """One pytest session of pytest-llmperf, as data (see the module's docstring)."""

    # -- what the session was configured with (configure.py) -------------------------
    config: pytest.Config
    options: LlmPerfOptions
    endpoints: EndpointPool  # every endpoint of the session by spec (endpoints.py)
    user_fields: list[UserFields]  # tests' extra_body, probed at preflight (collection.py)
    ruleset: Ruleset | None = None  # --llm-ruleset: the session's targets
    baseline: BaselineSource | None = None  # --llm-baseline-compare: a file or history[:N]
    thresholds: Thresholds = field(default_factory=Thresholds)  # --llm-baseline-threshold
    ab_thresholds: Thresholds = field(default_factory=_ab_default)  # --llm-ab-threshold
    ray: RayCluster | None = None  # --llm-workers=ray:N, connected at the first Ray run
    started_at: str = ""  # the session's start, for the history
    gpus: LocalGpus | None = None  # --llm-gpu: this machine's GPUs, read in every run

    # -- the endpoints under test, started on first use (under_test.py) --------------
    endpoint: Endpoint | None = None  # the session's endpoint
    reference: Endpoint | None = None  # --llm-reference-endpoint
    reference_by_api: dict[str, Endpoint] = field(default_factory=dict)  # ... through an API
    # the baseline's (or history's) fingerprint against this session's, checked once
    comparability: dict[str, Any] | None = None
    restore_sigterm: Callable[[], None] = _no_restore  # SIGTERM as Ctrl-C while measuring

    # -- what the tests measured and how they were judged -----------------------------
    measuring_tests: int = 0  # collected tests that can measure: the alpha's split
    rulesets: dict[str, Ruleset] = field(default_factory=dict)  # llm_slo(ruleset=), loaded
    data: SessionData = field(default_factory=SessionData)  # every test's payload (judging.py)
    session_verdicts: list[SloVerdict] = field(default_factory=list)  # the ruleset's (reports)
    multiple_comparisons: dict[str, Any] | None = None  # the session's comparisons, corrected

    # -- why the session stopped (stops.py, servers.py, interrupts.py) ----------------
    stop: dict[str, Any] | None = None  # before load: JSON session.stopped (gate_states.py)
    stop_said_here: bool = False  # pytest does not print it: the llmperf section does
    stop_at_collection: BaseException | None = None  # xdist controller's preflight stop
    stopped: str = ""  # pytest stopped the session early, not interrupted: its words
    worker_lost: list[dict[str, str]] = field(default_factory=list)  # xdist workers that died
    worker_servers: list[dict[str, Any]] = field(default_factory=list)  # the workers' servers

    # -- what the session wrote (reports.py) ------------------------------------------
    written: list[str] = field(default_factory=list)
    hook_failures: list[HookFailure] = field(default_factory=list)  # hooks that raised
    markdown_error: str = ""  # the Markdown summary was not written (a red line)
    # --llm-otel, --llm-mlflow (plugin/export.py): where each export went, or why it did
    # not (a line each in the terminal summary; an export never changes the exit status)
    export_lines: list[str] = field(default_factory=list)
    history: Any = None  # --llm-history's HistoryOutcome, at session end


STATE_KEY = pytest.StashKey[SessionState]()
"""Where the session's :class:`SessionState` is kept: ``config.stash[STATE_KEY]``."""
