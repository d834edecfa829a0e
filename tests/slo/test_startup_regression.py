"""The server process against a baseline's: startup compared by default (25% AND 1 s), the
resources only where named; a baseline file keeps the block so that it can be compared."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.reports.baseline import build_baseline, load_baseline, write_baseline
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.regression import RegressionVerdict, Thresholds
from pytest_llmperf.slo.startup_regression import compare_process

REGRESSED, IMPROVED = RegressionVerdict.REGRESSED, RegressionVerdict.IMPROVED
UNCHANGED, INCONCLUSIVE = RegressionVerdict.UNCHANGED, RegressionVerdict.INCONCLUSIVE


def block(ready: float | None = 40.0, first: float | None = 41.0, **resources: Any) -> dict:
    startup = {k: v for k, v in (("ready_s", ready), ("first_token_s", first)) if v is not None}
    return {"name": "vllm", "startup": startup, "resources": resources}


def by_name(checks: list[Any]) -> dict[str, Any]:
    return {c.name: c for c in checks}


def test_startup_is_compared_by_default_with_a_25_percent_and_1_s_rule() -> None:
    checks = by_name(compare_process(block(40.0, 41.0), block(55.0, 42.0), run="run0"))
    assert set(checks) == {"startup.ready_s", "startup.first_token_s"}
    ready = checks["startup.ready_s"]
    assert (ready.verdict, ready.change, ready.threshold) == (REGRESSED, 0.375, 0.25)
    assert (ready.baseline, ready.current, ready.p_value, ready.run) == (40.0, 55.0, None, "run0")
    assert checks["startup.first_token_s"].verdict is UNCHANGED
    assert ready.to_dict()["name"] == "startup.ready_s"  # no statistic in its name


def test_a_small_server_slower_by_under_a_second_is_no_regression() -> None:
    (ready,) = [c for c in compare_process(block(0.4), block(0.9)) if c.metric.endswith("ready_s")]
    assert ready.verdict is UNCHANGED and ready.change == pytest.approx(1.25)
    assert "within the 1 s" in ready.reason
    (faster,) = compare_process(block(60.0, None), block(20.0, None))
    assert faster.verdict is IMPROVED


def test_a_named_threshold_overrides_the_startup_default_and_not_the_bare_one() -> None:
    wide = Thresholds.parse("startup.ready_s=50%")
    assert by_name(compare_process(block(40.0), block(55.0), wide))["startup.ready_s"].verdict is (
        UNCHANGED
    )
    bare = Thresholds.parse("100%")  # the latencies' default: startup keeps its 25%
    assert by_name(compare_process(block(40.0), block(55.0), bare))["startup.ready_s"].verdict is (
        REGRESSED
    )


def test_a_default_comparison_needs_both_sides_a_named_one_says_what_is_missing() -> None:
    assert compare_process(None, block(40.0)) == []
    assert compare_process(block(None, None), block(40.0)) == []
    (named,) = compare_process(None, block(40.0, None), Thresholds.parse("startup.ready_s=30%"))
    assert named.verdict is INCONCLUSIVE
    assert named.reason == "the baseline has no startup.ready_s (the gate did not start its server)"


def test_resources_are_compared_only_where_named() -> None:
    before = block(None, None, rss_max_mb=800.0, rss_growth_mb=0.0, cpu_ms_per_output_token=1.0)
    after = block(None, None, rss_max_mb=1000.0, rss_growth_mb=200.0, cpu_ms_per_output_token=1.1)
    assert compare_process(before, after) == []
    named = "server.rss_max_mb=20%,server.rss_growth_mb=10%,server.cpu_ms_per_output_token=20%"
    checks = by_name(compare_process(before, after, Thresholds.parse(named)))
    assert checks["server.rss_max_mb"].verdict is REGRESSED  # +25% > 20%
    assert checks["server.cpu_ms_per_output_token"].verdict is UNCHANGED
    growth = checks["server.rss_growth_mb"]  # from 0: a relative change is undefined
    assert (growth.verdict, growth.note_only) == (INCONCLUSIVE, True)


def test_thresholds_name_process_metrics_and_refuse_unknown_ones() -> None:
    parsed = Thresholds.parse("startup.ready_s=50%,server.rss_max_mb=20%,ttft.p99=5%,15%")
    assert parsed.process_metrics() == [
        "startup.ready_s",
        "startup.first_token_s",
        "server.rss_max_mb",
    ]
    assert parsed.server_stats() == []  # not a scraped server statistic
    assert ("startup", "ready_s") not in parsed.stats()
    with pytest.raises(
        LlmPerfUsageError, match=re.escape("known: startup.ready_s, startup.first_token_s")
    ):
        Thresholds.parse("startup.load_s=10%")
    with pytest.raises(LlmPerfUsageError, match=re.escape("server.rss_max_mb=20%")):
        Thresholds.parse("server.rss=10%")


def _result(ready: float) -> RunResult:
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
        server_process=copy.deepcopy(block(ready)),
    )


def test_a_baseline_file_keeps_the_block_and_the_comparison_reads_it(tmp_path: Path) -> None:
    endpoint = {"url": "http://127.0.0.1:1/v1", "model": "m", "api": "chat"}
    saved = _result(40.0)
    data = SessionData()
    data.add(
        "t.py::test_a",
        "passed",
        {"endpoint": endpoint, "runs": [saved.to_dict()], "states": [saved.accumulator.to_state()]},
    )
    path = write_baseline(tmp_path / "b.json", build_baseline(data, endpoint=endpoint, options={}))
    baseline = load_baseline(path)
    assert baseline.run("t.py::test_a", "run0")["server_process"]["startup"]["ready_s"] == 40.0
    checks = by_name(baseline.compare("t.py::test_a", [_result(90.0)], endpoint=endpoint))
    ready = checks["startup.ready_s"]
    assert (ready.verdict, ready.baseline, ready.current) == (REGRESSED, 40.0, 90.0)
    assert ready.compared_with.startswith(f"baseline {path}")
