"""The GPUs' figures against a baseline's: compared only where --llm-baseline-threshold
names them, one value per side, higher is worse (gpu.util too); a side without the value
is an inconclusive check saying why; a baseline file keeps the figures by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gpu_figures_sample import figures

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.gpu.figures import GpuFigures
from pytest_llmperf.reports.baseline import build_baseline, load_baseline, write_baseline
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.gpu_regression import compare_gpu
from pytest_llmperf.slo.regression import RegressionVerdict, Thresholds
from pytest_llmperf.specs.gpu_names import GPU_METRICS, gpu_values

REGRESSED, IMPROVED = RegressionVerdict.REGRESSED, RegressionVerdict.IMPROVED
UNCHANGED, INCONCLUSIVE = RegressionVerdict.UNCHANGED, RegressionVerdict.INCONCLUSIVE
NAMED = Thresholds.parse("energy_per_output_token_j=10%,gpu.power_w.mean=5%,gpu.util=20%")


def test_thresholds_name_gpu_figures_apart_from_the_client_statistics() -> None:
    assert NAMED.gpu_metrics() == ["energy_per_output_token_j", "gpu.power_w.mean", "gpu.util"]
    assert NAMED.overrides["gpu.power_w.mean"] == 0.05
    assert ("gpu", "power_w.mean") not in NAMED.stats()  # not a client latency
    every = ",".join(f"{name}=3%" for name in GPU_METRICS)
    assert Thresholds.parse(every).gpu_metrics() == list(GPU_METRICS)
    assert Thresholds.parse("10%").gpu_metrics() == []  # the bare threshold: none compared
    with pytest.raises(LlmPerfUsageError) as info:
        Thresholds.parse("gpu.power=5%")
    text = str(info.value)
    assert "--llm-baseline-threshold" in text and "unknown GPU metric 'gpu.power'" in text
    assert re.search(r"known: gpu\.power_w\.mean, .*energy_per_output_token_j", text)


def test_higher_is_worse_for_each_named_figure() -> None:
    base = gpu_values(figures().to_dict())  # 500 W, 0.25 J/token, util 0.6
    hotter = figures(power=330.0)  # 560 W: +12% power, +12% energy per token
    hotter.devices[0].util_mean = 0.9  # util 0.8: +33%
    checks = {c.name: c for c in compare_gpu(base, gpu_values(hotter.to_dict()), NAMED, run="r")}
    assert set(checks) == {"energy_per_output_token_j", "gpu.power_w.mean", "gpu.util"}
    power = checks["gpu.power_w.mean"]
    assert (power.verdict, power.baseline, power.current, power.change) == (
        REGRESSED, 500.0, 560.0, 0.12,
    )  # fmt: skip
    assert (power.p_value, power.run, power.threshold, power.samples) == (None, "r", 0.05, (1, 1))
    assert checks["energy_per_output_token_j"].verdict is REGRESSED
    assert checks["gpu.util"].verdict is REGRESSED
    back = {c.name: c.verdict for c in compare_gpu(gpu_values(hotter.to_dict()), base, NAMED)}
    assert back == {n: IMPROVED for n in checks}
    same = compare_gpu(base, gpu_values(figures(power=305.0).to_dict()), NAMED)
    assert {c.name: c.verdict for c in same}["gpu.power_w.mean"] is UNCHANGED  # +2% < 5%


def test_a_side_without_the_figure_is_inconclusive_saying_why() -> None:
    base = gpu_values(figures().to_dict())
    no_gpu = {c.name: c for c in compare_gpu(base, None, NAMED)}
    assert no_gpu["gpu.power_w.mean"].verdict is INCONCLUSIVE
    assert no_gpu["gpu.power_w.mean"].reason == "this run has no gpu.power_w.mean (no GPU read)"
    no_tokens = gpu_values(figures(output_tokens=None).to_dict())
    found = {c.name: c for c in compare_gpu(no_tokens, base, NAMED)}
    assert found["energy_per_output_token_j"].reason == (
        "the baseline has no energy_per_output_token_j (not measured)"
    )
    assert found["gpu.power_w.mean"].verdict is UNCHANGED
    zero = compare_gpu({"gpu.util": 0.0}, {"gpu.util": 0.3}, Thresholds.parse("gpu.util=5%"))
    assert zero[0].verdict is INCONCLUSIVE and zero[0].note_only


def _result(gpu: GpuFigures | None) -> RunResult:
    acc = MetricsAccumulator()
    for i in range(20):
        record = RequestRecord(
            index=i, t_sched=i * 10**7, t_send=i * 10**7, t_first=i * 10**7 + 10**7
        )
        record.t_last = record.t_end = record.t_first + 10**7
        record.token_events = 2
        record.gaps_ns = [10**7]
        acc.add(record)
    return RunResult(
        workload={"name": "synthetic"},
        load={"pattern": "concurrency", "concurrency": 1},
        endpoint={},
        accumulator=acc,
        label="run0",
        gpu=gpu,
    )


def test_a_baseline_file_keeps_the_figures_and_the_comparison_reads_them(
    tmp_path: Path,
) -> None:
    endpoint = {"url": "http://127.0.0.1:1/v1", "model": "m", "api": "chat"}
    saved = _result(figures())
    data = SessionData()
    entry = {
        "endpoint": endpoint,
        "runs": [saved.to_dict()],
        "states": [saved.accumulator.to_state()],
    }
    data.add("t.py::test_a", "passed", entry)
    path = write_baseline(tmp_path / "b.json", build_baseline(data, endpoint=endpoint, options={}))
    stored = load_baseline(path).run("t.py::test_a", "run0")
    assert stored["gpu"]["energy_per_output_token_j"] == 0.25  # by name, without the series
    assert "devices" not in stored["gpu"]
    checks = load_baseline(path).compare(
        "t.py::test_a", [_result(figures(power=400.0))], endpoint=endpoint, thresholds=NAMED
    )
    power = next(c for c in checks if c.name == "gpu.power_w.mean")
    assert (power.verdict, power.baseline, power.current) == (REGRESSED, 500.0, 700.0)
    assert power.compared_with.startswith(f"baseline {path}")
    unnamed = load_baseline(path).compare(
        "t.py::test_a", [_result(None)], endpoint=endpoint, thresholds=Thresholds.parse("10%")
    )
    assert not [c for c in unnamed if c.metric in GPU_METRICS]
