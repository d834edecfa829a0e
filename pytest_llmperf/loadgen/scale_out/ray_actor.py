"""The inside of one ``--llm-workers=ray:N`` actor: its share of each run, on whichever node.

The parent's side is :mod:`~pytest_llmperf.loadgen.scale_out.ray_workers`; the class
it hands Ray, :class:`~pytest_llmperf.loadgen.scale_out.ray_shell.LoadActorShell`,
loads this module by name inside each actor (the parent never imports it, as it
never imports a local worker's :mod:`~pytest_llmperf.loadgen.scale_out.worker_process`;
what runs here is a worker's share run, which never imports a pool, the dispatcher,
the run or the generator: ``tests/loadgen/test_worker_imports.py`` checks it). The
work itself is the local workers' own
(:class:`~pytest_llmperf.loadgen.scale_out.worker_share.ShareRunner`); this adds where
the actor runs, its wall clock for the parent's offset estimate, the start
instant's conversion to this node's monotonic clock, and the event log shipped
back as bytes.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_llmperf.loadgen.scale_out.worker_share import ShareRunner

__all__ = ["LoadActor"]


class LoadActor:
    """The Ray actor: one worker's share of each run of the session.

    An async actor: ``run`` issues on the actor's event loop, and ``stop``,
    ``abort``, ``progress`` and ``clock`` are answered on it between sends.
    """

    def __init__(self) -> None:
        self._runner: ShareRunner | None = None
        self._events: Path | None = None

    async def where(self) -> dict[str, Any]:
        return self._where()

    def _where(self) -> dict[str, Any]:
        ray = importlib.import_module("ray")
        ctx = ray.get_runtime_context()
        return {
            "node_id": ctx.get_node_id(),
            "actor_id": ctx.get_actor_id(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "niceness": _normal_priority(),
        }

    async def prepare(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Build this run's share (its event log in a scratch file on this node)."""
        self._events = None
        if payload["events_path"]:
            self._events = Path(tempfile.mkdtemp(prefix="llmperf-actor-")) / "events.sqlite"
            payload = {**payload, "events_path": str(self._events)}
        self._runner = ShareRunner(payload)
        return {**self._where(), "collect_s": self._runner.collect_s}

    async def clock(self) -> int:
        return time.time_ns()

    async def run(self, t0_wall_ns: int | None, t0_parent_ns: int) -> dict[str, Any]:
        """Run from the common start: the parent's monotonic ``t0_parent_ns`` when on its
        node, else ``t0_wall_ns`` (already in this actor's wall clock) converted here."""
        if t0_wall_ns is None:
            t0, shift = t0_parent_ns, 0
        else:
            t0 = time.monotonic_ns() + (t0_wall_ns - time.time_ns())
            shift = t0_parent_ns - t0
        runner = self._runner
        if runner is None:
            raise RuntimeError("run() before prepare()")
        try:
            state = await runner.execute(t0, shift)
        finally:
            self._runner = None
        if self._events is not None:
            state["events"] = _database_bytes(self._events)
            for suffix in ("", "-wal", "-shm"):
                Path(str(self._events) + suffix).unlink(missing_ok=True)
            self._events.parent.rmdir()
            self._events = None
        return state

    async def progress(self) -> tuple[int, int]:
        runner = self._runner
        return runner.progress() if runner is not None else (-1, -1)

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.stop()

    async def abort(self) -> None:
        if self._runner is not None:
            self._runner.abort()


def _normal_priority() -> int:
    """Undo Ray's worker niceness (15 by default) where allowed; the niceness in the end.

    A niced load generator loses the CPU to every other process on its node, and
    its sends go out late: the self-check would then (rightly) call the run
    inconclusive. Lowering niceness needs privilege (root, CAP_SYS_NICE); without
    it the actor runs as Ray started it and reports so.
    """
    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PROCESS, 0) > 0:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
    return os.getpriority(os.PRIO_PROCESS, 0)


def _database_bytes(path: Path) -> bytes:
    db = sqlite3.connect(path)
    try:
        return db.serialize()  # WAL content included
    finally:
        db.close()
