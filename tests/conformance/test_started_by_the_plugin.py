"""The server under test started, watched and stopped by the plugin (issue 37): llama-server.

Each case is a child session that starts llama-server itself through
``--llm-server-cmd`` (``servers.llama_server_launch``'s command: the tier's
flags, ``{host}``/``{port}`` filled by the plugin, ready on ``/health``) and
stops it at its end; llama-server answers ``/health`` about 0.1 s after its
spawn (the first token 0.1 s later), so these starts cost the tier little
beyond each child session's own pytest start (1-2 s). ``transformers serve``
and vLLM are started the same way by existing modules' sessions rather than
by new ones (their starts take 10-55 s): ``test_blank_model_servers.py`` (the
blank model's ``transformers serve``) and ``test_vllm_embeddings_apis.py`` (the
pooling vLLM), both checked with ``check_started_and_stopped``.

- A plain session: ``startup.ready_s`` in its run, the server's log in
  ``session.servers``, the process gone after the session. It also saves a
  baseline.
- The same server behind ``sh -c "sleep 4 && exec llama-server ..."``: a start
  4 s slower, which the comparison with that baseline calls a regression of
  ``startup.ready_s`` (more than 25 % and more than 1 s): exit status 1.
- A server killed with SIGKILL from the test's body mid-run: the run stops
  within 2 s, the test fails with "signal 9" and the log's last lines, and only
  the requests in flight count as failed.
- A session killed with SIGKILL while its server runs (the child's time limit):
  the plugin's watchdog stops the server; nothing is left for the tier to kill.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conformance_checks import (
    BASELINE_TEST,
    Session,
    check_no_traceback,
    check_started_and_stopped,
    is_running,
    run_session,
)

SLOW_START_S = 4  # the sleep before exec: llama-server's own start is about 0.1 s
KILL_CONCURRENCY = 2
KILL_AFTER_TOKENS = 320  # generated tokens before the kill: ten 32-token replies of the run

# The killed server's session: many more requests than the run gets through before the
# kill. A thread watches llama-server's own counter of generated tokens and sends SIGKILL
# once the run has had ten replies (no guessing at when the run starts); the server's pid
# is the process listening on the endpoint's port. kill.json: the pid and the seconds
# from the kill to run() returning or raising.
KILL_TEST = f"""
import json
import os
import signal
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest


def listening_pid(port):
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            return conn.pid
    raise AssertionError(f"nothing listens on port {{port}}")


