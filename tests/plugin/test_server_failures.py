"""A managed server's failures as test outcomes, through a whole pytest session (pytester),
with real simulator processes started through ManagedServer:

- a server SIGKILLed mid-run (from a thread of the test) fails its test within 2 s of
  the kill, whatever its SLOs, with "server exited with signal 9 (SIGKILL) at T s into
  run0" and the log's last lines; the JSON test entry has ``server_log`` and the run's
  ``server_process.exit``; JUnit has the tail in the test case's ``system-err``;
- a test whose runs had failed requests against a managed server has the log's tail
  in its failure text, its JSON entry and its ``system-err``;
- a healthy test has none of it.

The servers are started here and handed to the session's endpoint pool as its
``server_for`` (what the plugin does for the servers it starts itself).
"""

from __future__ import annotations

import json
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_llmperf.managed_server import ManagedServer, ServerCommand
from pytest_llmperf.plugin.endpoints import EndpointPool

SESSION = """
import os
import signal
import threading
import time

import pytest

FAULTY = os.environ["WATCH_FAULTY_URL"]


@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=20)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 10s")
async def test_a_healthy(llm_loadgen):
    await llm_loadgen.run()


@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=100, requests=2000)
@pytest.mark.llm_load("poisson", rate=40, seed=3)
async def test_b_killed(llm_loadgen):
    # no SLO: the server's death fails the test by itself
    pid = int(os.environ["WATCH_SERVER_PID"])

    def kill():
        Path("killed_at").write_text(repr(time.monotonic()))
        os.kill(pid, signal.SIGKILL)

    threading.Timer(1.0, kill).start()
    result = await llm_loadgen.run()
    assert result.stop_reason == "server_exited"


@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=10)
async def test_b_then_a_body_that_raises(llm_loadgen):
    # the same server, dead: nothing is sent, and the death, not the assert, is the failure
    result = await llm_loadgen.run()
    assert result.counts["completed"] > 0, "nothing completed"


@pytest.mark.llm_endpoint(FAULTY)
@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=40)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_c_failed_requests(llm_loadgen):
    await llm_loadgen.run()
"""

CONFTEST = """
import time


def pytest_runtest_makereport(item, call):
    if call.when == "call":  # the test's body and its judging are over
        Path(f"ended_{item.name}").write_text(repr(time.monotonic()))
"""


@pytest.fixture
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    started: list[ManagedServer] = []
    log_dir = tmp_path_factory.mktemp("servers")

    def start(name: str, *overrides: str) -> ManagedServer:
        argv = [sys.executable, "-m", "pytest_llmperf.sim", "--port", "{port}"]
        for item in overrides:
            argv += ["--set", item]
        command = ServerCommand.parse(argv, name=name, ready_timeout_s=60, stop_grace_s=2)
        server = ManagedServer.start(command, log_dir=log_dir, model="sim-fixed")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def test_a_dead_server_and_failed_requests_fail_their_tests_with_the_servers_words(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, servers: Any
) -> None:
    server = servers("sim", "itl_ms=20")
    faulty = servers("faulty", "error_rate=0.5")
    by_url = {s.url: s for s in (server, faulty)}

    def server_for(self: EndpointPool, endpoint: Any) -> ManagedServer | None:
        return by_url.get(str(endpoint.base_url).removesuffix("/").removesuffix("/v1"))

    monkeypatch.setattr(EndpointPool, "server_for", server_for, raising=False)
    monkeypatch.setenv("WATCH_SERVER_PID", str(server.pid))
    monkeypatch.setenv("WATCH_FAULTY_URL", faulty.url)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_watched=SESSION)
    # the session's endpoint in the ini (not --llm-endpoint, which would pin every test
    # to it): test_c's marker measures the faulty server
    pytester.makeini(f"[pytest]\nllm_endpoint = {server.url}\n")
    result = pytester.runpytest("--llm-json=r.json", "--junitxml=j.xml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=3)
    path = pytester.path

    # the killed server: its test ended within 2 s of the kill, with the exit and the log
    killed_at = float((path / "killed_at").read_text())
    assert float((path / "ended_test_b_killed").read_text()) - killed_at < 2.0
    result.stdout.fnmatch_lines(
        [
            "*_ test_b_killed _*",
            "server exited with signal 9 (SIGKILL) at *.* s into run0",
            f"the server's log ({server.log_path}), last lines:",
            "LISTENING http://127.0.0.1:*",
        ]
    )
    entries = json.loads((path / "r.json").read_text())["tests"]
    tests = {t["nodeid"].split("::")[-1]: t for t in entries}
    killed = tests["test_b_killed"]
    assert killed["outcome"] == "failed"
    (run,) = killed["runs"]
    assert run["stop_reason"] == "server_exited"
    exit = run["server_process"]["exit"]
    assert (exit["signal"], exit["signal_name"]) == (9, "SIGKILL")
    assert run["counts"]["failed"] <= run["counts"]["issued"]
    assert killed["server_log"]["path"] == str(server.log_path)
    assert "LISTENING http://127.0.0.1:" in killed["server_log"]["tail"]
    assert killed["server_log"]["tail"] == exit["log_tail"]

    result.stdout.fnmatch_lines(
        [
            "*_ test_b_then_a_body_that_raises _*",
            "server exited with signal 9 (SIGKILL) before run0 began",
            f"the server's log ({server.log_path}), last lines:",
            "LISTENING http://127.0.0.1:*",
            "",
            "(the test body then raised AssertionError: nothing completed)",
        ]
    )
    assert tests["test_b_then_a_body_that_raises"]["runs"][0]["counts"]["issued"] == 0

    # failed requests against a managed server: the log's tail in the failure and reports
    result.stdout.fnmatch_lines(
        [
            "*_ test_c_failed_requests _*",
            "SLO violated: error_rate < 1%*",
            f"the server's log ({faulty.log_path}), last lines:",
            "LISTENING http://127.0.0.1:*",
        ]
    )
    failing = tests["test_c_failed_requests"]
    assert failing["server_log"]["path"] == str(faulty.log_path)
    assert "LISTENING" in failing["server_log"]["tail"]
    assert failing["runs"][0]["server_process"]["exit"] is None

    # a healthy test: its run has the server's block, and no log in its entry
    healthy = tests["test_a_healthy"]
    assert healthy["outcome"] == "passed" and "server_log" not in healthy
    assert healthy["runs"][0]["server_process"]["resources"]["samples"] >= 1

    cases = {c.get("name"): c for c in ET.parse(path / "j.xml").getroot().iter("testcase")}
    for name, where in (("test_b_killed", server), ("test_c_failed_requests", faulty)):
        errs = [e.text or "" for e in cases[name].iter("system-err")]
        assert any(f"server log {where.log_path}, last lines:" in e for e in errs), errs
        assert any("LISTENING http://127.0.0.1:" in e for e in errs), errs
    assert cases["test_a_healthy"].find("system-err") is None
    # the session went on after the kill: the next test ran against its own server
    assert time.monotonic() > killed_at
