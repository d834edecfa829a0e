"""An xdist worker's view of the session's server, which the controller started.

Under pytest-xdist the controller starts ``--llm-server-cmd``'s server once (as it
preflights a given endpoint, before any worker starts) and sends each worker its URL,
pid, log path and description (``workerinput``). A worker measures it as a URL, and
reads it through :class:`SharedServer`, the few things of a
:class:`~pytest_llmperf.managed_server.ManagedServer` that a run needs: ``pid`` (its
process tree is sampled from the worker), ``poll()`` (has it exited: the pid is
gone or a zombie; the worker is not its parent, so the exit code is the
controller's to know), ``log_path``, ``log_tail()`` and ``describe()``. It never
stops the server: the controller does, at the session's end.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

from pytest_llmperf.managed_server import ServerExit

__all__ = ["GoneServer", "SharedServer"]


class GoneServer(ServerExit):
    """The controller's server is gone, as a worker sees it: not its child, the worker
    cannot read how it ended (the controller's report does)."""

    def how(self) -> str:
        return "server exited (its process is gone; the controller's report says how)"


class SharedServer:
    """The controller's server, seen from a worker (see the module's docstring)."""

    def __init__(self, info: Mapping[str, Any], secrets: tuple[str, ...] = ()) -> None:
        described = dict(info.get("server") or {})
        self.url = str(info["url"]).removesuffix("/v1")
        self.pid = int(info["pid"])
        self.log_path = Path(str(info.get("log") or described.get("log") or ""))
        self.name = str(described.get("name") or "server")
        self.ready_s: float | None = described.get("ready_s")
        self.first_token_s: float | None = described.get("first_token_s")
        self._described = described
        self._secrets = tuple(s for s in secrets if s)
        self._exit: ServerExit | None = None
        try:
            self._process: psutil.Process | None = psutil.Process(self.pid)
        except (psutil.Error, OSError):
            self._process = None

    @property
    def exit(self) -> ServerExit | None:
        return self._exit

    def poll(self) -> ServerExit | None:
        """Has it exited (gone, or a zombie its parent has not reaped)? Never blocks."""
        if self._exit is None and not self._running():
            self._exit = GoneServer(code=None, signal=None, oom=False, at_ns=time.monotonic_ns())
        return self._exit

    def _running(self) -> bool:
        process = self._process
        if process is None:
            return False
        try:
            return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
        except (psutil.Error, OSError):
            return False

    def log_tail(self, lines: int = 30) -> str:
        """The log's last ``lines`` lines, ``secrets`` (the API key's value) redacted (the
        log's first line, the command, was written redacted by the controller)."""
        from pytest_llmperf.managed_server.log_file import read_tail
        from pytest_llmperf.redaction import scrub

        return scrub(read_tail(self.log_path, lines), *self._secrets)

    def describe(self) -> dict[str, Any]:
        """The controller's description of it, with an exit seen here."""
        described = dict(self._described)
        if self._exit is not None and not described.get("exit"):
            described["exit"] = {
                "code": None,
                "signal": None,
                "signal_name": None,
                "oom": False,
                "message": "server exited (seen from an xdist worker: its status is the "
                "controller's to know)",
            }
        return described

    def stop(self) -> None:
        """Not this worker's to stop: the controller stops it at the session's end."""

    def __repr__(self) -> str:
        return f"SharedServer(name={self.name!r}, pid={self.pid}, url={self.url!r})"
