"""The watchdog: ends the servers of a pytest process that died without ending them.

Started once per pytest process (:mod:`pytest_llmperf.managed_server.guard`) as
``python -m pytest_llmperf.managed_server.watchdog``, in a session of its own, with
its stdin a pipe whose only write end that process holds. It reads lines:

- ``add PGID PID GRACE``: a server started (its process group, its leader, its grace
  period in seconds; GRACE may be left out: 10 s);
- ``remove PGID``: that server was stopped by its owner.

When stdin reaches EOF the owner is gone (an ordinary exit, a crash, SIGKILL): every
group still registered gets SIGTERM, and so does every descendant of its leader the
watchdog has seen (it refreshes that list about once a second while any server is
registered, so a process that left the group with ``setsid``, or was orphaned since,
is still known); after the longest grace period, SIGKILL. With nothing registered it
blocks on its stdin (no timer, no polling) and exits at EOF.

It imports psutil, the standard library and this package's light modules.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

import psutil

from pytest_llmperf.managed_server.process import running, signal_all
from pytest_llmperf.managed_server.tree import tree_of

__all__ = ["Watchdog", "main"]

_REFRESH_S = 1.0
_DEFAULT_GRACE_S = 10.0
_AFTER_KILL_S = 2.0


class Watchdog:
    """What one watchdog knows: the registered groups, their leaders, and every
    descendant it has seen (by pid, with its psutil identity)."""

    def __init__(self) -> None:
        self.groups: dict[int, tuple[int, float]] = {}  # pgid -> (leader pid, grace)
        self.seen: dict[int, dict[int, psutil.Process]] = {}  # pgid -> pid -> process

    def handle(self, line: str) -> None:
        parts = line.split()
        try:
            if parts[:1] == ["add"] and len(parts) >= 3:
                pgid, pid = int(parts[1]), int(parts[2])
                grace = float(parts[3]) if len(parts) > 3 else _DEFAULT_GRACE_S
                self.groups[pgid] = (pid, max(0.0, grace))
                self.seen[pgid] = {}
                self.refresh()
            elif parts[:1] == ["remove"] and len(parts) >= 2:
                pgid = int(parts[1])
                self.groups.pop(pgid, None)
                self.seen.pop(pgid, None)
        except ValueError:
            pass

    def refresh(self) -> None:
        """Note every living descendant of each registered leader (and forget the ones
        seen before that have ended)."""
        for pgid, (pid, _) in self.groups.items():
            known = self.seen.setdefault(pgid, {})
            for old in [p for p, proc in known.items() if not running(proc)]:
                del known[old]
            for child in [pid, *tree_of(pid)]:
                if child not in known:
                    with contextlib.suppress(psutil.Error, OSError):
                        known[child] = psutil.Process(child)

    def end_all(self) -> None:
        """SIGTERM to every registered group and seen process; after the longest grace,
        SIGKILL to what is left."""
        if not self.groups:
            return
        self.refresh()
        self._signal(signal.SIGTERM)
        grace = max(g for _, g in self.groups.values())
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self._alive():
            time.sleep(0.05)
        if self._alive():
            self.refresh()
            self._signal(signal.SIGKILL)
            deadline = time.monotonic() + _AFTER_KILL_S
            while time.monotonic() < deadline and self._alive():
                time.sleep(0.05)

    def _signal(self, sig: int) -> None:
        for pgid in self.groups:
            signal_all(pgid, self.seen.get(pgid, {}).values(), sig)

    def _alive(self) -> bool:
        for pgid in self.groups:
            with contextlib.suppress(OSError):
                os.killpg(pgid, 0)
                return True
            if any(running(proc) for proc in self.seen.get(pgid, {}).values()):
                return True
        return False


def main() -> int:
    """Read commands from stdin until EOF, then end what is still registered."""
    for sig in (signal.SIGINT, signal.SIGHUP):  # only EOF (or SIGTERM/SIGKILL) ends it
        signal.signal(sig, signal.SIG_IGN)
    dog = Watchdog()
    fd = sys.stdin.fileno()
    pending = b""
    while True:
        timeout = _REFRESH_S if dog.groups else None
        try:
            ready, _, _ = select.select([fd], [], [], timeout)
        except InterruptedError:  # pragma: no cover - PEP 475 retries select
            continue
        if not ready:
            dog.refresh()
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            break
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            dog.handle(line.decode("ascii", "replace"))
    dog.end_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
