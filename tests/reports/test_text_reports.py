"""Text artefacts: JUnit property names, regression tables, the methodology's minimum report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_llmperf.reports.json_report import build_report, write_json_report
from pytest_llmperf.reports.junit import junit_properties, regression_properties, run_properties
from pytest_llmperf.reports.methodology import main, minimum_viable_report
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.table import regression_table
from pytest_llmperf.slo.regression import RegressionCheck
from pytest_llmperf.slo.verdicts import SloVerdict
from pytest_llmperf.svg import Series, bar_chart, line_chart, nice_ticks

REGRESSED = RegressionCheck(
    metric="ttft",
    stat="p50",
    baseline=40.0,
    current=52.0,
    change=0.3,
    threshold=0.1,
    p_value=0.0005,
    verdict="regressed",
    run="run0",
    samples=(1200, 1200),
    test="one-sided bootstrap, 2000 resamples of both HDR histograms, alpha 0.01",
)


def test_junit_properties_carry_each_runs_counts_and_figures() -> None:
    ms = {"p50": 20.74, "p99": 231.5}
    run = {
        "label": "run1",
        "counts": {"issued": 80, "completed": 71, "failed": 7, "cancelled": 2},
        "metrics": {
            "ttft": ms,
            "tpot": {"p50": 3.0485, "p99": None},
            "itl": ms,
            "request_throughput": 171.479128,
            "output_throughput": 1371.833022,
            "error_rate": 0.0875,
            "goodput": 0.9125,
        },
    }
    props = dict(run_properties([run]))
    assert props["llm_run[run1].issued"] == "80" and props["llm_run[run1].failed"] == "7"
    assert props["llm_run[run1].completed"] == "71" and props["llm_run[run1].cancelled"] == "2"
    assert props["llm_run[ttft.p50][run1]"] == "20.7 ms"
    assert props["llm_run[ttft.p99][run1]"] == "231.5 ms"
    assert props["llm_run[tpot.p50][run1]"] == "3.049 ms"
    assert props["llm_run[tpot.p99][run1]"] == "-"  # nothing measured
    assert props["llm_run[request_throughput][run1]"] == "171.48 req/s"
    assert props["llm_run[output_throughput][run1]"] == "1371.83 tok/s"
    assert props["llm_run[error_rate][run1]"] == "8.75%"
    assert props["llm_run[goodput][run1]"] == "91.25%"
    run["counts"] = {"issued": 1, "completed": 1, "failed": 0, "cancelled": 0}
    assert "llm_run[run1].cancelled" not in dict(run_properties([run]))  # said when any


def test_junit_properties_carry_verdict_observed_target_samples() -> None:
    v = SloVerdict("ttft.p99 < 500ms", 612.5, 500.0, "ms", "fail", run="run0", samples=1500)
    props = dict(junit_properties([v]))
    assert props == {
        "llm_slo[ttft.p99 < 500ms][run0].verdict": "fail",
        "llm_slo[ttft.p99 < 500ms][run0].observed": "612.5 ms",
        "llm_slo[ttft.p99 < 500ms][run0].target": "500.0 ms",
        "llm_slo[ttft.p99 < 500ms][run0].samples": "1500",
    }
    base = dict(regression_properties([REGRESSED]))
    assert base["llm_baseline[ttft.p50][run0].verdict"] == "regressed"
    assert base["llm_baseline[ttft.p50][run0].change"] == "+30.0%"


def test_regression_table_shows_baseline_current_change_and_test() -> None:
    text = regression_table([REGRESSED])
    for part in ("ttft.p50", "40.0 ms", "52.0 ms", "+30.0%", "+10%", "REGRESSED", "bootstrap"):
        assert part in text, part


def test_minimum_report_follows_the_drafts_layout(session_data: SessionData) -> None:
    test = session_data.tests["tests/test_chat.py::test_sweep"]
    text = minimum_viable_report(test.runs[0], test.endpoint)
    headings = [
        "=== LLM Benchmark Report (Minimum) ===",
        "System Identification:",
        "- Model: sim-model",
        "- Hardware: not reported",
        "- Software: pytest-llmperf embedded simulator, profile fixed (version 0.1)",
        "- SUT Boundary:",
        "Test Configuration:",
        "- Workload: synthetic",
        "- Load Model: open-loop poisson, 10 req/s",
        "- Request Count: 301 issued, 300 completed, 1 failed",
        "- Test Duration:",
        "Key Results:",
        "- TTFT P50:",
        "- TTFT P99:",
        "- TPOT P50:",
        "- TPOT P99:",
        "- Max Throughput:",
        "- Throughput at P99 TTFT < 500ms:",
        "Notes:",
        "- Guardrail configuration: not reported",
        "=== End Report ===",
    ]
    positions = [text.index(h) for h in headings]
    assert positions == sorted(positions)
    # 300 samples cannot give a p99: the report says so instead of printing a bare number
    assert "(inconclusive: 300 samples, needs >= 1000)" in text


def test_minimum_report_prints_from_a_json_report(
    session_data: SessionData, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = build_report(session_data, endpoint={}, session={})
    path = write_json_report(tmp_path / "r.json", report)
    assert json.loads(path.read_text())["tests"][0]["runs"][0]["minimum_report"]
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("=== LLM Benchmark Report (Minimum) ===") == 4


def test_python_m_methodology_runs_warning_free_and_names_a_bad_report(
    session_data: SessionData, tmp_path: Path
) -> None:
    """``python -m pytest_llmperf.reports.methodology``, a process of its own with every
    warning an error: the package never imports the module it runs (no runpy warning)."""
    path = write_json_report(
        tmp_path / "r.json", build_report(session_data, endpoint={}, session={})
    )
    not_a_report = tmp_path / "other.json"
    not_a_report.write_text("[]")

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-W", "error", "-m", "pytest_llmperf.reports.methodology"]
        return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60)

    done = command(str(path))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.count("=== LLM Benchmark Report (Minimum) ===") == 4
    for bad, words in ((not_a_report, "is no pytest-llmperf JSON report"), (tmp_path, "cannot")):
        failed = command(str(bad))
        assert failed.returncode == 2 and failed.stdout == ""
        assert failed.stderr.startswith("pytest_llmperf.reports.methodology: ")
        assert words in failed.stderr and len(failed.stderr.splitlines()) == 1


def test_svg_charts_draw_series_and_say_when_empty() -> None:
    assert nice_ticks(0, 100, 5) == [0, 20, 40, 60, 80, 100]
    svg = line_chart(
        [Series("a<b", [(0, 0), (1, 2), (2, 3)])], title="t&t", x_label="x", y_label="y"
    )
    assert 'class="series"' in svg and "a<b" not in svg
    assert 'class="legend"' not in svg  # one series needs no legend
    assert "t&amp;t" in svg and 'd="M' in svg
    assert "no data" in line_chart([], title="t", x_label="x", y_label="y")
    bars = bar_chart([(0, 1, 3), (1, 2, 5)], title="h", x_label="x", y_label="n")
    assert bars.count('class="bar"') == 2
