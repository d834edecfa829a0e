"""EventRecorder: every request's events, written to SQLite off the hot path.

The load generator hands each finished :class:`RequestRecord` to
:meth:`EventRecorder.record` — one ``SimpleQueue.put``, nothing else on the
event loop — and a background thread turns it into event rows and writes
them to an SQLite database in WAL mode. The rows are the request's events
with the ``time.monotonic_ns()`` instants the client took where it read the
socket:

==============  ==========================  ===================================
kind            ``t_ns``                     ``ref_ns`` / ``info``
==============  ==========================  ===================================
``issued``      ``t_send`` (request sent)    ``t_sched`` (planned send)
``first_chunk`` first token event
``chunk``       each later token event
``complete``    end of the response          JSON: tokens, finish reason, status, t_out
``error``       when the failure was seen    JSON: category, detail, tokens so far
==============  ==========================  ===================================

A request sent once more on a new connection (docs/measurement.md,
"Connections") has ``retries`` and ``resent`` (the second write's instant) in
the JSON of its ``complete`` or ``error`` row; its ``issued`` row is the first
write. A request whose response carried the server's own timings
(:mod:`pytest_llmperf.client.server_timing`) has them under ``server`` in the
same JSON, in milliseconds: ``queue_ms``, ``ttft_ms``, ``decode_ms``,
``itl_ms``, ``spec_accepted``, ``spec_draft`` (each only where the server gave
it), e.g. ``json_extract(info, '$.server.ttft_ms')``. A request that named a
served model (``adapters=``) has it as ``model``; a checked or greedy output has
``output``: ``checked``, ``invalid``, ``detail``, ``digest``, ``marks`` (each only
where set), so a replay gives the same per-model results, validity and outputs. A
request of a conversation or a turn has ``conv``: ``n``, ``turn``, ``agent``,
``think_ns``, ``replica`` (:func:`conversation_info`), so a replay gives the same
turn and conversation figures. A
completed reply with no visible text has ``blank`` (1) in its ``complete`` row's JSON.

``phase`` is 0 for warm-up requests and 1 for the tracked performance phase.
The ``meta`` table holds the run's description (JSON). Rows are appended in
the order the requests finished, which is the order the accumulator saw
them, so :func:`pytest_llmperf.results.event_log.analyse_event_log` replays a
run into exactly the same metrics.

Writing is batched (at most ``_BATCH`` records per transaction) so the
writer thread holds the GIL only in short slices and the event loop's
timing is not disturbed.
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
from pathlib import Path
from typing import Any

from pytest_llmperf.client.records import RequestRecord

__all__ = [
    "EVENT_KINDS",
    "SCHEMA",
    "EventRecorder",
    "conversation_info",
    "event_rows",
    "output_info",
    "server_timing_info",
]

EVENT_KINDS = ("issued", "first_chunk", "chunk", "complete", "error")
SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    req INTEGER NOT NULL,      -- the request's position in the run (0-based)
    sample INTEGER NOT NULL,   -- the workload sample it sent
    phase INTEGER NOT NULL,    -- 0 warm-up, 1 performance (tracked)
    kind TEXT NOT NULL,        -- issued | first_chunk | chunk | complete | error
    t_ns INTEGER NOT NULL,     -- time.monotonic_ns() in the process that read the socket
    ref_ns INTEGER,            -- issued: the planned send time t_sched
    info TEXT                  -- complete/error: JSON details
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_BATCH = 64
_STOP = object()


class EventRecorder:
    """Writes request events to ``path`` (SQLite, WAL) from a background thread.

    Use as a context manager or call :meth:`close`; :meth:`record` never
    blocks (the queue is unbounded: SQLite's insert rate is far above any
    request rate a single client reaches).
    """

    def __init__(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.recorded = 0
        self.failed: BaseException | None = None
        db = sqlite3.connect(self.path, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(SCHEMA)
        db.commit()
        self._db = db
        if meta:
            self._write_meta(meta)
        self._thread = threading.Thread(target=self._write_loop, name="llmperf-events", daemon=True)
        self._thread.start()

    # -- hot path ---------------------------------------------------------------

    def record(self, record: RequestRecord, position: int = -1) -> None:
        """Queue a finished request (the record must not change afterwards)."""
        self._queue.put((record, position))

    # -- control ----------------------------------------------------------------

    def set_meta(self, meta: dict[str, Any]) -> None:
        """Store run-level facts (JSON values) in the ``meta`` table (queued in order)."""
        self._queue.put(("meta", dict(meta)))

    def flush(self, timeout: float | None = 30.0) -> None:
        """Block until everything queued so far is on disk."""
        done = threading.Event()
        self._queue.put(("flush", done))
        done.wait(timeout)

    def close(self) -> None:
        """Write what is queued, stop the thread, checkpoint the WAL into the database."""
        if not self._thread.is_alive():
            return
        self._queue.put(_STOP)
        self._thread.join()
        try:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._db.close()

    def __enter__(self) -> EventRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writer thread ----------------------------------------------------------

    def _write_loop(self) -> None:
        q = self._queue
        stop = False
        while not stop:
            item = q.get()
            batch: list[tuple[RequestRecord, int]] = []
            while True:
                if item is _STOP:
                    stop = True
                elif isinstance(item, tuple) and item[0] == "meta":
                    self._write_rows(batch)
                    batch = []
                    self._write_meta(item[1])
                elif isinstance(item, tuple) and item[0] == "flush":
                    self._write_rows(batch)
                    batch = []
                    item[1].set()
                else:
                    batch.append(item)
                    if len(batch) >= _BATCH:
                        self._write_rows(batch)
                        batch = []
                if stop:
                    break
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    break
            self._write_rows(batch)

    def _write_meta(self, meta: dict[str, Any]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [(k, json.dumps(v, default=str)) for k, v in meta.items()],
        )
        self._db.commit()

    def _write_rows(self, batch: list[tuple[RequestRecord, int]]) -> None:
        if not batch:
            return
        rows: list[tuple[Any, ...]] = []
        for record, position in batch:
            rows.extend(event_rows(record, position))
        try:
            self._db.executemany(
                "INSERT INTO events(req, sample, phase, kind, t_ns, ref_ns, info) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            self._db.commit()
            self.recorded += len(batch)
        except sqlite3.Error as exc:  # a full disk must not kill the run; report it
            self.failed = exc


def event_rows(record: RequestRecord, position: int) -> list[tuple[Any, ...]]:
    """The event rows of one finished request, in time order."""
    req = position if position >= 0 else record.index
    sample = record.index
    phase = 1 if record.tracked else 0
    rows: list[tuple[Any, ...]] = []
    if record.t_send:
        rows.append((req, sample, phase, "issued", record.t_send, record.t_sched, None))
    else:  # never reached the wire (cancelled before it started)
        rows.append((req, sample, phase, "issued", record.t_sched, record.t_sched, '{"unsent":1}'))
    if record.t_first:
        rows.append((req, sample, phase, "first_chunk", record.t_first, None, None))
        t = record.t_first
        for gap in record.gaps_ns:
            t += gap
            rows.append((req, sample, phase, "chunk", t, None, None))
    info: dict[str, Any] = {"events": record.token_events}
    if record.t_out:
        info["t_out"] = record.t_out
    if record.reasoning_events:
        info["reasoning_events"] = record.reasoning_events
    if record.usage_reasoning_tokens is not None:
        info["reasoning"] = record.usage_reasoning_tokens
    if record.input_requested or record.output_requested:
        info["requested"] = [record.input_requested, record.output_requested]
    if record.usage_completion_tokens is not None:
        info["out"] = record.usage_completion_tokens
    if record.usage_prompt_tokens is not None:
        info["in"] = record.usage_prompt_tokens
    if record.usage_cached_tokens is not None:
        info["cached"] = record.usage_cached_tokens
    if record.finish_reason:
        info["finish"] = record.finish_reason
    if record.blank:  # completed with no visible text (generated but blank)
        info["blank"] = 1
    if record.status is not None:
        info["status"] = record.status
    if record.category:
        info["category"] = record.category
    if record.connection_retries:  # sent once more on a new connection
        info["retries"] = record.connection_retries
        if record.t_resend:
            info["resent"] = record.t_resend
    server = server_timing_info(record)
    if server:
        info["server"] = server
    if record.model:  # llm_workload(adapters=): the served model it named
        info["model"] = record.model
    if record.stage >= 0:  # planned in a load stage: its index (exports, replays)
        info["stage"] = record.stage
    if record.cancelled:  # abandoned on purpose (llm_load(cancel=)): neither ok nor failed
        info["cancelled"] = 1
    if record.output_checked or record.output_digest:
        info.update(output_info(record))
    if record.conversation >= 0 or record.turn >= 0 or record.replica:
        info["conv"] = conversation_info(record)
    end = record.t_end or record.t_last or record.t_send or record.t_sched
    if record.error is None:
        rows.append((req, sample, phase, "complete", end, None, json.dumps(info)))
    else:
        info["error"] = record.error
        if record.error_detail:
            info["detail"] = record.error_detail
        rows.append((req, sample, phase, "error", end, None, json.dumps(info)))
    return rows


def conversation_info(record: RequestRecord) -> dict[str, Any]:
    """Where a request stood in its conversation, as the event row stores it
    (``info.conv``): ``n`` (the conversation), ``turn``, ``agent`` (the thread),
    ``think_ns`` and ``replica``, each only where set."""
    out: dict[str, Any] = {}
    if record.conversation >= 0:
        out["n"] = record.conversation
    if record.turn >= 0:
        out["turn"] = record.turn
    if record.agent:
        out["agent"] = record.agent
    if record.think_ns:
        out["think_ns"] = record.think_ns
    if record.replica:
        out["replica"] = record.replica
    return out


def output_info(record: RequestRecord) -> dict[str, Any]:
    """A checked or greedy output as the event row stores it (``info.output``):
    ``checked``, ``invalid``, ``detail``, ``digest``, ``marks``, each only when set."""
    found = {
        "checked": record.output_checked,
        "invalid": record.invalid,
        "detail": record.invalid_detail,
        "digest": record.output_digest,
        "marks": record.output_marks,
    }
    return {"output": {k: v for k, v in found.items() if v}}


def server_timing_info(record: RequestRecord) -> dict[str, float | int]:
    """The server's own timings of ``record`` as stored in its event row (empty: none)."""
    out: dict[str, float | int] = {}
    for key, value in (
        ("queue_ms", record.server_queue_ms),
        ("ttft_ms", record.server_ttft_ms),
        ("decode_ms", record.server_decode_ms),
        ("itl_ms", record.server_mean_itl_ms),
        ("spec_accepted", record.server_spec_accepted),
        ("spec_draft", record.server_spec_draft),
    ):
        if value is not None:
            out[key] = value
    return out
