"""No server outlives its owner: a pytest process killed with SIGKILL leaves none behind
(the watchdog ends the server, its child and its child in a new session)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from managed_helpers import gone

PARENT = """
import sys, time
from pathlib import Path
sys.path.insert(0, {helpers!r})
from managed_helpers import toy
from pytest_llmperf.managed_server import ManagedServer
server = ManagedServer.start(
    toy("--ignore-term", "--children", {pids!r}, stop_grace_s=1.0), log_dir=Path({logs!r})
)
print(server.pid, flush=True)
time.sleep(600)
"""


def _all_gone(pids: list[int], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if all(gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return all(gone(p) for p in pids)


def test_a_sigkilled_owner_leaves_no_server_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    script = PARENT.format(
        helpers=str(Path(__file__).parent), pids=str(pid_file), logs=str(tmp_path / "logs")
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), f"the parent did not start its server: {line!r}"
        server = int(line)
        child, loner = map(int, pid_file.read_text().split())
        assert not any(gone(p) for p in (server, child, loner))
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        # the server ignores SIGTERM: killed after its 1 s grace; the brief's bound is
        # grace + 2 s (a watchdog that never acted would leave them forever)
        assert _all_gone([server, child, loner], within_s=1.0 + 2.0)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_the_watchdog_exits_at_eof_with_nothing_registered() -> None:
    dog = subprocess.Popen(
        [sys.executable, "-m", "pytest_llmperf.managed_server.watchdog"], stdin=subprocess.PIPE
    )
    assert dog.stdin is not None
    dog.stdin.write(b"add 999999 999999 1\nremove 999999\n")
    dog.stdin.close()
    assert dog.wait(20) == 0  # 20 s only bounds a hang: it exits as soon as it reads EOF


def test_the_watchdog_remembers_a_descendant_whose_parent_died(tmp_path: Path) -> None:
    """A server that died first leaves its children orphaned, one of them in a session
    of its own (no group signal reaches it): the watchdog's earlier snapshot does."""
    from managed_helpers import TOY

    from pytest_llmperf.managed_server.watchdog import Watchdog

    pid_file = tmp_path / "pids"
    leader = subprocess.Popen(
        [sys.executable, str(TOY), "--never-listen", "--children", str(pid_file)],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text().endswith("\n")):
            assert time.monotonic() < deadline and leader.poll() is None
            time.sleep(0.02)
        child, loner = map(int, pid_file.read_text().split())
        dog = Watchdog()
        dog.handle(f"add {leader.pid} {leader.pid} 1")
        assert {leader.pid, child, loner} <= set(dog.seen[leader.pid])
        leader.kill()
        leader.wait()
        dog.end_all()
        assert _all_gone([child, loner], within_s=2.0)
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait()
