"""``--llm-server-cmd``: the session's server started by the gate, measured, stopped.

Real subprocess servers (the simulator's ``python -m pytest_llmperf.sim``, or a
Python one-liner that exits, or never answers), in pytester sessions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.options import OPTIONS, LlmPerfOptions

PYTHON = sys.executable
SIM = f"{PYTHON} -m pytest_llmperf.sim --port {{port}} --profile tiny"
TINY = (
    "import pytest\n\n\n"
    '@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=4)\n'
    '@pytest.mark.llm_load("concurrency", concurrency=4)\n'
    '@pytest.mark.llm_slo("error_rate < 1%")\n'  # never generator bound: a busy machine
    "async def test_gate(llm_loadgen):\n"
    "    await llm_loadgen.run()\n"
)


def _options(**given: Any) -> LlmPerfOptions:
    flags = {o.flag: o for o in OPTIONS}
    raw = {flags[k].dest: v for k, v in given.items()}
    return LlmPerfOptions.resolve(lambda o: raw.get(o.dest))


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"--llm-server-cmd": "vllm serve 'm --port {port}"}, "--llm-server-cmd: bad server"),
        ({"--llm-server-cmd": SIM, "--llm-server-ready-timeout": "0"}, "ready-timeout: must be"),
        ({"--llm-server-cmd": SIM, "--llm-server-ready-timeout": "x"}, "ready-timeout: expected"),
        ({"--llm-server-cmd": SIM, "--llm-server-env": ["NOEQUALS"]}, "server-env: expected KEY="),
        ({"--llm-server-cmd": SIM, "--llm-server-cwd": "/no/such/dir"}, "server-cwd: not a dir"),
        ({"--llm-server-cmd": SIM, "--llm-endpoint": "http://h:1"}, "--llm-server-cmd: give one"),
        ({"--llm-reference-cmd": SIM, "--llm-reference-endpoint": "sim"}, "reference-cmd: give"),
        ({"--llm-server-cmd": "vllm serve m"}, "no {port} placeholder"),
    ],
)
def test_bad_server_options_are_usage_errors_naming_the_option(
    given: dict[str, Any], words: str
) -> None:
    with pytest.raises(LlmPerfUsageError) as caught:
        _options(**given)
    assert words in str(caught.value)


def test_server_options_make_the_command() -> None:
    options = _options(
        **{
            "--llm-server-cmd": SIM,
            "--llm-server-env": ["A=1", "B=x=y"],
            "--llm-server-ready-timeout": "7",
            "--llm-server-ready-url": "http://{host}:{port}/health",
            "--llm-reference-cmd": SIM,
        }
    )
    assert options.server is not None and options.reference_server is not None
    assert options.server.argv[-4:] == ("--port", "{port}", "--profile", "tiny")
    assert dict(options.server.env) == {"A": "1", "B": "x=y"}
    assert options.server.ready_timeout_s == 7.0
    assert options.server.ready_url == "http://{host}:{port}/health"
    assert options.endpoint_url is None and options.sim_profile is None


def test_the_command_line_wins_over_the_ini_file() -> None:
    flags = {o.flag: o for o in OPTIONS}
    raw = {"llm_server_cmd": SIM, "llm_endpoint": "http://h:1"}
    cli = {flags["--llm-server-cmd"].dest}
    options = LlmPerfOptions.resolve(lambda o: raw.get(o.dest), lambda o: o.dest in cli)
    assert options.server is not None and options.endpoint_url is None


def _running(token: str) -> list[int]:
    """The pids of processes whose command line holds ``token``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(token in part for part in proc.info["cmdline"] or ()) and _alive(proc.pid):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_session_measures_the_server_it_started(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_server_session=TINY)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", f"--llm-server-cmd={SIM}", "--llm-json=r.json"
    )
    assert result.ret == 0, result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    [server] = report["session"]["servers"]
    assert server["name"] == "pytest_llmperf" and "--profile tiny" in server["cmd"]
    assert server["ready_s"] > 0 and Path(server["log"]).is_file()
    assert report["tests"][0]["endpoint"]["url"] == server["url"] + "/v1"
    assert server["stopped_by"] == "pytest-llmperf" and not _alive(server["pid"])
    assert "(started by the gate)" in result.stdout.str()


