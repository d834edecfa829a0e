"""The gate's states table (docs/gate-states.md, ``pytest_llmperf/gate_states.py``), walked.

One real pytest session (pytester, in-process) per state, each writing every report
(terminal, ``--llm-json``, ``--junitxml``, ``--llm-html``, ``--llm-markdown``,
``--llm-history``), against the embedded simulator (tiny workloads) or a small
misbehaving server on 127.0.0.1 (``hardening/odd_servers.py``). Each row asserts the
test's outcome, the session's exit status and what each report records; and every
row but a judged pass asserts the one rule of the table: nothing reads green when
nothing passed judgment (a non-zero exit status, a JUnit file with a failure or an
error, a Markdown first line that is not ✅).

Adding a state's row: a :class:`Row` in :data:`ROWS` (its test file, its options, the
server it needs, the baseline it compares with, what it expects).
"""

from __future__ import annotations

import json
import socket
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from odd_servers import OddServer, always, serve_in_thread  # tests/hardening (conftest.py)

from pytest_llmperf.gate_states import (
    GATE_STATES,
    JUNIT_CLASSNAME,
    GateState,
    exit_status_table,
    markdown_table,
)
from pytest_llmperf.history import HistoryStore
from pytest_llmperf.history.cli import main as history_cli

TINY = (
    '@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=5)\n'
    '@pytest.mark.llm_load("concurrency", concurrency=5)\n'
)


def gated(slo: str, name: str = "test_gate", body: str = "    await llm_loadgen.run()\n") -> str:
    return f"{TINY}@pytest.mark.llm_slo({slo!r})\nasync def {name}(llm_loadgen):\n{body}\n"


def module(*tests: str) -> str:
    return "import os\n\nimport pytest\n\n\n" + "\n\n".join(tests)


GATE = module(gated("ttft.p99 < 60s"))


@dataclass(frozen=True)
class Row:
    """One state's session: ``source`` the test module, ``args`` its options; ``server``
    yields the ``--llm-endpoint`` to use (None: the embedded simulator); ``outcomes``
    pytest's counts; ``junit`` the session's JUnit test case name (None: none added);
    ``markdown`` the Markdown's first line's start; ``says`` words the terminal, the
    JSON's stop and the JUnit error must carry."""

    state: GateState
    exit_status: int  # written out, not read from the table: the table is checked against it
    source: str
    outcomes: dict[str, int]
    markdown: str
    args: tuple[str, ...] = ()
    server: Callable[[], Any] | None = None
    junit: str | None = None
    says: tuple[str, ...] = ()
    outcome: str | None = None  # the JSON's tests[].outcome of the (first) measured test
    json_outcomes: dict[str, int] | None = None  # the JSON's session.outcomes
    xdist: bool = False
    history_runs: int = 1
    baseline: str | None = None  # a test module run first to save --llm-baseline-compare's file

    @property
    def id(self) -> str:
        how = (
            "_xdist"
            if self.xdist
            else "_no_request_completed"
            if self.server is cutting_every_stream
            else ""
        )
        return self.state.name.lower() + how


@contextmanager
def answering(status: int, message: str, models: bool = True) -> Iterator[str]:
    """An OpenAI-shaped server answering every request (``GET /v1/models`` too unless
    ``models``) with ``status`` and ``message``."""
    with serve_in_thread(OddServer(always(status, message), models=models)) as server:
        yield server.url


@contextmanager
def cutting_every_stream() -> Iterator[str]:
    """The simulator cutting every stream after its first token: the preflight's probe
    (which reads one event) passes, every request of a run fails."""
    from pytest_llmperf.sim import start_sim_process

    sim = start_sim_process("fixed", overrides={"cut_rate": 1.0})
    try:
        yield sim.url
    finally:
        sim.stop()


@contextmanager
def closed_port() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


STOPPED = "⛔ pytest-llmperf: the gate did not run: stopped at preflight"
PYTHON = sys.executable
SIM_CMD = f"--llm-server-cmd={PYTHON} -m pytest_llmperf.sim --port {{port}} --profile tiny"
EXITS_AT_ONCE = (
    f"--llm-server-cmd={PYTHON} -c \"import sys; print('loading weights'); sys.exit(3)\" {{port}}"
)
KILLS_THE_SERVER = (
    "def test_kill(llm_endpoint, llm_endpoints):\n"
    "    server = llm_endpoints.server_for(llm_endpoint)\n"
    "    os.kill(server.pid, 9)\n"
    "    server.wait(10)\n"
)

