"""The GPUs' figures in the history: kept by name in each run's metrics (no schema change),
read back, drawn as trends with change points, exported as CSV columns, named by the
history CLI, and compared by the history gate with each figure's stored median. SQLite and
PostgreSQL alike (``target``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpu_figures_sample import figures
from history_workers import LOAD, WORKLOAD, accumulator, run_record, session_record

from pytest_llmperf.history import HistoryStore
from pytest_llmperf.history.cli import metric_and_stat
from pytest_llmperf.history.export import export_csv
from pytest_llmperf.history.gate import HistoryGate
from pytest_llmperf.history.records import RunRecord, gpu_block_values, run_metrics_with_gpu
from pytest_llmperf.history.session import build_session_record
from pytest_llmperf.history.trends import trend_sections, trend_series, unit_of
from pytest_llmperf.reports.session_data import TestEntry
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.regression import RegressionVerdict, Thresholds

TEST = "t::a"


def with_gpu(power: float, tokens: float = 4000.0) -> RunRecord:
    plain = run_record(TEST, 50.0)
    run = {"gpu": figures(power=power, output_tokens=tokens).to_dict()}
    return replace(plain, metrics=run_metrics_with_gpu(plain.metrics, run))


def test_a_runs_figures_are_kept_by_name_and_read_back(target: str) -> None:
    gpu = figures().to_dict()
    entry = TestEntry(
        TEST, "passed", runs=[{"label": "run0", "gpu": gpu}], states=[accumulator(50.0).to_state()]
    )
    record = build_session_record([entry], endpoint={}, options={}, started_at="2026-01-01")
    kept = gpu_block_values(record.runs[0].metrics)
    assert kept == {
        "gpu.power_w.mean": 500.0,
        "gpu.power_w.max": 580.0,
        "gpu.energy_j": 1000.0,
        "gpu.memory_used_mb.max": 41000.0,
        "gpu.util": 0.6,
        "gpu.temperature_c.max": 65.0,
        "energy_per_output_token_j": 0.25,
    }
    plain = TestEntry(TEST, "passed", runs=[{"label": "run0"}], states=[{}])
    none = build_session_record([plain], endpoint={}, options={}, started_at="x").runs[0]
    assert gpu_block_values(none.metrics) is None
    with HistoryStore.open(target) as store:
        store.append_session(replace(record, runs=[*record.runs, run_record(TEST, 50.0)]))
        stored, without = store.runs()
    assert stored.value("energy_per_output_token_j") == 0.25
    assert stored.value("gpu.power_w.mean", "value") == 500.0
    assert without.value("energy_per_output_token_j") is None


def test_the_figures_have_trends_change_points_and_csv_columns(target: str) -> None:
    powers = [300.0, 302.0, 298.0, 301.0, 299.0, 300.0, 301.0, 360.0, 362.0, 358.0, 361.0, 360.0]
    with HistoryStore.open(target) as store:
        for i, power in enumerate(powers):
            store.append_session(session_record(f"main@{i}", [with_gpu(power)]))
        store.append_session(session_record("no-gpu", [run_record(TEST, 50.0)]))
        (series,) = trend_series(store, TEST, "gpu.power_w.mean", "value")
        report: dict[str, Any] = {
            "nodeid": TEST,
            "runs": [{"label": "run0", "load": LOAD, "workload": WORKLOAD, "metrics": {},
                      "gpu": figures(power=350.0).to_dict()}],
        }  # fmt: skip
        sections = trend_sections(store, [report], {"model": "sim-model", "api": "chat"})
        header, *rows = export_csv(store).splitlines()
    assert [p.value for p in series.points] == [2 * p - 100 for p in powers]  # no-GPU run out
    assert [cp.index for cp in series.change_points] == [7]
    assert series.unit == "W" and unit_of("energy_per_output_token_j") == "J"
    drawn = {s.metric: s for s in sections[TEST][0].series}
    assert drawn["gpu.power_w.mean"].points[-1].value == 600.0  # this run, marked
    assert drawn["energy_per_output_token_j"].current == len(powers)
    columns = dict(zip(header.split(","), rows[0].split(","), strict=True))
    assert columns["gpu.power_w.mean"] == "500.0"
    assert columns["energy_per_output_token_j"] == "0.25"  # 1000 J over 4000 tokens
    assert metric_and_stat("gpu.power_w.mean", None) == ("gpu.power_w.mean", "value")


def test_the_history_gate_compares_a_named_figure_with_the_stored_median(target: str) -> None:
    with HistoryStore.open(target) as store:
        for power in (300.0, 310.0, 400.0):  # power_w.mean 500, 520, 700: median 520
            store.append_session(session_record("main", [with_gpu(power)]))
    gate = HistoryGate.open(target, 3)

    def compare(power: float) -> dict[str, Any]:
        result = RunResult(workload=dict(WORKLOAD), load=dict(LOAD), endpoint={},
                           accumulator=accumulator(50.0), label="run0",
                           gpu=figures(power=power))  # fmt: skip
        checks = gate.compare(
            TEST,
            [result],
            endpoint={"model": "sim-model", "api": "chat"},
            thresholds=Thresholds.parse("gpu.power_w.mean=5%"),
        )
        return {c.name: c for c in checks}

    same, hotter = compare(312.0), compare(350.0)
    assert (same["gpu.power_w.mean"].baseline, same["gpu.power_w.mean"].current) == (520.0, 524.0)
    assert same["gpu.power_w.mean"].verdict is RegressionVerdict.UNCHANGED
    assert hotter["gpu.power_w.mean"].verdict is RegressionVerdict.REGRESSED
    assert "energy_per_output_token_j" not in hotter  # not named: not compared
