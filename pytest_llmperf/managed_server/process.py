"""Starting a server process in its own session, and ending it with its whole tree.

The server is the leader of a new session and process group. Ending it: its
descendants are listed (psutil, so one that left the group with ``setsid`` is
found while it is still a descendant), SIGTERM goes to the group and to each of
them, then, after the grace period, SIGKILL to whatever is left. Every step is
bounded and nothing raises.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import psutil

from pytest_llmperf.managed_server.tree import tree_of

__all__ = ["descendants", "exit_status", "running", "signal_all", "spawn", "terminate_tree"]

_AFTER_KILL_S = 2.0  # how long SIGKILLed processes are waited for (they cannot refuse)


def spawn(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None, log_fd: int
) -> subprocess.Popen[bytes]:
    """``argv`` started with stdin from /dev/null, stdout and stderr to ``log_fd``, in a
    new session (its own process group). Raises OSError if it cannot be run."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=log_fd,
        stderr=subprocess.STDOUT,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        close_fds=True,
    )


def exit_status(proc: subprocess.Popen[bytes]) -> int:
    """Wait for ``proc`` to end, without reaping it: its returncode (negative: the
    signal). The process stays a zombie until :meth:`~subprocess.Popen.wait`, so its
    pid, and its process group's id, cannot be reused by another process meanwhile: a
    stop after a crash signals nobody else's group or children."""
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:  # reaped already (by proc.wait())
        return proc.wait()
    if info is None:  # pragma: no cover - only with WNOHANG
        return proc.wait()
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status


def descendants(pid: int) -> list[psutil.Process]:
    """Every living descendant of ``pid`` (none if it is gone)."""
    found = []
    for child in tree_of(pid):
        with contextlib.suppress(psutil.Error, OSError):
            found.append(psutil.Process(child))
    return found


def signal_all(pgid: int | None, procs: Iterable[psutil.Process], sig: int) -> None:
    """``sig`` to the process group ``pgid`` and to each of ``procs`` (psutil refuses a
    pid that was reused since it was listed); errors ignored."""
    if pgid is not None:
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)
    for proc in procs:
        with contextlib.suppress(psutil.Error, OSError):
            proc.send_signal(sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: some member is not ours; count it as alive
        return True
    return True


def terminate_tree(
    pid: int,
    grace_s: float,
    wait_leader: Callable[[float], bool],
    *,
    known: Iterable[psutil.Process] = (),
) -> None:
    """SIGTERM to the group of ``pid`` (a session leader) and its descendants (and
    ``known`` ones: seen earlier, perhaps orphaned since), ``grace_s`` for all to end,
    then SIGKILL. ``wait_leader(timeout)``: whether the leader ended (reaped) within
    ``timeout`` seconds. Never raises; returns within ``grace_s`` plus a few seconds."""
    pgid = pid  # the leader of its own session: its group id is its pid
    tree = {p.pid: p for p in known}
    tree.update((p.pid, p) for p in descendants(pid))
    signal_all(pgid, tree.values(), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    if not wait_leader(max(0.0, deadline - time.monotonic())):
        tree.update((p.pid, p) for p in descendants(pid))
    _wait(pgid, tree.values(), deadline)
    if _any_alive(pgid, tree.values()):
        tree.update((p.pid, p) for p in descendants(pid))
        signal_all(pgid, tree.values(), signal.SIGKILL)
        _wait(pgid, tree.values(), time.monotonic() + _AFTER_KILL_S)
    wait_leader(_AFTER_KILL_S)


def _any_alive(pgid: int, procs: Iterable[psutil.Process]) -> bool:
    return _group_alive_unreaped(pgid) or any(running(p) for p in procs)


def running(proc: psutil.Process) -> bool:
    """Still running: neither gone nor a zombie waiting for its parent's wait."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):
        return False


def _wait(pgid: int, procs: Iterable[psutil.Process], deadline: float) -> None:
    """Until the group and ``procs`` are gone (zombies count as gone) or ``deadline``."""
    procs = list(procs)
    step = 0.01
    while time.monotonic() < deadline:
        if not _group_alive_unreaped(pgid) and not any(running(p) for p in procs):
            return
        time.sleep(min(step, max(0.0, deadline - time.monotonic())))
        step = min(step * 2, 0.1)


def _group_alive_unreaped(pgid: int) -> bool:
    """Whether a member of ``pgid`` is still running (not merely a zombie awaiting its
    parent's wait: killpg(0) succeeds on a zombie leader)."""
    if not _group_alive(pgid):
        return False
    try:
        members = [p for p in psutil.process_iter(["pid"]) if _pgid(p.pid) == pgid]
    except (psutil.Error, OSError):
        return True
    return any(running(p) for p in members)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