def generated_tokens(root):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({{}}))
    with opener.open(root + "/metrics", timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("llamacpp:tokens_predicted_total"):
                return float(line.split()[-1])
    return 0.0


@pytest.mark.llm_workload("synthetic", requests=5000, input_tokens=64, output_tokens=32)
@pytest.mark.llm_load("concurrency", concurrency={KILL_CONCURRENCY})
async def test_load(llm_endpoint, llm_loadgen):
    parts = urlsplit(llm_endpoint.base_url)
    root = f"{{parts.scheme}}://{{parts.netloc}}"
    pid = listening_pid(parts.port)
    killed = {{}}
    stop = threading.Event()

    def watch():
        start = generated_tokens(root)
        while not stop.wait(0.05):
            if generated_tokens(root) - start >= {KILL_AFTER_TOKENS}:
                killed["at"] = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        await llm_loadgen.run()
    finally:
        after = time.monotonic() - killed["at"] if "at" in killed else None
        stop.set()
        Path("kill.json").write_text(json.dumps({{"pid": pid, "after_kill_s": after}}))
"""


# The session killed under its server: its test writes the server's pid, then waits far
# beyond the session's time limit (KILLED_SESSION_LIMIT_S), which SIGKILLs the child pytest.
KILLED_SESSION_LIMIT_S = 6.0
HANG_TEST = f"""
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil


def test_hang(llm_endpoint):
    port = urlsplit(llm_endpoint.base_url).port
    pid = next(
        c.pid for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port and c.pid
    )
    Path("server.pid").write_text(str(pid))
    time.sleep({KILLED_SESSION_LIMIT_S * 20:g})
"""


def _named(entry: dict[str, Any]) -> str:
    """A baseline comparison's ``metric.stat``."""
    return f"{entry.get('metric')}.{entry.get('stat')}"


def _launch(install: Any, slow_s: float = 0) -> Any:
    servers = sys.modules["llmperf_conformance_servers"]  # loaded by conftest.py
    if problems := install.problems("llama-server"):
        pytest.fail(f"{install.root} is not a complete install: " + "; ".join(problems))
    launch = servers.llama_server_launch(install)
    return servers.slowed(launch, slow_s) if slow_s else launch


@pytest.fixture(scope="module")
def baseline(install: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Session, Path]:
    """A plain session that starts llama-server itself and saves a baseline."""
    workdir = tmp_path_factory.mktemp("lifecycle-llama-server")
    path = workdir / "baseline.json"
    s = run_session(
        workdir, _launch(install), f"--llm-baseline-save={path}", test_source=BASELINE_TEST
    )
    return s, path


def test_a_started_server_reports_its_start_and_log_and_is_gone_after(
    baseline: tuple[Session, Path],
) -> None:
    """Issue 37, done when: the server started by the plugin, its ``startup.ready_s``
    reported; its log in the session's servers; no process of it after the session."""
    s, path = baseline
    assert s.returncode == 0, s.explain()
    check_no_traceback(s)
    server = check_started_and_stopped(s)
    assert server["name"] == "llama-server", server
    assert "--port" in server["cmd"] and "{port}" not in server["cmd"], server
    run = s.run
    startup = run["server_process"]["startup"]
    assert 0 < startup["ready_s"] < 60, startup
    assert run["server_process"]["exit"] is None, run["server_process"]
    assert path.exists(), s.explain()
    print(json.dumps({"startup": startup, "log": server["log"]}))


def test_a_slowed_start_fails_the_startup_baseline_comparison(
    install: Any, baseline: tuple[Session, Path], tmp_path: Path
) -> None:
    """Issue 37, done when: a deliberately slowed start (a sleep wrapper) fails a
    ``startup.ready_s`` baseline comparison: exit status 1, ``startup.ready_s``
    regressed in the JSON."""
    saved, path = baseline
    assert saved.returncode == 0 and path.exists(), saved.explain()
    s = run_session(
        tmp_path,
        _launch(install, SLOW_START_S),
        f"--llm-baseline-compare={path}",
        test_source=BASELINE_TEST,
    )
    check_no_traceback(s)
    assert s.returncode == 1, s.explain()
    check_started_and_stopped(s)
    before = saved.run["server_process"]["startup"]["ready_s"]
    after = s.run["server_process"]["startup"]["ready_s"]
    assert after >= before + SLOW_START_S - 0.5, (before, after)
    entries = [e for t in s.report["tests"] for e in t.get("baseline") or []]  # type: ignore[index]
    startup = [e for e in entries if "startup.ready_s" in (e.get("metric"), _named(e))]
    assert startup, f"no startup.ready_s comparison among {[e.get('metric') for e in entries]}"
    assert startup[0]["verdict"] == "regressed", startup
    assert "startup.ready_s" in s.output, s.explain()
    print(json.dumps(startup[0]))


def test_a_server_killed_mid_run_fails_the_test_at_once_with_signal_9_and_its_log(
    install: Any, tmp_path: Path
) -> None:
    """Issue 37, done when: a server killed mid-run (SIGKILL from the test) ends that test
    within 2 s as failed with "signal 9", the log tail and no more than the in-flight
    requests counted failed; no process is left behind."""
    s = run_session(tmp_path, _launch(install), test_source=KILL_TEST)
    check_no_traceback(s)
    assert s.returncode == 1, s.explain()
    kill = json.loads((tmp_path / "kill.json").read_text())
    assert kill["after_kill_s"] is not None, f"the server was never killed: {kill}\n{s.explain()}"
    assert kill["after_kill_s"] < 2.0, (
        f"the run went on {kill['after_kill_s']:.2f} s\n{s.explain()}"
    )
    assert s.report is not None, s.explain()
    test = s.report["tests"][0]
    assert test["outcome"] == "failed", s.explain()
    run = s.run
    process = run["server_process"]
    assert process["pid"] == kill["pid"], (process["pid"], kill)
    exit_ = process["exit"]
    assert exit_ is not None and exit_["signal"] == 9, process
    assert exit_["signal_name"] == "SIGKILL" and not exit_["oom"], exit_
    assert "signal 9" in exit_["message"], exit_
    assert "signal 9" in s.output, s.explain()
    counts = run["counts"]
    assert 0 < counts["completed"] < 5000, counts
    assert counts["failed"] <= KILL_CONCURRENCY, (
        f"more than the in-flight requests failed: {counts}"
    )
    # the log's tail, in the report and in the failure the terminal shows
    log_lines = [ln for ln in Path(process["log"]).read_text().splitlines() if ln.strip()]
    assert log_lines, process["log"]
    assert log_lines[-1].strip() in exit_["log_tail"], (log_lines[-1], exit_["log_tail"])
    assert log_lines[-1].strip() in s.output, s.explain()
    assert not is_running(kill["pid"], s.mark)
    assert not s.leftovers, s.leftovers
    print(json.dumps({"after_kill_s": kill["after_kill_s"], "counts": counts, "exit": exit_}))


def test_a_session_killed_with_sigkill_leaves_no_server_behind(
    install: Any, tmp_path: Path
) -> None:
    """Issue 37, done when: pytest killed with SIGKILL (the child session, past its time
    limit) leaves no server process: the plugin's watchdog ends it within its grace
    period, before the tier's own search for leftovers would (``Session.leftovers``)."""
    s = run_session(
        tmp_path, _launch(install), test_source=HANG_TEST, limit_s=KILLED_SESSION_LIMIT_S
    )
    assert s.returncode == -1, s.explain()  # killed at its limit
    pid_file = tmp_path / "server.pid"
    assert pid_file.exists(), f"the test never saw its server\n{s.explain()}"
    pid = int(pid_file.read_text())
    assert not is_running(pid, s.mark), f"server {pid} outlived its killed session"
    assert not s.leftovers, f"the tier had to kill: {s.leftovers}\n{s.explain()}"
