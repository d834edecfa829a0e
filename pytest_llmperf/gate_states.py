"""Every way a test or a session of the gate can end, and what each one records: the one
source of the table in docs/gate-states.md.

A gate is trusted only if it is never green without having judged. Each state here
says the test's outcome, the session's exit status and what each report records;
the reports read the words and statuses from here (the stop line, the JUnit test case
of a session that judged nothing, the exit status of a stop before load), and
``tests/plugin/test_gate_states.py`` walks the table with a real session per state.

Exit statuses are pytest's: 0 every test passed; 1 a test or the gate failed; 2
interrupted; 3 an internal error (a report or an extension hook that could not be
written); 4 a usage error; 5 no test collected. Imports nothing of the package but
:mod:`~pytest_llmperf.errors`, so every layer may read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pytest_llmperf.errors import StopCause

__all__ = [
    "EXIT_STATUSES",
    "GATE_STATES",
    "JUNIT_CLASSNAME",
    "GateState",
    "StateRow",
    "StopPhase",
    "did_not_run_line",
    "exit_status_table",
    "junit_case",
    "markdown_table",
    "stop_state",
    "stop_words",
]

EXIT_STATUSES = {
    0: "every test passed (or was skipped) and the session's targets were met",
    1: "a test failed, or the gate failed: a judged failure, an inconclusive verdict under "
    "`--llm-inconclusive=fail` (the default), nothing measured, a server that answers but "
    "lets no request pass (5xx or 429 after retries, a stall, empty replies, even the "
    "plainest request refused), a lost xdist worker",
    2: "interrupted (Ctrl-C, SIGTERM), or pytest's own collection errors",
    3: "an internal error: a report, the history or an extension hook could not be written",
    4: "a usage error: a bad option, marker or file; an address where nothing answers "
    "(refused, DNS, TLS, not HTTP); refused credentials (401/403); an unknown model or API "
    "(404); a request field of yours (`--llm-request-extra`, `extra_body=`) the server "
    "refuses; `--llm-baseline-strict` against another server's baseline",
    5: "no test was collected",
}


class GateState(Enum):
    """How one test, or the whole session, ended (docs/gate-states.md)."""

    JUDGED_PASS = "judged pass"
    JUDGED_FAIL = "judged fail"
    INCONCLUSIVE = "inconclusive"
    NOT_COMPARABLE = "not comparable"
    NOTHING_MEASURED = "nothing measured"
    STOPPED_SERVER_REFUSED = "stopped before load: server refused"
    STOPPED_UNREACHABLE = "stopped before load: unreachable"
    STOPPED_USAGE = "stopped before load: usage error"
    STOPPED_SERVER_DID_NOT_START = "stopped before load: server did not start"
    SERVER_EXITED = "server exited"
    INTERRUPTED = "interrupted"
    WORKER_LOST = "worker lost"

    @property
    def exit_status(self) -> int:
        """The session's exit status in this state (under the default options)."""
        return GATE_STATES[self].exit_status


class StopPhase(Enum):
    """Where a session stopped before load (JSON ``session.stopped.phase``)."""

    PREFLIGHT = "preflight"  # the endpoint checked once, before any test (a URL)
    ENDPOINT_START = "endpoint start"  # the endpoint started on first use (the simulator)
    REFERENCE = "reference endpoint"  # --llm-reference-endpoint's, started on first use
    COMPARABILITY = "comparability"  # --llm-baseline-strict: another server's baseline
    SERVER_EXITED = "mid-session"  # the session's started server exited, not restartable


@dataclass(frozen=True)
class StateRow:
    """One row of the table: the test's outcome, the session's exit status (default
    options) and what each report records."""

    outcome: str
    exit_status: int
    exit_words: str
    terminal: str
    json: str
    junit: str
    html: str
    markdown: str
    history: str


