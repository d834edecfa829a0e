"""A managed server's failures as test outcomes, through a whole pytest session (pytester):
simulator processes started by the plugin (``--llm-server-cmd`` for the session, the
``llm_server`` marker with ``restart="test"`` for a test's own):

- a server SIGKILLed mid-run (from a thread of the test) fails its test within 2 s of
  the kill, whatever its SLOs, with "server exited with signal 9 (SIGKILL) at T s into
  run0" and the log's last lines; the JSON test entry has ``server_log`` and the run's
  ``server_process.exit``; JUnit has the tail in the test case's ``system-err``;
- a server dead before the run: the death, not what the body made of it, is the failure;
- a test whose runs had failed requests against a managed server has the log's tail
  in its failure text, its JSON entry and its ``system-err``;
- a healthy test has none of it.
"""

from __future__ import annotations

import json
import shlex
import sys
import xml.etree.ElementTree as ET

import pytest

SIM = shlex.join([sys.executable, "-m", "pytest_llmperf.sim"]) + " --port {port}"

SESSION = """
import os
import signal
import threading
import time
from pathlib import Path

import pytest

SIM = os.environ["WATCH_SIM"]


def own_server(*settings):
    cmd = " ".join([SIM, *(f"--set {s}" for s in settings)])
    return pytest.mark.llm_server(cmd=cmd, restart="test")


@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=20)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 10s")
async def test_a_healthy(llm_loadgen):
    await llm_loadgen.run()


@own_server("itl_ms=20")
@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=100, requests=2000)
@pytest.mark.llm_load("poisson", rate=40, seed=3)
async def test_b_killed(llm_loadgen):
    # no SLO: the server's death fails the test by itself
    pid = llm_loadgen.server.pid

    def kill():
        Path("killed_at").write_text(repr(time.monotonic()))
        os.kill(pid, signal.SIGKILL)

    threading.Timer(1.0, kill).start()
    result = await llm_loadgen.run()
    assert result.stop_reason == "server_exited"


@own_server()
@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=10)
async def test_b_then_a_body_that_raises(llm_loadgen):
    # its server dead before the run: nothing is sent, and the death is the failure
    os.kill(llm_loadgen.server.pid, signal.SIGKILL)
    assert llm_loadgen.server.wait(10) is not None
    result = await llm_loadgen.run()
    assert result.counts["completed"] > 0, "nothing completed"


# a server that writes its token to its log: every report shows the tail redacted
@pytest.mark.llm_server(
    cmd=["sh", "-c", f'echo "loading with $HF_TOKEN"; exec {SIM} --set error_rate=0.5'],
    env={"HF_TOKEN": "hf_watchsecret123"},
    restart="test",
)
@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=40)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_c_failed_requests(llm_loadgen):
    await llm_loadgen.run()
"""

CONFTEST = """
import time
from pathlib import Path


def pytest_runtest_makereport(item, call):
    if call.when == "call":  # the test's body and its judging are over
        Path(f"ended_{item.name}").write_text(repr(time.monotonic()))
"""


