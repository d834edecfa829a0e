"""EventRecorder rows and re-analysis: the event log reproduces the run's metrics."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.event_log import analyse_event_log, read_meta, read_records
from pytest_llmperf.results.recorder import EventRecorder, event_rows


def finished(i: int, *, ok: bool = True, tracked: bool = True) -> RequestRecord:
    base = 1_000_000_000 * (i + 1)
    r = RequestRecord(index=i, t_sched=base, tracked=tracked, category="c")
    r.t_send = base + 120_000
    if ok:
        r.t_first = base + 20_000_000 + i * 1000
        gaps = [5_000_000 + 7 * k for k in range(5)]
        r.gaps_ns = gaps
        r.t_last = r.t_first + sum(gaps)
        r.t_end = r.t_last + 50_000
        r.token_events = 6
        r.t_out = r.t_first + gaps[0] if i % 2 else 0  # every other request reasoned first
        r.reasoning_events = 1 if i % 2 else 0
        r.usage_reasoning_tokens = 1 if i % 4 == 1 else None
        r.input_requested, r.output_requested = 16, 8
        r.usage_completion_tokens = 6 + i % 3
        r.usage_prompt_tokens = 16
        r.finish_reason = "length"
        r.status = 200
    else:
        r.t_first = base + 30_000_000
        r.t_last = r.t_first
        r.token_events = 1
        r.fail(ErrorKind.TRUNCATED, "connection closed", now=base + 40_000_000)
    return r


def test_event_rows_are_every_event_in_time_order() -> None:
    rows = event_rows(finished(0), position=7)
    kinds = [row[3] for row in rows]
    assert kinds == ["issued", "first_chunk", *["chunk"] * 5, "complete"]
    times = [row[4] for row in rows]
    assert times == sorted(times)
    assert rows[0][5] == finished(0).t_sched  # issued carries the planned time
    assert {row[0] for row in rows} == {7}


def test_log_is_sqlite_wal_and_replays_to_identical_metrics(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    live = MetricsAccumulator(request_limits_ms={"ttft": 20.5})
    records = [finished(i, ok=i % 7 != 3, tracked=i >= 2) for i in range(60)]
    with EventRecorder(path, meta={"label": "r", "request_limits_ms": {"ttft": 20.5}}) as rec:
        assert rec.path == path
        for pos, record in enumerate(records):
            live.add(record)
            rec.record(record, pos)
        rec.flush()
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    replay = analyse_event_log(path)
    assert live.summary()["ttfo"]["count"] > 0 and live.summary()["reasoning_tokens"] > 0
    assert replay.summary() == live.summary()
    assert replay.token_lengths() == live.token_lengths()
    assert replay.error_samples.to_list() == live.error_samples.to_list() != []
    assert replay.counts() == live.counts()
    assert replay.errors == live.errors == Counter({ErrorKind.TRUNCATED: 9})
    assert replay.good == live.good
    assert read_meta(path)["label"] == "r"
    kinds = Counter(row[0] for row in sqlite3.connect(path).execute("SELECT kind FROM events"))
    assert kinds["issued"] == 60
    assert kinds["complete"] + kinds["error"] == 60
    back = list(read_records(path))
    assert [r.index for r in back] == [r.index for r in records]
    assert back[5].gaps_ns == records[5].gaps_ns


def test_other_goodput_limits_can_be_applied_after_the_run(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    with EventRecorder(path, meta={"request_limits_ms": {}}) as rec:
        for i in range(10):
            rec.record(finished(i), i)
    assert analyse_event_log(path).good == 10
    assert analyse_event_log(path, request_limits_ms={"ttft": 1.0}).good == 0
