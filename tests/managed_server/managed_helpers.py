"""Helpers of tests/managed_server: the toy server's command, and whether a pid is gone."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil

from pytest_llmperf.managed_server import ServerCommand

TOY = Path(__file__).with_name("managed_toy_server.py")


def toy(*args: str, **fields: object) -> ServerCommand:
    """A command that runs the toy server with ``args`` (``{port}`` filled at start)."""
    fields.setdefault("stop_grace_s", 2.0)
    fields.setdefault("ready_timeout_s", 30.0)
    return ServerCommand(
        argv=(sys.executable, "-u", str(TOY), "--port", "{port}", *args),
        name=str(fields.pop("name", "toy")),
        **fields,  # type: ignore[arg-type]
    )


def gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs (a zombie counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
