"""The server process in the history (schema 5): each run's startup and resource values
stored, read back, migrated from version 4, drawn as trends with change points, exported,
and compared by the history gate. SQLite and PostgreSQL alike (``target``)."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from history_workers import KEY, LOAD, WORKLOAD, accumulator, run_record, session_record

from pytest_llmperf.history import SCHEMA_VERSION, HistoryStore
from pytest_llmperf.history.backends import Query, open_database
from pytest_llmperf.history.cli import metric_and_stat
from pytest_llmperf.history.export import export_csv
from pytest_llmperf.history.gate import HistoryGate
from pytest_llmperf.history.records import process_values
from pytest_llmperf.history.schema import migrations
from pytest_llmperf.history.session import build_session_record
from pytest_llmperf.history.trends import detect_command, trend_sections, trend_series
from pytest_llmperf.reports.session_data import TestEntry
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.regression import RegressionVerdict

TEST = "t::a"
BLOCK: dict[str, Any] = {
    "name": "vllm",
    "cmd": "vllm serve m --api-key ***",
    "pid": 1234,
    "log": "/tmp/vllm-1.log",
    "startup": {"ready_s": 41.2, "first_token_s": 41.9},
    "resources": {"rss_max_mb": 830.1, "rss_growth_mb": 8.5, "cpu_s": 12.3,
                  "cpu_ms_per_output_token": 1.9, "gpu_mem_max_mb": None, "gpu_note": "no GPU"},
    "exit": None,
}  # fmt: skip


def with_process(ready: float, rss: float = 830.0) -> Any:
    block = copy.deepcopy(BLOCK)
    block["startup"]["ready_s"] = ready
    block["resources"]["rss_max_mb"] = rss
    return replace(run_record(TEST, 50.0), process=process_values(block))


def test_a_runs_values_are_stored_and_read_back(target: str) -> None:
    died = {**BLOCK, "exit": {"signal": 9, "message": "server exited with signal 9 at 3.0 s"}}
    entry = TestEntry(TEST, "failed", runs=[{"label": "run0", "server_process": died}],
                      states=[accumulator(50.0).to_state()])  # fmt: skip
    record = build_session_record([entry], endpoint={}, options={}, started_at="2026-01-01")
    assert record.runs[0].process == {
        "name": "vllm",
        "startup.ready_s": 41.2,
        "startup.first_token_s": 41.9,
        "server.rss_max_mb": 830.1,
        "server.rss_growth_mb": 8.5,
        "server.cpu_s": 12.3,
        "server.cpu_ms_per_output_token": 1.9,
        "exit": "server exited with signal 9 at 3.0 s",
    }
    plain = TestEntry(TEST, "passed", runs=[{"label": "run0"}], states=[{}])
    assert (
        build_session_record([plain], endpoint={}, options={}, started_at="x").runs[0].process
        is None
    )
    with HistoryStore.open(target) as store:
        store.append_session(replace(record, runs=[*record.runs, run_record(TEST, 50.0)]))
        stored, without = store.runs()
    assert SCHEMA_VERSION == 5
    assert stored.process == record.runs[0].process and without.process is None
    assert stored.value("startup.ready_s") == 41.2 and without.value("startup.ready_s") is None
    assert stored.value("server.gpu_mem_max_mb") is None  # not measured: not stored


def test_a_version_4_store_is_migrated_its_runs_without_values(target: str) -> None:
    db = open_database(target)

    def make_v4(q: Query) -> None:
        for version in (1, 2, 3, 4):
            for statement in migrations(db.dialect)[version]:
                q(statement, ())
        q("UPDATE schema_version SET version = 4", ())

    db.transact(make_v4)
    db.close()
    with HistoryStore.open(target) as store:
        assert store.migrated_from == 4
        store.append_session(session_record("new", [with_process(40.0)]))
        (run,) = store.runs()
        assert run.value("startup.ready_s") == 40.0


def test_startup_and_memory_have_trends_and_change_points(target: str) -> None:
    readies = [40.0, 41.0, 39.5, 40.5, 40.2, 39.8, 40.1, 60.0, 61.0, 59.5, 60.5, 60.2]
    with HistoryStore.open(target) as store:
        for i, ready in enumerate(readies):
            store.append_session(session_record(f"main@{i}", [with_process(ready, 800.0 + i)]))
        store.append_session(session_record("url", [run_record(TEST, 50.0)]))  # no server
        (ready,) = trend_series(store, TEST, "startup.ready_s", "value")
        (rss,) = trend_series(store, TEST, "server.rss_max_mb", "value")
        text = detect_command(store, metric="startup.ready_s", stat="value")
        report = {"nodeid": TEST, "runs": [{"label": "run0", "load": LOAD, "workload": WORKLOAD,
                                            "metrics": {}, "server_process": BLOCK}]}  # fmt: skip
        sections = trend_sections(store, [report], {"model": "sim-model", "api": "chat"})
    assert [p.value for p in ready.points] == readies  # the run without a server left out
    assert [cp.index for cp in ready.change_points] == [7]
    assert (ready.unit, ready.title, rss.unit) == ("s", "startup.ready_s", "MB")
    assert f"{TEST} [key {KEY}] startup.ready_s: 1 change point in 12 runs" in text
    assert "40.2 s → 60.2 s (+50.0%)" in text
    drawn = {s.metric: s for s in sections[TEST][0].series}
    assert drawn["startup.ready_s"].points[-1].value == 41.2  # this run, marked
    assert drawn["startup.ready_s"].current == len(readies)
    assert metric_and_stat("server.rss_growth_mb", None) == ("server.rss_growth_mb", "value")


def test_the_csv_export_has_a_column_per_stored_value(target: str) -> None:
    with HistoryStore.open(target) as store:
        store.append_session(session_record("a", [with_process(40.0)]))
        header, row = export_csv(store).splitlines()
    columns = dict(zip(header.split(","), row.split(","), strict=True))
    assert columns["startup.ready_s"] == "40.0" and columns["server.rss_max_mb"] == "830.0"


@pytest.mark.parametrize("current", [45.0, 90.0])
def test_the_history_gate_compares_startup_with_the_stored_median(
    target: str, current: float
) -> None:
    with HistoryStore.open(target) as store:
        for ready in (40.0, 44.0, 90.0):  # median 44
            store.append_session(session_record("main", [with_process(ready)]))
    result = RunResult(workload=dict(WORKLOAD), load=dict(LOAD), endpoint={},
                       accumulator=accumulator(50.0), label="run0",
                       server_process={"startup": {"ready_s": current}})  # fmt: skip
    gate = HistoryGate.open(target, 3)
    checks = gate.compare(TEST, [result], endpoint={"model": "sim-model", "api": "chat"})
    (ready,) = [c for c in checks if c.metric == "startup.ready_s"]
    assert ready.baseline == 44.0 and ready.current == current
    expected = RegressionVerdict.REGRESSED if current == 90.0 else RegressionVerdict.UNCHANGED
    assert ready.verdict is expected