def test_a_dead_server_and_failed_requests_fail_their_tests_with_the_servers_words(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCH_SIM", SIM)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_watched=SESSION)
    result = pytester.runpytest(
        f"--llm-server-cmd={SIM}",
        "--llm-json=r.json",
        "--junitxml=j.xml",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1, failed=3)
    path = pytester.path
    entries = json.loads((path / "r.json").read_text())["tests"]
    tests = {t["nodeid"].split("::")[-1]: t for t in entries}

    # the killed server: its test ended within 2 s of the kill, with the exit and the log
    killed = tests["test_b_killed"]
    log = killed["runs"][0]["server_process"]["log"]
    killed_at = float((path / "killed_at").read_text())
    assert float((path / "ended_test_b_killed").read_text()) - killed_at < 2.0
    result.stdout.fnmatch_lines(
        [
            "*_ test_b_killed _*",
            "server exited with signal 9 (SIGKILL) at *.* s into run0",
            f"the server's log ({log}), last lines:",
            "LISTENING http://127.0.0.1:*",
        ]
    )
    assert killed["outcome"] == "failed"
    (run,) = killed["runs"]
    assert run["stop_reason"] == "server_exited"
    exit = run["server_process"]["exit"]
    assert (exit["signal"], exit["signal_name"]) == (9, "SIGKILL")
    assert killed["server_log"]["path"] == log
    assert "LISTENING http://127.0.0.1:" in killed["server_log"]["tail"]
    assert killed["server_log"]["tail"] == exit["log_tail"]

    raised = tests["test_b_then_a_body_that_raises"]
    result.stdout.fnmatch_lines(
        [
            "*_ test_b_then_a_body_that_raises _*",
            "server exited with signal 9 (SIGKILL) before run0 began",
            f"the server's log ({raised['server_log']['path']}), last lines:",
            "LISTENING http://127.0.0.1:*",
            "",
            "(the test body then raised AssertionError: nothing completed)",
        ]
    )
    assert raised["runs"][0]["counts"]["issued"] == 0

    # failed requests against a managed server: the log's tail in the failure and reports
    failing = tests["test_c_failed_requests"]
    faulty_log = failing["runs"][0]["server_process"]["log"]
    result.stdout.fnmatch_lines(
        [
            "*_ test_c_failed_requests _*",
            "SLO violated: error_rate < 1%*",
            f"the server's log ({faulty_log}), last lines:",
            "LISTENING http://127.0.0.1:*",
        ]
    )
    assert failing["server_log"]["path"] == faulty_log
    assert "LISTENING" in failing["server_log"]["tail"]
    assert "loading with ***" in failing["server_log"]["tail"]  # redacted
    assert failing["runs"][0]["server_process"]["exit"] is None

    # a healthy test: its run has the server's block, and no log in its entry
    healthy = tests["test_a_healthy"]
    assert healthy["outcome"] == "passed" and "server_log" not in healthy
    assert healthy["runs"][0]["server_process"]["resources"]["samples"] >= 1

    cases = {c.get("name"): c for c in ET.parse(path / "j.xml").getroot().iter("testcase")}
    for name in ("test_b_killed", "test_b_then_a_body_that_raises", "test_c_failed_requests"):
        errs = [e.text or "" for e in cases[name].iter("system-err")]
        where = tests[name]["server_log"]["path"]
        assert any(f"server log {where}, last lines:" in e for e in errs), errs
        assert any("LISTENING http://127.0.0.1:" in e for e in errs), errs
    assert cases["test_a_healthy"].find("system-err") is None
    # the token the server wrote to its log is in none of them
    for report in ("r.json", "j.xml"):
        assert "hf_watchsecret123" not in (path / report).read_text()
    assert "hf_watchsecret123" not in result.stdout.str()


XDIST_SESSION = """
import os
import signal
import threading

import pytest


@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=100, requests=2000)
@pytest.mark.llm_load("poisson", rate=40, seed=3)
async def test_killed(llm_loadgen):
    # the controller's server, seen from this worker
    threading.Timer(1.0, os.kill, (llm_loadgen.server.pid, signal.SIGKILL)).start()
    await llm_loadgen.run()
"""


def test_under_xdist_a_worker_sees_the_controllers_server_die(pytester: pytest.Pytester) -> None:
    """The session's server (started by the controller) killed mid-run: the worker's run
    stops, its test fails with the exit and the log's tail, and the controller's JSON
    and JUnit carry the tail."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_shared=XDIST_SESSION)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-n", "1", f"--llm-server-cmd={SIM}",
        "--llm-json=r.json", "--junitxml=j.xml",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    # the worker is not its parent: the signal is read from the zombie's /proc entry
    result.stdout.fnmatch_lines(["server exited with signal 9 (SIGKILL) at *.* s into run0"])
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    (run,) = test["runs"]
    assert run["stop_reason"] == "server_exited"
    assert run["server_process"]["exit"]["signal_name"] == "SIGKILL"
    assert "LISTENING http://127.0.0.1:" in test["server_log"]["tail"]
    (case,) = ET.parse(pytester.path / "j.xml").getroot().iter("testcase")
    errs = [e.text or "" for e in case.iter("system-err")]
    assert any("LISTENING http://127.0.0.1:" in e for e in errs), errs