def test_a_server_that_exits_at_once_stops_the_session_before_load(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_server_session=TINY)
    cmd = f"{PYTHON} -c \"import sys; print('no GPU found'); sys.exit(3)\" {{port}} exits-at-once"
    result = pytester.runpytest(
        "-p", "no:cacheprovider", f"--llm-server-cmd={cmd}", "--llm-json=r.json"
    )
    assert result.ret == 1
    out = result.stdout.str()
    assert "stopped at preflight (server did not start, exit status 1)" in out
    assert "exited with code 3" in out and "no GPU found" in out  # the log's tail
    session = json.loads((pytester.path / "r.json").read_text())["session"]
    assert session["stopped"]["state"] == "stopped before load: server did not start"
    [server] = session["servers"]
    assert server["exit"]["code"] == 3 and "no GPU found" in server["exit"]["log_tail"]
    assert _running("exits-at-once") == []


def test_a_command_that_is_not_a_program_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_server_session=TINY)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--llm-server-cmd=/no/such/llm-server --port {port}"
    )
    assert result.ret == 4
    assert "not found" in result.stdout.str() + result.stderr.str()


def test_a_server_never_ready_stops_the_session_at_its_deadline(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_server_session=TINY)
    cmd = (
        f"{PYTHON} -c \"import time; print('compiling', flush=True); time.sleep(60)\" "
        "{port} never-ready"
    )
    started = time.monotonic()
    result = pytester.runpytest(
        "-p", "no:cacheprovider", f"--llm-server-cmd={cmd}",
        "--llm-server-ready-timeout=2", "--llm-json=r.json",
    )  # fmt: skip
    assert result.ret == 1 and time.monotonic() - started < 30
    out = result.stdout.str()
    assert "was not ready within 2 s" in out and "compiling" in out
    [server] = json.loads((pytester.path / "r.json").read_text())["session"]["servers"]
    assert server["stopped_by"] == "pytest-llmperf" and "deadline" in server["error"]
    assert _running("never-ready") == []


ORPHAN_TEST = """
import pathlib, time


def test_holds_the_server(llm_endpoint, llm_endpoints):
    server = llm_endpoints.server_for(llm_endpoint)
    pathlib.Path("server.pid").write_text(str(server.pid))
    time.sleep(60)
"""


def test_no_server_outlives_a_killed_pytest(pytester: pytest.Pytester) -> None:
    """SIGKILL to pytest while a test runs: the watchdog stops its server within the
    grace period (the simulator ends at its SIGTERM) + 2 s."""
    pytester.makepyfile(test_orphan=ORPHAN_TEST)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--llm-server-cmd={SIM}",
         "--llm-server-log-dir=logs", "test_orphan.py"],
        cwd=pytester.path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    pid_file = pytester.path / "server.pid"
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, "no server started"
            time.sleep(0.05)
        server_pid = int(pid_file.read_text())
        assert _alive(server_pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed = time.monotonic()
        while _alive(server_pid):
            assert time.monotonic() - killed < 10 + 2, "the server outlived its pytest"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_reference_server_is_started_the_same_way(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_server_session=TINY)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--llm-endpoint=sim:tiny", f"--llm-reference-cmd={SIM}",
        "--llm-ab-blocks=2", "--llm-inconclusive=warn", "--llm-json=r.json",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    assert "A/B reference endpoint: " in result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    names = sorted(s["name"] for s in report["session"]["servers"])
    assert names == sorted(["pytest_llmperf", "sim-tiny"])  # the candidate, the reference
    [reference] = [s for s in report["session"]["servers"] if s["name"] != "sim-tiny"]
    assert report["tests"][0]["runs"][0]["reference"] is not None
    assert not _alive(reference["pid"])