ROWS = [
    Row(
        GateState.JUDGED_PASS,
        0,
        module(gated("ttft.max < 60s")),
        {"passed": 1},
        "## ✅ pytest-llmperf: passed",
        outcome="passed",
    ),
    Row(
        GateState.JUDGED_FAIL,
        1,
        module(gated("ttft.max < 1us")),
        {"failed": 1},
        "## ❌ pytest-llmperf: 1 test failed",
        outcome="failed",
        says=("SLO violated: ttft.max < 1us",),
    ),
    Row(
        GateState.INCONCLUSIVE,  # 5 samples never bound a p99 from above
        1,
        GATE,
        {"failed": 1},
        "## ⚠️ pytest-llmperf: inconclusive (1 test undecided)",
        outcome="failed",
        says=("SLO inconclusive",),
    ),
    Row(
        GateState.NOTHING_MEASURED,  # declares an SLO, runs no gated load
        1,
        module(gated("ttft.max < 60s", body="    pass\n")),
        {"failed": 1},
        "## ❌ pytest-llmperf: 1 test failed",
        says=(
            "llm_slo declared but no gated run measured anything: "
            "llm_loadgen.run() was never called",
        ),
        json_outcomes={"failed": 1},
        history_runs=0,
    ),
    Row(
        GateState.NOTHING_MEASURED,  # its gated run completed no request
        1,
        GATE,
        {"failed": 1},
        "## ❌ pytest-llmperf: 1 test failed",
        args=("--llm-inconclusive=warn",),  # no policy turns nothing measured into a pass
        server=cutting_every_stream,
        says=(
            "llm_slo declared but no gated run measured anything: "
            "run0: 5 issued, 0 completed: every request failed",
        ),
        outcome="failed",
        json_outcomes={"failed": 1},
    ),
    Row(
        GateState.NOT_COMPARABLE,  # the baseline measured another workload
        1,
        module(gated("ttft.max < 60s").replace("input_tokens=8", "input_tokens=16")),
        {"failed": 1},
        "## ⚠️ pytest-llmperf: inconclusive",
        args=("--llm-baseline-compare=b.json",),
        baseline=module(gated("ttft.max < 60s")),
        says=("not comparable", "input_tokens", "8", "16"),
        outcome="failed",
        json_outcomes={"failed": 1},
    ),
    Row(
        GateState.STOPPED_SERVER_REFUSED,  # HTTP 500 to the plainest request, after retries
        1,
        GATE,
        {},
        f"## {STOPPED} (server refused, exit status 1)",
        args=("--llm-model=m",),
        server=lambda: answering(500, "The engine is restarting"),
        junit="session stopped before load",
        says=("field probe POST /v1/chat/completions", "HTTP 500", "The engine is restarting"),
        history_runs=0,
    ),
    Row(
        GateState.STOPPED_SERVER_REFUSED,  # under xdist: the controller stops, no worker starts
        1,
        GATE,
        {},
        f"## {STOPPED} (server refused, exit status 1)",
        args=("--llm-model=m",),
        server=lambda: answering(429, "Too many requests"),
        junit="session stopped before load",
        says=("field probe POST /v1/chat/completions", "HTTP 429", "Too many requests"),
        history_runs=0,
        xdist=True,
    ),
    Row(
        GateState.STOPPED_UNREACHABLE,
        4,
        GATE,
        {},
        f"## {STOPPED} (unreachable, exit status 4)",
        server=closed_port,
        junit="session stopped before load",
        says=("cannot reach", "connect_error"),
        history_runs=0,
    ),
    Row(
        GateState.STOPPED_USAGE,  # refused credentials
        4,
        GATE,
        {},
        f"## {STOPPED} (usage error, exit status 4)",
        server=lambda: answering(401, "invalid api key", models=False),
        junit="session stopped before load",
        says=("HTTP 401", "--llm-api-key-env"),
        history_runs=0,
    ),
    Row(
        GateState.STOPPED_SERVER_DID_NOT_START,  # --llm-server-cmd exits before it is ready
        1,
        GATE,
        {},
        f"## {STOPPED} (server did not start, exit status 1)",
        args=(EXITS_AT_ONCE,),
        junit="session stopped before load",
        says=("exited with code 3", "loading weights"),
        history_runs=0,
    ),
    Row(
        GateState.SERVER_EXITED,  # the session's server killed after the first test's run
        1,
        module(
            # error_rate: a tiny run's latency verdict can be "generator bound" on a busy
            # machine; this row is about the exit, not about a latency
            gated("error_rate < 1%", name="test_first"),
            KILLS_THE_SERVER,
            gated("error_rate < 1%", name="test_second"),
        ),
        {"passed": 2, "errors": 1},
        "## ⛔ pytest-llmperf: the gate stopped mid-session (server exited, exit status 1)",
        args=(SIM_CMD,),
        junit="session stopped: server exited",
        says=("server exited with signal 9", "cannot be restarted"),
        outcome="passed",
    ),
    Row(
        GateState.SERVER_EXITED,  # under xdist: the controller's server, a worker sees it gone
        1,
        module(
            # error_rate: a tiny run's latency verdict can be "generator bound" on a busy
            # machine; this row is about the exit, not about a latency
            gated("error_rate < 1%", name="test_first"),
            KILLS_THE_SERVER,
            gated("error_rate < 1%", name="test_second"),
        ),
        {},
        "## ⛔ pytest-llmperf: the gate stopped mid-session (server exited, exit status 1)",
        args=(SIM_CMD,),
        junit="session stopped: server exited",
        says=("server exited", "cannot be restarted"),
        outcome="passed",
        xdist=True,
    ),
    Row(
        GateState.INTERRUPTED,  # a judged pass, then Ctrl-C before the next test's run
        2,
        module(
            gated("ttft.max < 60s", name="test_first"),
            gated("ttft.max < 60s", name="test_second", body="    raise KeyboardInterrupt\n"),
        ),
        {"passed": 1},
        "## ⏹️ pytest-llmperf: interrupted",
        junit="session interrupted",
        outcome="passed",
        json_outcomes={"passed": 1, "interrupted": 1},
        says=("interrupted",),
    ),
    Row(
        GateState.WORKER_LOST,  # the xdist worker running the test dies
        1,
        module(gated("ttft.max < 60s", body="    os._exit(3)\n")),
        {"failed": 1},
        "## ❌ pytest-llmperf: failed (exit status 1)",
        xdist=True,
        says=("crashed while running",),
        history_runs=0,
    ),
]


