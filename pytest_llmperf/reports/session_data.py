"""What a session measured, gathered from test reports.

Each test's runs travel on its call-phase ``TestReport`` (as plain JSON:
summaries plus lossless histogram states), so the same collector works in a
plain run and in a pytest-xdist controller, where reports arrive from the
workers. The session merges every run's histograms per endpoint exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.slo.session import SessionGroup, group_runs

__all__ = ["SessionData", "TestEntry"]


@dataclass
class TestEntry:
    """One test's contribution: outcome, runs (report dicts) and SLO verdicts;
    ``nothing_measured``: why its SLOs judged nothing, where that failed it."""

    __test__ = False  # not a pytest test class

    nodeid: str
    outcome: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    slos: list[dict[str, Any]] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)
    analyses: list[dict[str, Any]] = field(default_factory=list)
    endpoint: dict[str, Any] = field(default_factory=dict)
    baseline: list[dict[str, Any]] = field(default_factory=list)
    nothing_measured: str | None = None
    # a managed server that exited or failed requests: {"path", "tail"} of its log
    server_log: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "outcome": self.outcome,
            "endpoint": self.endpoint,
            "runs": self.runs,
            "slos": self.slos,
            "analyses": self.analyses,
            "baseline": self.baseline,
            "nothing_measured": self.nothing_measured,
            **({"server_log": self.server_log} if self.server_log else {}),
        }


class SessionData:
    """All tests' entries, plus the merged session-wide metrics."""

    def __init__(self) -> None:
        self.tests: dict[str, TestEntry] = {}
        self.interrupted = False
        # every server process the session started (ManagedServer.describe() dicts: name,
        # cmd, log, ready_s, first_token_s, exit, stopped_by): the JSON's session.servers
        self.servers: list[dict[str, Any]] = []

    def add_server(self, described: Mapping[str, Any]) -> None:
        """Record a server the session started (``ManagedServer.describe()``); a later
        description of the same server (same ``pid`` and ``log``: at its stop, with its
        exit) replaces the earlier one, in place."""
        entry = dict(described)
        same = (entry.get("pid"), entry.get("log"))
        for i, known in enumerate(self.servers):
            if (known.get("pid"), known.get("log")) == same and same != (None, None):
                self.servers[i] = entry
                return
        self.servers.append(entry)

    def add(self, nodeid: str, outcome: str, payload: Mapping[str, Any] | None) -> None:
        """Record a test's outcome; ``payload`` is what the plugin put on its report."""
        entry = self.tests.get(nodeid)
        if entry is None:
            entry = self.tests[nodeid] = TestEntry(nodeid, outcome)
        if outcome != "passed" or entry.outcome == "passed":
            entry.outcome = outcome if entry.outcome in ("passed", outcome) else entry.outcome
        if payload:
            entry.runs.extend(payload.get("runs", []))
            entry.slos.extend(payload.get("slos", []))
            entry.states.extend(payload.get("states", []))
            entry.analyses.extend(payload.get("analyses", []))
            entry.baseline.extend(payload.get("baseline", []))
            entry.endpoint = dict(payload.get("endpoint", entry.endpoint))
            entry.nothing_measured = payload.get("nothing_measured") or entry.nothing_measured
            entry.server_log = payload.get("server_log") or entry.server_log

    def groups(self) -> dict[str, SessionGroup]:
        """Gated runs merged per endpoint and model (see :mod:`pytest_llmperf.slo.session`)."""
        return group_runs((t.nodeid, t.endpoint, t.runs, t.states) for t in self.tests.values())

    def merged(self) -> dict[str, MetricsAccumulator]:
        """Each group's merged accumulator (window = the runs' summed measured time)."""
        return {key: group.accumulator for key, group in self.groups().items()}

    def measured_tests(self) -> list[TestEntry]:
        return [t for t in self.tests.values() if t.runs or t.slos or t.nothing_measured]
