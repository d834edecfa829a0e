"""What the export reads back from an event log: the stage a request was planned in and
whether it was abandoned on purpose (``llm_load(cancel=)``), written by the recorder so
that an export (and a replay) sees them as the live run did; and the values each request
exports, with the report's definitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.export.otel_values import first_planned_ns, request_values
from pytest_llmperf.results.event_log import read_records
from pytest_llmperf.results.recorder import EventRecorder

BASE = 1_000_000_000_000


def _record(i: int, *, stage: int = -1, cancelled: bool = False) -> RequestRecord:
    r = RequestRecord(index=i, t_sched=BASE + i * 10_000_000, tracked=True)
    r.t_send = r.t_sched + 1_000
    r.t_first = r.t_send + 20_000_000
    r.gaps_ns = [5_000_000, 5_000_000, 5_000_000]
    r.t_last = r.t_first + 15_000_000
    r.t_end = r.t_last + 10_000
    r.token_events = 4
    r.usage_completion_tokens = 4
    r.usage_prompt_tokens = 16
    r.stage = stage
    r.cancelled = cancelled
    return r


def test_stage_and_cancel_travel_through_the_event_log(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    failed = _record(3)
    failed.t_first = failed.t_last = failed.t_end = 0  # failed before any token
    failed.gaps_ns, failed.token_events = [], 0
    failed.fail(ErrorKind.HTTP, "HTTP 500: boom", now=failed.t_send + 2_000_000)
    with EventRecorder(path, meta={}) as rec:
        for k, r in enumerate(
            [_record(1, stage=0), _record(0, stage=1), _record(2, cancelled=True), failed]
        ):
            rec.record(r, k)
    back = list(read_records(path))
    assert [(r.stage, r.cancelled) for r in back] == [
        (0, False),
        (1, False),
        (-1, True),
        (-1, False),
    ]
    # the run's first planned send, whatever the order the requests finished in
    assert first_planned_ns(path) == BASE
    values = [v for _, v in request_values(path)]
    assert len(values) == 3  # the cancelled request is neither completed nor failed
    ok = values[0]
    assert ok.stage == 0
    assert ok.duration_s == pytest.approx(0.020_001 + 0.015)  # planned send to last byte
    assert ok.ttft_s == pytest.approx(0.020_001)
    assert ok.tpot_s == pytest.approx(0.005)  # (last - first) / (4 - 1)
    assert (ok.input_tokens, ok.output_tokens, ok.error_type) == (16, 4, None)
    bad = values[2]
    assert bad.error_type == "http_error"
    assert bad.ttft_s is None and bad.tpot_s is None
    assert bad.duration_s == pytest.approx(0.002_001)  # until the failure was seen