def test_every_state_of_the_table_has_a_row() -> None:
    assert {row.state for row in ROWS} == set(GateState)


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_the_table_says_each_states_exit_status(row: Row) -> None:
    assert GATE_STATES[row.state].exit_status == row.state.exit_status == row.exit_status


def test_the_docs_page_is_the_code_table() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "gate-states.md"
    text = page.read_text(encoding="utf-8")
    assert markdown_table() in text, (
        "docs/gate-states.md's table differs from gate_states.markdown_table(): paste it"
    )
    assert exit_status_table() in text, "paste gate_states.exit_status_table() there"


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_each_state_ends_and_is_recorded_as_the_table_says(
    pytester: pytest.Pytester, row: Row
) -> None:
    if row.xdist:
        pytest.importorskip("xdist")
    if row.baseline is not None:  # a good build's session saves the baseline
        pytester.makepyfile(test_a_gate_state=row.baseline)
        saved = pytester.runpytest("-p", "no:cacheprovider", "--llm-baseline-save=b.json")
        assert saved.ret == 0, saved.stdout.str()
    pytester.makepyfile(test_a_gate_state=row.source)
    with row.server() if row.server else nullcontext(None) as url:
        args = [
            *("-p", "no:cacheprovider", "--llm-timeout=5", *row.args),
            *("--llm-json=r.json", "--junitxml=j.xml", "--llm-markdown=r.md"),
            *("--llm-html=r.html", "--llm-history=h.db"),
            *((f"--llm-endpoint={url}",) if url else ()),
            *(("-n", "1") if row.xdist else ()),
        ]
        result = pytester.runpytest(*args, no_reraise_ctrlc=True)
    out = result.stdout.str() + "\n" + result.stderr.str()
    # the test's outcome and the session's exit status
    assert result.ret == row.exit_status, out
    if not row.xdist:  # xdist's controller counts a lost test in its own way
        result.assert_outcomes(**row.outcomes)
    report = json.loads((pytester.path / "r.json").read_text())
    session = report["session"]
    assert session["exitstatus"] == row.exit_status
    if row.outcome is not None:
        assert report["tests"][0]["outcome"] == row.outcome
    if row.json_outcomes is not None:
        assert session["outcomes"] == row.json_outcomes
    # JSON: a stop before load, and nothing else, has session.stopped
    stopped = session.get("stopped")
    if row.state.name.startswith("STOPPED"):
        assert stopped is not None and report["tests"] == []
        assert stopped["phase"] == "preflight" and stopped["state"] == row.state.value
        assert stopped["exit_status"] == row.exit_status
        assert url is None or stopped["endpoint"] == f"{url}/v1"
        for words in row.says:
            assert words in stopped["reason"] + (stopped["server_says"] or ""), stopped
        if row.state in (GateState.STOPPED_UNREACHABLE, GateState.STOPPED_SERVER_DID_NOT_START):
            assert stopped["server_says"] is None  # nothing answered
        else:
            assert stopped["server_says"].startswith("HTTP ")  # the server's own words
    elif row.state is GateState.SERVER_EXITED:  # the runs before it kept, the stop recorded
        assert stopped is not None and stopped["phase"] == "mid-session"
        assert stopped["state"] == row.state.value and stopped["exit_status"] == 1
        for words in row.says:
            assert words in stopped["reason"], stopped
        [server] = session["servers"]
        assert server["exit"]["signal"] == 9
    else:
        assert stopped is None
    assert session["interrupted"] is (row.state is GateState.INTERRUPTED)
    if row.state is GateState.NOT_COMPARABLE:  # each differing field named, both values
        [check] = [c for c in report["tests"][0]["baseline"] if c["differs"]]
        assert check["comparable"] is False and check["verdict"] == "inconclusive"
        assert any("input_tokens" in d and "8" in d and "16" in d for d in check["differs"])
    if row.state is GateState.WORKER_LOST:
        [lost] = session["worker_lost"]
        assert lost["nodeid"] == "test_a_gate_state.py::test_gate" and lost["worker"] == "gw0"
    # the terminal says it once
    for words in row.says:
        assert words in out, out
    if row.state.name.startswith("STOPPED"):
        said = [line for line in out.splitlines() if "pytest-llmperf:" in line]
        assert len(said) == 1, out
        if row.exit_status == 4:
            assert said[0].startswith("ERROR: pytest-llmperf: --llm-endpoint: "), said
        else:
            assert said[0].startswith("pytest-llmperf: the gate did not run: "), said
        assert "Traceback" not in out
    # JUnit: the session's own test case with an <error> where nothing was judged
    suite = ET.parse(pytester.path / "j.xml").getroot().find("testsuite")
    assert suite is not None
    ours = [c for c in suite.iter("testcase") if c.get("classname") == JUNIT_CLASSNAME]
    if row.junit is None:
        assert ours == []
    else:
        [case] = ours
        assert case.get("name") == row.junit
        error = case.find("error")
        assert error is not None
        for words in row.says:
            assert words in (error.get("message") or "") + (error.text or ""), error.attrib
    red = int(suite.get("failures", "0")) + int(suite.get("errors", "0"))
    assert (red == 0) is (row.state is GateState.JUDGED_PASS), ET.tostring(suite)
    assert int(suite.get("tests", "0")) >= 1  # never an empty suite
    # Markdown (and so the step summary): the first line
    first = (pytester.path / "r.md").read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(row.markdown), first
    assert first.startswith("## ✅") is (row.state is GateState.JUDGED_PASS)
    # HTML: the banner of a session that did not run
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert ("the gate did not run" in html) is row.state.name.startswith("STOPPED")
    if stopped:
        assert row.markdown.removeprefix("## ⛔ pytest-llmperf: ") in html
    # history: a stopped session is a row marked stopped, with no runs
    with HistoryStore.open(str(pytester.path / "h.db"), create=False) as store:
        [info] = store.sessions()
        runs = store.runs()
    assert (info.stopped is not None) is (
        row.state.name.startswith("STOPPED") or row.state is GateState.SERVER_EXITED
    )
    assert info.stopped == stopped
    assert len(runs) == row.history_runs
    if row.xdist and stopped:
        assert "bringing up nodes" not in out  # the stop was known before any worker
    if runs and row.outcome is not None:
        assert runs[0].outcome == row.outcome