_STOP_JSON = (
    '`session.stopped` = {"phase", "reason", "server_says", "endpoint", "state", '
    '"exit_status"}; `tests` empty'
)
_STOP_JUNIT = "one test case `pytest-llmperf` / `session stopped before load` with an `<error>`"
_STOP_MD = (
    "first line `## ⛔ pytest-llmperf: the gate did not run: …`, then the reason "
    "(the step summary too)"
)
_STOP_HTML = "a red banner `the gate did not run: …` under the title"
_STOP_HISTORY = "a session row marked stopped (`sessions.stopped`), no runs; `list`, `show`"

GATE_STATES: dict[GateState, StateRow] = {
    GateState.JUDGED_PASS: StateRow(
        outcome="passed",
        exit_status=0,
        exit_words="0",
        terminal="`PASSED`; the llmperf section's verdict lines",
        json="`tests[].outcome` `passed`, every `slos[].verdict` `pass`",
        junit="a passing test case with its verdicts as properties",
        html="the test's table, verdicts green",
        markdown="`✅ pytest-llmperf: passed`",
        history="its runs, outcome `passed`",
    ),
    GateState.JUDGED_FAIL: StateRow(
        outcome="failed",
        exit_status=1,
        exit_words="1",
        terminal="`FAILED` with the verdict table (observed vs target)",
        json="`tests[].outcome` `failed`, the failing `slos[].verdict` `fail`",
        junit="a `<failure>` holding the verdict table",
        html="the test's table, the failing verdicts red",
        markdown="`❌ pytest-llmperf: N tests failed` and the failing test's table",
        history="its runs, outcome `failed`",
    ),
    GateState.INCONCLUSIVE: StateRow(
        outcome="failed (`--llm-inconclusive=fail`, the default); passed with a warning "
        "(`warn`); skipped (`skip`)",
        exit_status=1,
        exit_words="1 by default; 0 with `warn` or `skip`",
        terminal="`FAILED` (or a warning, or `SKIPPED`) saying why it could not be decided",
        json="`slos[].verdict` `inconclusive` with its reason; the outcome as pytest's",
        junit="a `<failure>` (or `<skipped>`) with the reason",
        html="the verdict marked inconclusive",
        markdown="`⚠️ pytest-llmperf: inconclusive (N tests undecided)` and the test's table",
        history="its runs, with the test's outcome",
    ),
    GateState.NOT_COMPARABLE: StateRow(
        outcome="as inconclusive: follows `--llm-inconclusive`, fails by default",
        exit_status=1,
        exit_words="1 by default; 0 with `warn` or `skip`",
        terminal="the comparison line naming every differing field with both values",
        json="`baseline[].comparable` false and what `differs`",
        junit="a `<failure>` naming the differing fields",
        html="the comparison marked not comparable",
        markdown="the test's table with the comparison not comparable",
        history="its runs, with the test's outcome",
    ),
    GateState.NOTHING_MEASURED: StateRow(
        outcome="failed: a test with `llm_slo` whose body ran no gated load, or whose runs "
        "completed no request (whatever `--llm-inconclusive` says)",
        exit_status=1,
        exit_words="1",
        terminal="the test's line, then `llm_slo declared but no gated run measured "
        "anything:` and why",
        json="`tests[].nothing_measured` says why; counted in `session.outcomes` as `failed`",
        junit="a `<failure>` saying nothing was measured, an `llm_nothing_measured` property",
        html="the test failed, saying nothing was measured",
        markdown="`❌ pytest-llmperf: N tests failed`, the reason under the test",
        history="its runs, if any, outcome `failed`",
    ),
    GateState.STOPPED_SERVER_REFUSED: StateRow(
        outcome="none ran: the session stopped before load (a server answered, but "
        "5xx/429 after retries, a stall, empty replies, or even the plainest request refused)",
        exit_status=1,
        exit_words="1",
        terminal="one red line `pytest-llmperf: the gate did not run: …` quoting the server",
        json=_STOP_JSON,
        junit=_STOP_JUNIT,
        html=_STOP_HTML,
        markdown=_STOP_MD,
        history=_STOP_HISTORY,
    ),
    GateState.STOPPED_UNREACHABLE: StateRow(
        outcome="none ran: nothing answered at the address (refused, DNS, TLS, not HTTP)",
        exit_status=4,
        exit_words="4",
        terminal="one line `ERROR: pytest-llmperf: --llm-endpoint: cannot reach …` with a hint",
        json=_STOP_JSON + " (`server_says` null)",
        junit=_STOP_JUNIT,
        html=_STOP_HTML,
        markdown=_STOP_MD,
        history=_STOP_HISTORY,
    ),
    GateState.STOPPED_USAGE: StateRow(
        outcome="none ran: a mistake of the user's (401/403, unknown model or API, a "
        "refused field of `--llm-request-extra`/`extra_body`, a strict baseline of another "
        "server)",
        exit_status=4,
        exit_words="4",
        terminal="one line `ERROR: pytest-llmperf: …` naming the option and the value",
        json=_STOP_JSON,
        junit=_STOP_JUNIT,
        html=_STOP_HTML,
        markdown=_STOP_MD,
        history=_STOP_HISTORY,
    ),
    GateState.STOPPED_SERVER_DID_NOT_START: StateRow(
        outcome="none ran: the server the gate started (`--llm-server-cmd`, "
        "`--llm-reference-cmd`, an `llm_server` marker's, the embedded simulator) exited "
        "before it was ready, or was not ready within `--llm-server-ready-timeout`; a "
        "command that is not a program is a usage error (exit status 4)",
        exit_status=1,
        exit_words="1",
        terminal="one red line `pytest-llmperf: the gate did not run: …` with the exit code "
        "or signal (or the deadline) and the server log's last lines",
        json=_STOP_JSON + " (`reason` holds the exit and the log's tail; `session.servers` "
        "the server with its `exit`)",
        junit=_STOP_JUNIT,
        html=_STOP_HTML,
        markdown=_STOP_MD,
        history=_STOP_HISTORY,
    ),
    GateState.SERVER_EXITED: StateRow(
        outcome="the test whose run it was failed (`server exited with code C / signal S "
        "at T s into RUN` and the log's last lines); the next test that needs the "
        "endpoint errors and the session stops: the session's server (`restart` "
        "`session`) cannot be restarted (an `llm_server(restart='test'|'module')` server "
        "is started afresh instead, and the session goes on)",
        exit_status=1,
        exit_words="1",
        terminal="the failed test, then one red line `pytest-llmperf: the gate stopped "
        "mid-session (server exited, …)` with the exit record",
        json="`session.stopped` (phase `mid-session`, the exit in `reason`); the run's "
        "`server_process.exit`; `session.servers[].exit`",
        junit="the failed test's `<failure>` with the log's tail in `system-err`, and one "
        "test case `pytest-llmperf` / `session stopped: server exited` with an `<error>`",
        html="a red banner `the gate stopped mid-session: …` under the title",
        markdown="first line `## ⛔ pytest-llmperf: the gate stopped mid-session …`, then "
        "the reason",
        history="the runs measured before it; the session row marked stopped",
    ),
    GateState.INTERRUPTED: StateRow(
        outcome="the running test `interrupted`; the tests before it as judged",
        exit_status=2,
        exit_words="2",
        terminal="`session was interrupted: figures cover what was measured until then` "
        "(or `… before any run was measured`)",
        json="`session.interrupted` true; the test's `outcome` `interrupted`, partial runs "
        "marked `interrupted`",
        junit="one test case `pytest-llmperf` / `session interrupted` with an `<error>`",
        html="exit status 2 (interrupted: figures cover what was measured until then)",
        markdown="`⏹️ pytest-llmperf: interrupted`",
        history="the partial runs, outcome `interrupted`",
    ),
    GateState.WORKER_LOST: StateRow(
        outcome="failed: the xdist worker running it crashed",
        exit_status=1,
        exit_words="1",
        terminal="xdist's `worker 'gw0' crashed while running …`",
        json='`session.worker_lost` = [{"nodeid", "worker"}]',
        junit="the test's `<error>`: `worker 'gw0' crashed while running …`",
        html="exit status 1; the lost test in the worker-lost row",
        markdown="`❌ pytest-llmperf: …` and a line `worker lost: …` per test",
        history="nothing of the lost test (its runs never reached the controller)",
    ),
}

