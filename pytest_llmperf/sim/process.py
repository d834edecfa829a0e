"""Running the simulator as a child process (what the plugin does).

The plugin runs the simulator in its own process so the server never shares a
GIL with the load generator whose timing it would otherwise disturb. The child
is started with ``--exit-on-stdin-eof``: it holds the read end of a pipe whose
write end only the parent has, so when the parent dies for any reason —
including SIGKILL — the child sees EOF and exits. No orphans.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

__all__ = ["SimProcess", "SimStartError", "sim_argv", "sim_env", "start_sim_process"]

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


class SimStartError(RuntimeError):
    """The simulator process died or did not start listening in time."""


class SimProcess:
    """A running simulator subprocess: ``.url``, ``.profile``, ``.pid``, ``.stop()``."""

    def __init__(
        self, proc: subprocess.Popen[bytes], url: str, profile: str, stderr_file: IO[bytes] | None
    ) -> None:
        self._proc = proc
        self.url = url
        self.profile = profile
        self.pid = proc.pid
        self._stderr_file = stderr_file

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, wait, then SIGKILL. Idempotent; returns the exit code."""
        proc = self._proc
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            except ProcessLookupError:  # pragma: no cover - raced with exit
                pass
        for stream in (proc.stdin, proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        if self._stderr_file is not None:
            self._stderr_file.close()
        return proc.returncode

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SimProcess(profile={self.profile!r}, url={self.url!r}, pid={self.pid})"


def _read_stderr(f: IO[bytes]) -> str:
    try:
        f.seek(0)
        return f.read().decode(errors="replace").strip()
    except (OSError, ValueError):
        return ""


def sim_argv(
    profile: str = "fixed",
    overrides: Mapping[str, str | float | int | list[int]] | None = None,
    seed: int = 0,
    speedup: float = 1.0,
    host: str = "127.0.0.1",
) -> tuple[str, ...]:
    """The simulator's command line as a server template: ``--port {port}`` (filled by
    whoever starts it, e.g. :class:`~pytest_llmperf.managed_server.ManagedServer`), no
    ``--exit-on-stdin-eof`` (the session's watchdog stops an orphan); run it with
    :func:`sim_env` added to the environment."""
    return (*_base_argv(profile, overrides, seed, speedup, host), "--port", "{port}")


def sim_env() -> dict[str, str]:
    """What the simulator's process needs in its environment: this package importable
    (``PYTHONPATH``, the caller's kept after it) and unbuffered output (its log)."""
    path = os.pathsep.join(p for p in (_PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def _base_argv(
    profile: str,
    overrides: Mapping[str, str | float | int | list[int]] | None,
    seed: int,
    speedup: float,
    host: str,
) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "pytest_llmperf.sim",
        "--profile",
        profile,
        "--host",
        host,
        "--seed",
        str(seed),
        "--speedup",
        repr(float(speedup)),
    ]
    for key, value in (overrides or {}).items():
        if isinstance(value, list | tuple):
            value = ",".join(str(v) for v in value)
        cmd += ["--set", f"{key}={value}"]
    return cmd


def start_sim_process(
    profile: str = "fixed",
    *,
    overrides: dict[str, str | float | int | list[int]] | None = None,
    seed: int = 0,
    timeout: float = 30.0,
    speedup: float = 1.0,
    host: str = "127.0.0.1",
) -> SimProcess:
    """Start ``python -m pytest_llmperf.sim`` and wait for its LISTENING line."""
    cmd = [
        *_base_argv(profile, overrides, seed, speedup, host),
        *("--port", "0", "--exit-on-stdin-eof"),
    ]
    env = {**os.environ, **sim_env()}
    stderr_file = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file, env=env
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                SimProcess(proc, "", profile, None).stop()
                err = _read_stderr(stderr_file)
                stderr_file.close()
                raise SimStartError(
                    f"simulator (profile {profile!r}) did not print LISTENING within {timeout:g} s"
                    + (f"; stderr:\n{err}" if err else "")
                )
            if sel.select(timeout=min(left, 0.5)):
                data = os.read(proc.stdout.fileno(), 4096)
                if not data:
                    proc.wait()
                    err = _read_stderr(stderr_file)
                    stderr_file.close()
                    raise SimStartError(
                        f"simulator (profile {profile!r}) exited with code {proc.returncode} "
                        "before listening" + (f"; stderr:\n{err}" if err else "")
                    )
                buf += data
                if b"\n" in buf:
                    line = buf.split(b"\n", 1)[0].decode(errors="replace").strip()
                    if not line.startswith("LISTENING "):
                        SimProcess(proc, "", profile, None).stop()
                        err = _read_stderr(stderr_file)
                        stderr_file.close()
                        raise SimStartError(
                            f"unexpected first line from simulator: {line!r}; stderr:\n{err}"
                        )
                    return SimProcess(proc, line.split(" ", 1)[1], profile, stderr_file)
