"""ServerExit's words, and out-of-memory detection from cgroup v2 ``memory.events``
(a real OOM kill cannot be provoked safely here: the parser and the rule are tested)."""

from __future__ import annotations

import signal
from pathlib import Path

from pytest_llmperf.managed_server import ServerExit
from pytest_llmperf.managed_server.exits import (
    cgroup_of,
    log_says_oom,
    oom_kills,
    parse_memory_events,
    was_oom,
)

EVENTS = "low 0\nhigh 12\nmax 3\noom 2\noom_kill 1\noom_group_kill 0\n"


def test_memory_events_are_parsed() -> None:
    assert parse_memory_events(EVENTS) == {
        "low": 0,
        "high": 12,
        "max": 3,
        "oom": 2,
        "oom_kill": 1,
        "oom_group_kill": 0,
    }
    assert parse_memory_events("") == {} and parse_memory_events("garbage\noom x\n") == {}


def test_the_cgroup_and_its_oom_kills_are_read(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "cgroup").write_text("0::/user.slice/session-1.scope\n")
    assert cgroup_of(42, proc) == Path("/sys/fs/cgroup/user.slice/session-1.scope")
    (proc / "43").mkdir()
    (proc / "43" / "cgroup").write_text("12:memory:/docker/abc\n1:cpu:/\n")  # cgroup v1
    assert cgroup_of(43, proc) is None and cgroup_of(44, proc) is None
    group = tmp_path / "group"
    group.mkdir()
    (group / "memory.events").write_text(EVENTS)
    assert oom_kills(group) == 1
    assert oom_kills(tmp_path / "nowhere") is None and oom_kills(None) is None


def test_oom_is_said_only_where_the_system_says_it() -> None:
    kill = -signal.SIGKILL
    assert was_oom(kill, 0, 1, "")  # the counter grew
    assert not was_oom(kill, 1, 1, "")  # it did not: someone else's SIGKILL
    assert not was_oom(kill, None, None, "")  # cannot tell: say nothing
    assert was_oom(kill, None, None, "[ 12.3] Out of memory: Killed process 123 (python)")
    assert was_oom(1, None, None, "torch.OutOfMemoryError: CUDA out of memory. Tried to")
    assert not was_oom(0, 0, 5, "Out of memory")  # a clean exit is no OOM kill
    assert not was_oom(-signal.SIGTERM, 0, 1, "")  # a SIGTERM is not the OOM killer
    assert log_says_oom("oom-kill:constraint=CONSTRAINT_MEMCG")


def test_an_exit_describes_itself() -> None:
    start = 1_000_000_000
    crash = ServerExit(code=None, signal=9, oom=True, at_ns=start + 12_340_000_000)
    assert crash.describe() == "server exited with signal 9 (SIGKILL, out of memory)"
    assert crash.describe("run0", start) == (
        "server exited with signal 9 (SIGKILL, out of memory) at 12.3 s into run0"
    )
    assert ServerExit(3, None, False, start).describe() == "server exited with code 3"
    record = crash.to_dict("run0", start, log_tail="last words")
    assert record == {
        "code": None,
        "signal": 9,
        "signal_name": "SIGKILL",
        "oom": True,
        "at_s": 12.34,
        "message": "server exited with signal 9 (SIGKILL, out of memory) at 12.3 s into run0",
        "log_tail": "last words",
    }
    assert ServerExit.from_returncode(-15, 0) == ServerExit(None, 15, False, 0)
    assert ServerExit.from_returncode(2, 0) == ServerExit(2, None, False, 0)
