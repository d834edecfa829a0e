"""This process's side of the watchdog: started with the first server, told of each.

One watchdog per process (an xdist worker has its own), started lazily as
``python -m pytest_llmperf.managed_server.watchdog`` (see that module) in a session
of its own, its stdin a pipe only this process writes. Nothing here waits on it;
a watchdog that died is started again with the next server.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["WATCHDOG_MODULE", "register", "unregister"]

WATCHDOG_MODULE = "pytest_llmperf.managed_server.watchdog"
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])

_lock = threading.Lock()
_dog: subprocess.Popen[bytes] | None = None
_dog_owner = 0  # the pid that started it (a forked child starts its own)


def _watchdog() -> subprocess.Popen[bytes] | None:
    global _dog, _dog_owner
    if _dog is not None and _dog_owner == os.getpid() and _dog.poll() is None:
        return _dog
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH", "")) if p
    )
    try:
        _dog = subprocess.Popen(
            [sys.executable, "-m", WATCHDOG_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        _dog = None
        return None
    _dog_owner = os.getpid()
    return _dog


def _send(line: str, *, start: bool) -> bool:
    with _lock:
        dog = _watchdog() if start else _dog
        if dog is None or dog.stdin is None or _dog_owner != os.getpid():
            return False
        try:
            dog.stdin.write(line.encode("ascii") + b"\n")
            dog.stdin.flush()
        except (OSError, ValueError):
            return False
        return True


def register(pgid: int, pid: int, grace_s: float) -> bool:
    """Tell the watchdog (started now if need be) of a server; whether it was told."""
    return _send(f"add {pgid} {pid} {grace_s:g}", start=True)


def unregister(pgid: int) -> None:
    """Tell the watchdog a server was stopped (nothing if there is none)."""
    with contextlib.suppress(Exception):
        _send(f"remove {pgid}", start=False)
