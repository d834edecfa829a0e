"""``--llm-workers=N``: one run issued from N processes, merged exactly.

One Python process saturates one core; past that point the client, not the
server, sets the pace. Each worker process owns its event loop, its
connections, its histograms and (with ``--llm-events``) its event log, and
takes every timestamp itself, where it reads its sockets — nothing crosses a
process boundary on the hot path.

The split keeps the run's meaning. Every worker walks the *same* seeded
schedule and sample order and issues the positions ``i`` with ``i % N ==
worker``; the workers start together at a common ``t0`` on the system-wide
monotonic clock (CLOCK_MONOTONIC), so the union of their sends is exactly the
planned open-loop schedule. A closed loop's slots are divided among the
workers (never more workers than slots). At the end each worker sends its
accumulator as :meth:`MetricsAccumulator.to_state` (HDR's lossless
encoding); the parent decodes and merges them bucket by bucket, so the
merged percentiles are those of one histogram fed every sample, and merges
the workers' event logs into the run's one database.

This module is the parent's side; what runs inside each worker process is
:mod:`~pytest_llmperf.loadgen.scale_out.worker_process`. The pool is chosen by
:mod:`~pytest_llmperf.loadgen.scale_out.dispatcher`, which hands it the parent's
:class:`~pytest_llmperf.loadgen.issue.local.ShareRun` (the whole plan, the run's
accumulator, statistics and, in its book, the stop reason): the pool reads the
plan there and merges into it, and never sees the run above.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.loadgen.issue.stats import IssueStats
from pytest_llmperf.loadgen.scale_out.messages import WorkerMessage
from pytest_llmperf.loadgen.self_check import WorkerReport
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.recorder import SCHEMA
from pytest_llmperf.results.run_result import StopReason

if TYPE_CHECKING:  # handed in by the dispatcher: the parent's share of the run (all of it)
    from pytest_llmperf.loadgen.issue.local import ShareRun

__all__ = [
    "START_MARGIN_S",
    "WorkerError",
    "WorkerPool",
    "merge_event_logs",
    "merge_states",
    "payload_for",
]

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])
WORKER_MODULE = "pytest_llmperf.loadgen.scale_out.worker_process"  # run with python -m
START_MARGIN_S = 0.1  # from "all workers ready" to the common t0
READY_TIMEOUT_S = 60.0


class WorkerError(RuntimeError):
    """A worker process died or did not start."""


class WorkerPool:
    """Runs ``share``'s plan in ``workers`` processes and merges into ``share``."""

    def __init__(
        self, share: ShareRun, workers: int, events_file: Path | None, started_at: str = ""
    ) -> None:
        self.share = share
        self.events_file = events_file
        self.started_at = started_at
        load = share.plan.load
        count = workers
        if not load.open_loop and load.slots:
            count = min(count, load.slots)
        self.count = count
        self.reports: list[WorkerReport] = []  # per-worker details: only Ray actors have any
        self._channels: list[_Channel] = []

    def _part(self, index: int) -> Path | None:
        if self.events_file is None:
            return None
        return self.events_file.with_name(f"{self.events_file.stem}.w{index}.sqlite")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        share = self.share
        for i in range(self.count):
            part = self._part(i)
            payload = payload_for(share, i, self.count, str(part) if part else None)
            self._channels.append(_Channel.start(payload))
        try:
            for i, ch in enumerate(self._channels):
                msg = await loop.run_in_executor(None, ch.recv, READY_TIMEOUT_S)
                if msg[0] != WorkerMessage.READY:
                    raise WorkerError(f"load-generator worker {i} did not start: {msg[1]}")
            t0 = time.monotonic_ns() + int(START_MARGIN_S * 1e9)
            for ch in self._channels:
                ch.send((WorkerMessage.GO, t0))
            results = await asyncio.gather(
                *(loop.run_in_executor(None, ch.recv, None) for ch in self._channels)
            )
        except BaseException:
            self.abort()
            raise
        finally:
            for ch in self._channels:
                await loop.run_in_executor(None, ch.close)
        states: list[dict[str, Any]] = []
        for i, msg in enumerate(results):
            if msg[0] != WorkerMessage.RESULT:
                raise WorkerError(f"load-generator worker {i} failed: {msg[1]}")
            states.append(msg[1])
        merge_states(share, states)
        if self.events_file is not None:
            parts = [p for p in map(self._part, range(self.count)) if p]
            meta = self.event_log_meta()
            await loop.run_in_executor(None, merge_event_logs, self.events_file, parts, meta)

    def event_log_meta(self) -> dict[str, Any]:
        """The merged event log's ``meta``: the run's, with its merged summary."""
        meta = self.share.event_log_meta(self.started_at)
        meta["summary"] = self.share.accumulator.summary()
        meta["workers"] = self.count
        return meta

    def stop(self) -> None:
        self._send_all((WorkerMessage.STOP,))

    def abort(self) -> None:
        self._send_all((WorkerMessage.ABORT,))

    def _send_all(self, message: tuple[Any, ...]) -> None:
        for ch in self._channels:
            ch.send(message)


