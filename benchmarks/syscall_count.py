"""Count one process's system calls over a stretch of its run, with ``perf stat``.

Issue 42, item 1: reads per token event and system calls per event, for every
client in ``loadgen_events.py`` the same way and without touching the client:
``perf stat`` counts the kernel's ``sys_enter`` tracepoints of the process
(counting only, no sampling, no ptrace stop per call as ``strace`` makes,
which would slow the client and so change how many events each read finds).
Needs ``perf`` and access to the tracepoints (root, or
``kernel.perf_event_paranoid`` <= 1 and a readable tracefs); where either is
missing :func:`start` returns ``None`` and the benchmark prints ``-``.

A read is ``recvfrom`` (asyncio's ``sock.recv_into``) or ``read`` (libuv's,
under uvloop); a wait is ``epoll_wait`` or ``epoll_pwait`` (libuv); a write is
``sendto``, ``write`` or ``writev``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time

__all__ = ["GROUPS", "Counting", "start"]

_CALLS = (
    "recvfrom",
    "read",
    "epoll_wait",
    "epoll_pwait",
    "sendto",
    "write",
    "writev",
    "epoll_ctl",
)
# what the benchmark prints: each a sum of the calls named
GROUPS = {
    "reads": ("recvfrom", "read"),
    "waits": ("epoll_wait", "epoll_pwait"),
    "writes": ("sendto", "write", "writev"),
    "epoll_ctl": ("epoll_ctl",),
}


class Counting:
    """A ``perf stat`` attached to a process; :meth:`stop` returns the counts."""

    def __init__(self, proc: subprocess.Popen[bytes], out: str) -> None:
        self._proc = proc
        self._out = out

    def stop(self) -> dict[str, int]:
        """Counts by call name, and ``total`` (every system call)."""
        self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        counts: dict[str, int] = {}
        try:
            with open(self._out) as f:
                for row in f:
                    parts = row.strip().split(",")
                    if len(parts) < 3 or not parts[0].isdigit():
                        continue
                    name = parts[2].rsplit(":", 1)[-1]
                    name = "total" if name == "sys_enter" else name.removeprefix("sys_enter_")
                    counts[name] = int(parts[0])
        finally:
            os.unlink(self._out)
        return counts


def start(pid: int | None = None) -> Counting | None:
    """Start counting ``pid``'s system calls (this process by default); ``None`` if perf
    is not there or cannot read the tracepoints."""
    perf = shutil.which("perf")
    if perf is None:
        return None
    fd, out = tempfile.mkstemp(prefix="perf-stat-", suffix=".csv")
    os.close(fd)
    events = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{c}" for c in _CALLS]
    cmd = [perf, "stat", "-x,", "-o", out, "-p", str(pid or os.getpid())]
    for event in events:
        cmd += ["-e", event]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)  # attach before the stretch to count (a benchmark's set-up, not measured)
    if proc.poll() is not None:  # refused: no tracepoints, no permission
        os.unlink(out)
        return None
    return Counting(proc, out)
