"""The live progress line: fits 80 columns, shows the ETA and the stage, a plain line with req/s."""

from __future__ import annotations

import pytest

from pytest_llmperf.reports.live import format_seconds, plain_line, status_line
from pytest_llmperf.results.progress import Phase, ProgressSnapshot

LONG_TEST = "tests/perf/very/deep/suite/test_chat_latency.py::test_poisson_under_load[llama-8b]"


def snap(**kw: object) -> ProgressSnapshot:
    fields: dict[str, object] = {
        "label": "run0",
        "phase": Phase.MEASURE,
        "elapsed_s": 75.0,
        "done": 212,
        "planned": 500,
        "rate": 24.94,
        "in_flight": 9,
        "errors": 3,
        "eta_s": 11.6,
    }
    fields.update(kw)
    return ProgressSnapshot(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("width", [80, 100, 60, 40])
def test_the_status_line_fits_the_terminal_and_keeps_the_counts(width: int) -> None:
    line = status_line(snap(), width, test=LONG_TEST)
    assert len(line) <= width - 1, line
    assert "212/500" in line and "24.9 req/s" in line
    if width >= 80:  # every field at 80 columns
        assert "9 in flight" in line and "3 err" in line and "1m15s ETA 12s" in line


def test_at_80_columns_a_long_node_id_becomes_its_test_name_or_tail() -> None:
    line = status_line(snap(), 120, test="test_chat.py::test_poisson")
    assert line.startswith("llmperf test_chat.py::test_poisson  measure 212/500  24.9 req/s")
    line = status_line(snap(), 80, test="test_chat.py::test_poisson")
    assert line == "test_poisson  measure 212/500  24.9 req/s  9 in flight  3 err  1m15s ETA 12s"
    line = status_line(snap(), 80, test=LONG_TEST)
    assert line.startswith("...ad[llama-8b]  measure 212/500  24.9 req/s  9 in flight")
    assert len(line) == 79


def test_a_plain_runN_label_is_left_out_and_a_procedure_s_label_shown() -> None:
    assert "[run0]" not in status_line(snap(), 120, test="t.py::test_a")
    line = status_line(snap(label="sweep rate=8"), 120, test="t.py::test_a")
    assert "t.py::test_a [sweep rate=8]  measure" in line
    line = status_line(snap(label="sweep rate=8"), 80, test="t.py::test_poisson")
    assert line.startswith("[sweep rate=8]  measure 212/500  24.9 req/s")  # the label outlasts
    assert plain_line(snap(label="sweep rate=8"), test="t.py::test_a").startswith(
        "llmperf progress: t.py::test_a [sweep rate=8]: measure 212/500, 24.9 req/s"
    )


def test_eta_and_elapsed_are_formatted_and_an_unknown_eta_is_left_out() -> None:
    assert [format_seconds(s) for s in (0, 7.4, 59.6, 185, 3725, -3)] == [
        "0s",
        "7s",
        "1m00s",
        "3m05s",
        "1h02m",
        "0s",
    ]
    assert "ETA 12s" in plain_line(snap())
    drained = plain_line(snap(phase=Phase.DRAIN, eta_s=None, done=498))
    assert "drain 498/500" in drained and "ETA" not in drained


def test_stages_show_which_stage_and_a_timed_run_shows_its_count() -> None:
    line = status_line(snap(stage=2, stages=3, planned=None, done=40), 80)
    assert "stage 2/3 40 done" in line
    assert "warm-up 5/20" in plain_line(snap(phase=Phase.WARMUP, done=5, planned=20))
    assert "starting" in plain_line(snap(phase=Phase.STARTING, done=0, rate=0.0))


def test_worker_runs_show_no_counts_they_cannot_see() -> None:
    remote = snap(phase=Phase.REMOTE, workers=4, done=0, rate=None, in_flight=0, eta_s=20)
    line = status_line(remote, 80, test="t.py::test_a")
    assert "running on 4 workers" in line and "ETA 20s" in line
    assert "in flight" not in line and "req/s" not in line
    plain = plain_line(remote, test="t.py::test_a")
    assert "req/s at the end (issued by 4 workers)" in plain and "in flight" not in plain
    assert "running on 1 worker " in status_line(snap(phase=Phase.REMOTE, workers=1), 80)


def test_blank_replies_show_beside_the_errors_once_there_are_some() -> None:
    """Completed replies with no visible text (generated but blank) are counted live as
    errors are: shown once there is one, the first field to go for width after errors."""
    assert "blank" not in status_line(snap(), 120) and "blank" not in plain_line(snap())
    line = status_line(snap(blank=7), 120, test="t.py::test_a")
    assert "3 err  7 blank  1m15s" in line
    assert ", 3 errors, 7 blank, elapsed" in plain_line(snap(blank=7))
    narrow = status_line(snap(blank=7), 60, test="t.py::test_a")
    assert len(narrow) <= 59 and "212/500" in narrow


def test_invalid_outputs_show_beside_the_errors_once_there_are_some() -> None:
    """Completed requests whose output failed its check (schema, tool call) are counted
    live as errors and blank replies are: shown once there is one."""
    assert "invalid" not in status_line(snap(), 120) and "invalid" not in plain_line(snap())
    line = status_line(snap(invalid=4, blank=7), 120, test="t.py::test_a")
    assert "3 err  4 invalid  7 blank  1m15s" in line
    assert ", 3 errors, 4 invalid, 7 blank, elapsed" in plain_line(snap(invalid=4, blank=7))
    assert ", 3 errors, 4 invalid, elapsed" in plain_line(snap(invalid=4))
    narrow = status_line(snap(invalid=4, blank=7), 60, test="t.py::test_a")
    assert len(narrow) <= 59 and "212/500" in narrow
