"""Re-analysing a run from its event log (``--llm-events``).

The event log written by :class:`~pytest_llmperf.results.recorder.EventRecorder`
holds every timestamp the metrics are computed from, so a run can be
analysed again later — with other per-request limits for goodput, or by
other tools with plain SQL — without re-running it. :func:`analyse_event_log`
rebuilds each request's :class:`RequestRecord` from its rows and feeds the
same :class:`MetricsAccumulator` the live run used, in the same order, so
the metrics come out identical.

Example, in SQL (TTFT of tracked requests, ms)::

    SELECT (f.t_ns - i.ref_ns) / 1e6 FROM events i JOIN events f USING (req)
    WHERE i.kind = 'issued' AND f.kind = 'first_chunk' AND i.phase = 1;

The server's own timings of a request (where its responses said them) are in
the JSON of its ``complete``/``error`` row, e.g. the engine's prefill, ms::

    SELECT json_extract(info, '$.server.ttft_ms') FROM events WHERE kind = 'complete';
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.results.accumulator import MetricsAccumulator

__all__ = ["analyse_event_log", "read_meta", "read_records"]


def _connect(path: str | Path) -> sqlite3.Connection:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no event log at {p}")
    return sqlite3.connect(f"file:{p}?mode=ro", uri=True)


def read_meta(path: str | Path) -> dict[str, Any]:
    """The run description stored with the events (label, load, workload, ...)."""
    with _connect(path) as db:
        return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}


def read_records(path: str | Path) -> Iterator[RequestRecord]:
    """Each request of the log as a finished record, in the order the run delivered them."""
    db = _connect(path)
    try:
        rows = db.execute(
            "SELECT req, sample, phase, kind, t_ns, ref_ns, info FROM events ORDER BY rowid"
        )
        open_records: dict[int, RequestRecord] = {}
        for req, sample, phase, kind, t_ns, ref_ns, info in rows:
            if kind == "issued":
                record = RequestRecord(index=sample, t_sched=ref_ns, tracked=bool(phase))
                if not (info and json.loads(info).get("unsent")):
                    record.t_send = t_ns
                open_records[req] = record
                continue
            record = open_records[req]
            if kind == "first_chunk":
                record.t_first = record.t_last = t_ns
            elif kind == "chunk":
                record.gaps_ns.append(t_ns - record.t_last)
                record.t_last = t_ns
            else:
                _finish(record, kind, t_ns, json.loads(info or "{}"))
                del open_records[req]
                yield record
    finally:
        db.close()


def _finish(record: RequestRecord, kind: str, t_ns: int, info: Mapping[str, Any]) -> None:
    record.t_end = t_ns
    record.token_events = int(info.get("events", info.get("chunks", 0)))
    record.t_out = int(info.get("t_out", 0))
    record.reasoning_events = int(info.get("reasoning_events", 0))
    record.usage_reasoning_tokens = info.get("reasoning")
    record.input_requested, record.output_requested = info.get("requested", (0, 0))
    record.usage_completion_tokens = info.get("out")
    record.usage_prompt_tokens = info.get("in")
    record.usage_cached_tokens = info.get("cached")
    record.finish_reason = info.get("finish")
    record.blank = bool(info.get("blank"))
    record.status = info.get("status")
    record.category = info.get("category", "")
    record.connection_retries = int(info.get("retries", 0))
    record.t_resend = int(info.get("resent", 0))
    server = info.get("server")
    if server:
        _server_timing(record, server)
    record.model = str(info.get("model", ""))
    record.stage = int(info.get("stage", -1))
    record.cancelled = bool(info.get("cancelled"))
    conv = info.get("conv")
    if conv:  # recorder.conversation_info
        record.conversation = int(conv.get("n", -1))
        record.turn = int(conv.get("turn", -1))
        record.agent = str(conv.get("agent", ""))
        record.think_ns = int(conv.get("think_ns", 0))
        record.replica = str(conv.get("replica", ""))
    output = info.get("output")
    if output:  # recorder.output_info
        record.output_checked = bool(output.get("checked"))
        record.invalid = str(output.get("invalid", ""))
        record.invalid_detail = str(output.get("detail", ""))
        record.output_digest = str(output.get("digest", ""))
        record.output_marks = str(output.get("marks", ""))
    if kind == "error":
        record.error = _error_kind(info.get("error"))
        record.error_detail = info.get("detail", "")


def _server_timing(record: RequestRecord, server: Mapping[str, Any]) -> None:
    """The server's own timings as the event row stores them (``recorder.server_timing_info``)."""
    record.server_queue_ms = server.get("queue_ms")
    record.server_ttft_ms = server.get("ttft_ms")
    record.server_decode_ms = server.get("decode_ms")
    record.server_mean_itl_ms = server.get("itl_ms")
    record.server_spec_accepted = server.get("spec_accepted")
    record.server_spec_draft = server.get("spec_draft")


def _error_kind(name: str | None) -> ErrorKind:
    """The recorded failure category (``client_error`` if none, or one this version lacks)."""
    try:
        return ErrorKind(name) if name is not None else ErrorKind.CLIENT
    except ValueError:
        return ErrorKind.CLIENT


def analyse_event_log(
    path: str | Path, *, request_limits_ms: Mapping[str, float] | None = None
) -> MetricsAccumulator:
    """The run's metrics recomputed from its event log.

    ``request_limits_ms`` (goodput's per-request limits) default to the ones
    the run was recorded with.
    """
    if request_limits_ms is None:
        request_limits_ms = read_meta(path).get("request_limits_ms") or None
    acc = MetricsAccumulator(request_limits_ms=request_limits_ms)
    for record in read_records(path):
        acc.add(record)
    return acc
