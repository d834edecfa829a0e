"""Interruption: Ctrl-C, SIGTERM (a CI timeout) and SIGKILL in the middle of a run.

Each case starts a real ``pytest`` process running a long test against the
embedded simulator (a child process of that pytest), waits until the run's
event log shows requests completing, then signals it. What must hold:

- SIGINT / SIGTERM: issuing stops, in-flight requests drain for at most a few
  seconds (the rest are recorded as incomplete, never dropped), the JSON
  report is written and marked interrupted, exit status 2, no child process
  (the simulator) outlives pytest;
- SIGKILL: nothing can run, yet the event log on disk (SQLite, WAL) still
  opens and re-analyses, and the simulator child exits on its own.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_llmperf.results.event_log import analyse_event_log

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

LONG_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens={output_tokens})
@pytest.mark.llm_load("poisson", rate=40, duration=120)
async def test_long(llm_loadgen):
    await llm_loadgen.run()
"""


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _event_rows(events_dir: Path) -> int:
    total = 0
    for db in events_dir.glob("*.sqlite*"):
        if db.suffix not in (".sqlite", ".sqlite3", ".db") and not db.name.endswith(".sqlite"):
            continue
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.5) as con:
                total += con.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        except sqlite3.Error:
            continue
    return total


def _start(
    tmp: Path, output_tokens: int | tuple[int, int]
) -> tuple[subprocess.Popen, Path, Path, int]:
    (tmp / "test_long.py").write_text(LONG_TEST.format(output_tokens=output_tokens))
    report = tmp / "report.json"
    events = tmp / "events"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--llm-json={report}",
            f"--llm-events={events}",
            "test_long.py",
        ],
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # A background shell starts children with SIGINT ignored; give pytest a normal Ctrl-C.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    sim_pid = 0
    while time.monotonic() < deadline and proc.poll() is None:
        kids = _children(proc.pid)
        sim_pid = kids[0] if kids else 0
        if sim_pid and events.is_dir() and _event_rows(events) >= 10:
            return proc, report, events, sim_pid
        time.sleep(0.1)
    proc.kill()
    out = proc.communicate()[0].decode(errors="replace")
    raise AssertionError(f"the run never got under way:\n{out}")


def _finish(proc: subprocess.Popen, sig: int) -> tuple[int, float, str]:
    sent = time.monotonic()
    proc.send_signal(sig)
    out = proc.communicate(timeout=60)[0].decode(errors="replace")
    return proc.returncode, time.monotonic() - sent, out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_drains_briefly_and_writes_a_partial_report(tmp_path, sig):
    # Streams of 0.05 to 20 s: short ones complete at once, long ones cannot finish in the
    # drain, so some must end incomplete.
    proc, report, events, sim_pid = _start(tmp_path, output_tokens=(10, 4000))
    rc, elapsed, out = _finish(proc, sig)

    assert rc == pytest.ExitCode.INTERRUPTED, out
    assert elapsed < 15, f"took {elapsed:.1f} s to stop:\n{out}"  # 5 s drain cap + teardown
    assert "Traceback" not in out
    data = json.loads(report.read_text())
    assert data["session"]["interrupted"] is True
    [test] = data["tests"]
    assert test["outcome"] == "interrupted"
    [run] = test["runs"]
    assert run["interrupted"] is True
    counts = run["counts"]
    assert counts["issued"] == counts["completed"] + counts["failed"]  # nothing dropped
    assert counts["incomplete"] > 0 and run["errors"]["incomplete_at_cap"] == counts["incomplete"]
    # No orphans: the simulator child went with its parent.
    assert not _alive(sim_pid)
    # The event log was closed cleanly and re-analyses to the same counts.
    [log] = [p for p in events.iterdir() if p.suffix == ".sqlite"]
    assert analyse_event_log(log).counts() == counts


def test_sigkill_leaves_a_readable_event_log_and_no_orphan(tmp_path):
    proc, report, events, sim_pid = _start(tmp_path, output_tokens=20)
    seen = _event_rows(events)
    proc.kill()
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(sim_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(sim_pid), "the simulator outlived a SIGKILLed pytest"
    assert not report.exists()  # nothing could be written, and nothing half-written
    [log] = [p for p in events.iterdir() if p.suffix == ".sqlite"]
    acc = analyse_event_log(log)  # opens despite the WAL never being checkpointed
    assert acc.issued > 0 and acc.completed > 0
    assert _event_rows(events) >= seen


def _open_sockets() -> int:
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
        except OSError:
            continue
    return count


def _client_sockets(port: int) -> int:
    """This process's TCP sockets connected to ``port`` (the client's side)."""
    import psutil

    return sum(
        1 for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == port
    )


def _server_sockets(port: int) -> list[object]:
    """This process's TCP sockets on local ``port`` (the server's side, listener included)."""
    import psutil

    return [c for c in psutil.Process().net_connections("tcp") if c.laddr and c.laddr.port == port]


@pytest.mark.asyncio
async def test_cancelled_run_closes_every_socket_and_records_in_flight_requests():
    """Cancelling the task that runs a load (what Ctrl-C does to a test) leaks nothing."""
    import asyncio

    import faults
    from odd_servers import OddServer

    from pytest_llmperf.client.endpoint import Endpoint, Timeouts
    from pytest_llmperf.loadgen.run import LoadRun
    from pytest_llmperf.specs.run import RunSpec

    async with OddServer(faults.stall_mid_stream, keep_requests=False) as server:
        before = _open_sockets()
        endpoint = Endpoint.from_env(
            server.url, api_key_env=None, model="m", timeouts=Timeouts(1, 2, 2, 2)
        )
        spec = RunSpec.from_markers(
            ("synthetic",), {"requests": 1000}, ("concurrency",), {"concurrency": 20}
        )
        run = LoadRun(endpoint, spec, handle_sigint=False)
        task = asyncio.create_task(run.execute())
        while server.open_connections < 20:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Every client-side socket of the run must be closed. (The server's handlers, in this
        # process too, end and close theirs on their own time: counting all sockets against
        # the server's count raced with a handler that had ended and not yet closed.)
        assert _client_sockets(server.port) == 0
        server_side = len(_server_sockets(server.port))  # first: sockets only close from here
        assert _open_sockets() <= before + server_side
        counts = run.accumulator.counts()
        assert counts["issued"] == counts["completed"] + counts["failed"]
        assert counts["issued"] >= 20


def test_sigkill_leaves_no_worker_process_behind(tmp_path):
    """With --llm-workers, the worker processes notice their parent's death and stop."""
    (tmp_path / "test_long.py").write_text(LONG_TEST.format(output_tokens=20))
    events = tmp_path / "events"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--llm-workers=2",
            f"--llm-events={events}",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    kids: list[int] = []
    # the simulator and two workers, and the run under way: the workers' event logs show
    # requests (evidence, where a fixed delay can end before the first one on a busy machine)
    while time.monotonic() < deadline and (len(kids) < 3 or _event_rows(events) < 10):
        kids = _children(proc.pid)
        time.sleep(0.1)
    assert len(kids) >= 3, "the workers never started"
    assert _event_rows(events) >= 10, "the run never got under way"
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 15
    while any(_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [k for k in kids if _alive(k)], "a child outlived a SIGKILLed pytest"