_STOPS = {
    StopCause.SERVER_REFUSED: GateState.STOPPED_SERVER_REFUSED,
    StopCause.UNREACHABLE: GateState.STOPPED_UNREACHABLE,
    StopCause.USAGE: GateState.STOPPED_USAGE,
    StopCause.SERVER_DID_NOT_START: GateState.STOPPED_SERVER_DID_NOT_START,
    StopCause.SERVER_EXITED: GateState.SERVER_EXITED,
}

JUNIT_CLASSNAME = "pytest-llmperf"


def stop_state(cause: StopCause) -> GateState:
    """The state of a session stopped before load by an error of ``cause``."""
    return _STOPS[cause]


def did_not_run_line(stopped: Mapping[str, Any]) -> str:
    """``the gate did not run: stopped at preflight (server refused, exit status 1)``: the
    first line of every report of a stopped session (``stopped``: JSON ``session.stopped``);
    :func:`stop_words` adds the reason. A session whose server exited mid-session:
    ``the gate stopped mid-session (server exited, exit status 1)``."""
    state = str(stopped.get("state") or "").removeprefix("stopped before load: ") or "stopped"
    phase = stopped.get("phase") or StopPhase.PREFLIGHT.value
    status = stopped.get("exit_status")
    said = f", exit status {status}" if status is not None else ""
    if phase == StopPhase.SERVER_EXITED.value:
        return f"the gate stopped {phase} ({state}{said})"
    return f"the gate did not run: stopped at {phase} ({state}{said})"


