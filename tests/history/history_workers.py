"""Helpers for the history tests: made-up sessions, an appender run in child processes,
and ways to spoil a store as another program or version would."""

from __future__ import annotations

import socket

from pytest_llmperf.history.backends import open_database
from pytest_llmperf.history.records import RunRecord, SessionRecord, comparison_key
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.results.accumulator import MetricsAccumulator

LOAD = {"pattern": "concurrency", "concurrency": 8}
WORKLOAD = {"name": "synthetic", "input_tokens": 16, "output_tokens": 4, "requests": 20}
KEY = comparison_key("sim-model", "chat", LOAD, WORKLOAD)


def accumulator(ttft_ms: float, n: int = 50) -> MetricsAccumulator:
    """An accumulator whose ttft samples sit around ``ttft_ms``."""
    acc = MetricsAccumulator()
    for i in range(n):
        acc.histograms["ttft"].record_ns(int(ttft_ms * 1e6 * (0.9 + 0.2 * i / n)))
    acc.issued = acc.completed = n
    return acc


def run_record(test: str, ttft_ms: float, *, label: str = "run0", key: str = KEY) -> RunRecord:
    acc = accumulator(ttft_ms)
    return RunRecord(
        test=test,
        label=label,
        outcome="passed",
        key=key,
        counts=acc.counts(),
        metrics=acc.summary(),
        state=acc.to_state(),
        load=dict(LOAD),
        workload=dict(WORKLOAD),
    )


def session_record(tag: str, runs: list[RunRecord], *, started_at: str = "") -> SessionRecord:
    return SessionRecord(
        started_at=started_at or "2026-01-01T00:00:00.000+00:00",
        finished_at="2026-01-01T00:01:00.000+00:00",
        tag=tag,
        endpoint={"url": "http://127.0.0.1:8000/v1", "model": "sim-model", "api": "chat"},
        machine={"hostname": "test"},
        options={"scale": 1.0},
        runs=runs,
    )


def append_many(target: str, worker: int, sessions: int) -> None:
    """A child process: open the store (maybe creating it) and append ``sessions`` sessions
    of two runs each, each session tagged ``w{worker}-{i}``."""
    for i in range(sessions):
        store = HistoryStore.open(target)
        try:
            runs = [run_record("t::a", 10.0 + i), run_record("t::b", 20.0 + i)]
            store.append_session(session_record(f"w{worker}-{i}", runs))
        finally:
            store.close()


def execute(target: str, *statements: str) -> None:
    """Run SQL on ``target`` directly (not through the store): to make it foreign, newer
    or older than ours, the way another program or another version would."""
    db = open_database(target)
    try:
        db.transact(lambda q: [q(statement, ()) for statement in statements])
    finally:
        db.close()


# What an inner pytester test runs to make the store foreign mid-session (after the
# configure-time check, before the append): a table of someone else's.
BREAK_STORE = """
def test_zz_someone_else_takes_the_store():
    target = {target!r}
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("CREATE TABLE invoices (id INTEGER)")
    else:
        import sqlite3

        conn = sqlite3.connect(target)
        conn.execute("CREATE TABLE invoices (id INTEGER)")
        conn.commit()
        conn.close()
"""


class Untouchable:
    """A listening 127.0.0.1 socket that no request may reach: the endpoint of a session
    that must stop before any load. :meth:`touched` says whether anything connected."""

    def __enter__(self) -> Untouchable:
        self._sock = socket.create_server(("127.0.0.1", 0), backlog=16)
        self._sock.setblocking(False)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        return self

    def touched(self) -> bool:
        try:
            conn, _ = self._sock.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