class _Channel:
    """A worker process and the two pipes to and from it (pickled messages)."""

    def __init__(self, proc: subprocess.Popen[bytes], out: Connection, inp: Connection) -> None:
        self.proc = proc
        self.out = out
        self.inp = inp

    @classmethod
    def start(cls, payload: dict[str, Any]) -> _Channel:
        """``python -m pytest_llmperf.loadgen.scale_out.worker_process`` — no re-import of the
        caller's script."""
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH")) if p
        )
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest_llmperf.loadgen.scale_out.worker_process",
                str(down_r),
                str(up_w),
            ],
            pass_fds=(down_r, up_w),
            stdin=subprocess.DEVNULL,
            env=env,
        )
        os.close(down_r)
        os.close(up_w)
        channel = cls(proc, Connection(down_w, readable=False), Connection(up_r, writable=False))
        channel.send((WorkerMessage.PAYLOAD, payload))
        return channel

    def send(self, message: tuple[Any, ...]) -> None:
        with contextlib.suppress(OSError, ValueError):  # a gone worker's missing result says so
            self.out.send(message)

    def recv(self, timeout: float | None) -> tuple[Any, ...]:
        try:
            if timeout is not None and not self.inp.poll(timeout):
                return (WorkerMessage.TIMEOUT, f"no answer within {timeout:g} s")
            message: tuple[Any, ...] = self.inp.recv()  # unpickled: worker_process.py sends tuples
            return message
        except (EOFError, OSError) as exc:
            return (WorkerMessage.DIED, f"exit code {self.proc.poll()} ({type(exc).__name__})")

    def close(self) -> None:
        self.out.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.inp.close()


def merge_states(share: ShareRun, states: list[dict[str, Any]]) -> list[MetricsAccumulator]:
    """Merge the workers' returned states into ``share`` (the one merge, for every backend).

    Histograms bucket by bucket (HDR's lossless encoding), issue statistics and
    counters added, and the first reason that is not ``completed`` becomes the
    run's (unless the run already has one). Returns each worker's accumulator.
    """
    parts: list[MetricsAccumulator] = []
    reasons: list[StopReason] = []
    for state in states:
        acc = MetricsAccumulator.from_state(state["accumulator"])
        share.accumulator.merge(acc)
        share.stats.merge(IssueStats.from_state(state["stats"]))
        reasons.append(StopReason(state["stop_reason"]))
        parts.append(acc)
    first = next((r for r in reasons if r is not StopReason.COMPLETED), StopReason.COMPLETED)
    share.book.settle(first)  # unless the run has a reason already
    return parts


def payload_for(share: ShareRun, index: int, count: int, events_path: str | None) -> dict[str, Any]:
    """What worker ``index`` of ``count`` needs to build its share of ``share``'s plan
    (picklable): the spec's arguments and the worker's share, a value the planner made."""
    plan = share.plan
    return {
        "endpoint": share.endpoint,
        "spec": dict(plan.worker_args),
        "share": plan.worker_share(index, count),
        "request_limits_ms": share.request_limits_ms,
        "label": share.label,
        "events_path": events_path,
    }


def merge_event_logs(target: Path, parts: list[Path], meta: dict[str, Any]) -> None:
    """Concatenate the workers' event logs (each in its delivery order) into ``target``."""
    import json

    db = sqlite3.connect(target)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(SCHEMA)
        for part in parts:
            if not part.exists():
                continue
            db.execute("ATTACH DATABASE ? AS part", (str(part),))
            db.execute(
                "INSERT INTO events(req, sample, phase, kind, t_ns, ref_ns, info) "
                "SELECT req, sample, phase, kind, t_ns, ref_ns, info FROM part.events "
                "ORDER BY rowid"
            )
            db.commit()
            db.execute("DETACH DATABASE part")
        db.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [(k, json.dumps(v, default=str)) for k, v in meta.items()],
        )
        db.commit()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    for part in parts:
        for suffix in ("", "-wal", "-shm"):
            Path(str(part) + suffix).unlink(missing_ok=True)