def stop_words(stopped: Mapping[str, Any]) -> str:
    """The headline and the reason in one line, as the terminal and JUnit say it."""
    return f"{did_not_run_line(stopped)}: {stopped.get('reason') or '?'}"


def junit_case(session: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The test case a session that judged nothing adds to JUnit, so a dashboard that reads
    JUnit never shows it green: ``(name, message, detail)``, or None when none is due
    (``session``: the JSON report's ``session``)."""
    stopped = session.get("stopped")
    if stopped:
        said = stopped.get("server_says")
        detail = "\n".join(
            [
                did_not_run_line(stopped),
                f"reason: {stopped.get('reason') or '?'}",
                f"endpoint: {stopped.get('endpoint') or '-'}",
                f"the server says: {said}" if said else "the server said nothing",
            ]
        )
        name = (
            "session stopped: server exited"
            if stopped.get("phase") == StopPhase.SERVER_EXITED.value
            else "session stopped before load"
        )
        return name, stop_words(stopped), detail
    if session.get("interrupted"):
        message = (
            "the session was interrupted (Ctrl-C or SIGTERM): the test running then was not "
            "judged, and the tests after it did not run"
        )
        return "session interrupted", message, message
    return None


def exit_status_table() -> str:
    """The exit statuses' table of docs/gate-states.md, from :data:`EXIT_STATUSES`."""
    rows = [f"| {status} | {words} |" for status, words in EXIT_STATUSES.items()]
    return "\n".join(["| status | meaning |", "| --- | --- |", *rows])


def markdown_table() -> str:
    """The table of docs/gate-states.md, from :data:`GATE_STATES` (a test keeps the page
    and this in step)."""
    head = (
        "| state | test outcome | exit status | terminal | JSON | JUnit | HTML "
        "| Markdown / step summary | history |"
    )
    lines = [head, "|" + " --- |" * 9]
    for state, row in GATE_STATES.items():
        cells = [
            f"**{state.value}**",
            row.outcome,
            row.exit_words,
            row.terminal,
            row.json,
            row.junit,
            row.html,
            row.markdown,
            row.history,
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