def test_the_history_cli_shows_a_stopped_session(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_a_gate_state=GATE)
    with answering(503, "Loading model") as url:
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--llm-endpoint={url}", "--llm-model=m",
            "--llm-history=h.db", "--llm-history-tag=broken",
        )  # fmt: skip
    assert result.ret == 1
    capsys.readouterr()  # the session's own output
    target = str(pytester.path / "h.db")
    assert history_cli([target, "list"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[1].split()[:1] == ["1"] and "broken" in listing[1]
    assert "the gate did not run: stopped at preflight (server refused" in listing[1]
    assert history_cli([target, "show", "1"]) == 0
    shown = capsys.readouterr().out
    assert "the gate did not run: stopped at preflight (server refused, exit status 1)" in shown
    assert "the server says: HTTP 503: Loading model" in shown


def test_an_interrupted_session_of_plain_tests_is_not_marked_by_the_plugin(
    pytester: pytest.Pytester,
) -> None:
    """The JUnit case of an interrupted session is the gate's: a session that had no test
    able to measure (the plugin is installed everywhere pytest is) gets none."""
    pytester.makepyfile("def test_plain():\n    raise KeyboardInterrupt\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--junitxml=j.xml", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    suite = ET.parse(pytester.path / "j.xml").getroot()
    assert not [c for c in suite.iter("testcase") if c.get("classname") == JUNIT_CLASSNAME]
