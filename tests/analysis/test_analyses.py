"""The draft's analyses on request records with known timings (fed through the collector)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from pytest_llmperf.analysis import (
    RequestCollector,
    class_fairness,
    compare_table,
    context_scaling,
    counter_deltas,
    guardrail_overhead,
    itl_distribution,
    latency_results,
    metric_value,
    parse_prometheus,
    ttft_by_input_length,
)
from pytest_llmperf.analysis.server_metrics import metrics_url
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult

MS = 1_000_000


def record(
    index: int,
    *,
    ttft_ms: float,
    gaps_ms: list[float],
    category: str = "",
    prompt: int | None = None,
    cached: int | None = None,
    failed: bool = False,
) -> RequestRecord:
    t0 = 1_000 * MS + index * 10 * MS
    r = RequestRecord(index=index, t_sched=t0, category=category, t_send=t0)
    if failed:
        r.fail(ErrorKind.HTTP, "500", now=t0 + MS)
        return r
    r.t_first = t0 + int(ttft_ms * MS)
    r.gaps_ns = [int(g * MS) for g in gaps_ms]
    r.t_last = r.t_first + sum(r.gaps_ns)
    r.t_end = r.t_last
    r.token_events = len(gaps_ms) + 1
    r.usage_completion_tokens = len(gaps_ms) + 1
    r.usage_prompt_tokens = prompt
    r.usage_cached_tokens = cached
    return r


def collected(records: list[RequestRecord], **options) -> RequestCollector:
    collector = RequestCollector(**options)
    for r in records:
        collector(r)
    return collector


def run_result(records: list[RequestRecord]) -> RunResult:
    acc = MetricsAccumulator()
    for r in records:
        acc.add(r)
    return RunResult(workload={}, load={}, endpoint={}, accumulator=acc)


def test_collector_rows_bounded_untracked_skipped_and_input_fallback() -> None:
    records = [record(i, ttft_ms=10, gaps_ms=[5, 5], prompt=None) for i in range(5)]
    records[0].tracked = False
    c = collected(records, max_rows=3, input_tokens=lambda i: 100 + i)
    assert [r.index for r in c.rows] == [1, 2, 3] and c.dropped == 1
    assert c.rows[0].input_tokens == 101 and c.rows[0].ttft_ms == pytest.approx(10)
    assert c.rows[0].tpot_ms == pytest.approx(5)
    failed = collected([record(0, ttft_ms=1, gaps_ms=[], failed=True)]).rows[0]
    assert not failed.ok and failed.ttft_ms is None and failed.error == ErrorKind.HTTP


def test_ttft_by_input_length_uses_the_draft_buckets() -> None:
    sizes = [100, 200, 300, 700, 1500, 3000, 5000]
    records = [
        record(i, ttft_ms=size / 10 + k, gaps_ms=[1], prompt=size)
        for i, (size, k) in enumerate((s, k) for s in sizes for k in range(3))
    ]
    table = ttft_by_input_length(collected(records).rows)
    labels = [row[0] for row in table["rows"]]
    assert labels == ["0-256", "256-512", "512-1024", "1024-2048", "2048-4096", "4096+"]
    counts = {row[0]: row[1] for row in table["rows"]}
    assert counts == {"0-256": 6, "256-512": 3, "512-1024": 3, "1024-2048": 3,
                      "2048-4096": 3, "4096+": 3}  # fmt: skip
    assert table["rows"][-1][2] == pytest.approx(501)  # p50 of 500, 501, 502


def test_itl_distribution_is_exact_over_all_gaps() -> None:
    rng = np.random.default_rng(3)
    gap_lists = [list(rng.uniform(2, 30, size=int(n))) for n in rng.integers(2, 80, size=40)]
    records = [record(i, ttft_ms=20, gaps_ms=gaps) for i, gaps in enumerate(gap_lists)]
    table = itl_distribution(collected(records).rows, run_result(records))
    pooled = np.concatenate([np.asarray(g) for g in gap_lists])
    assert table["samples"] == len(pooled)
    assert table["itl_mean_ms"] == pytest.approx(pooled.mean(), abs=2e-3)
    assert table["itl_std_ms"] == pytest.approx(pooled.std(), abs=2e-3)
    jitters = sorted(np.std(g) for g in gap_lists)
    assert table["jitter_p50_ms"] == pytest.approx(jitters[math.ceil(0.5 * 40) - 1], abs=1e-3)
    assert table["max_pause_p99_ms"] == pytest.approx(max(max(g) for g in gap_lists), abs=1e-3)
    assert table["p99_p50_ratio"] > 1


def test_fairness_starvation_and_jain() -> None:
    short = [record(i, ttft_ms=10, gaps_ms=[2] * 9, category="short") for i in range(19)]
    short.append(record(19, ttft_ms=80, gaps_ms=[2] * 9, category="short"))  # > 5x median
    long = [record(20 + i, ttft_ms=100, gaps_ms=[2] * 9, category="long") for i in range(10)]
    table = class_fairness(collected(short + long).rows)
    assert table["starvation"] == {"long": 0.0, "short": 0.05}
    inflated = class_fairness(
        collected(short + long).rows, isolated_ttft_p50_ms={"short": 10, "long": 50}
    )
    # Inflation: short 10/10 = 1, long 100/50 = 2 -> Jain (1+2)^2 / (2 * 5) = 0.9
    assert inflated["normalized_latency"] == {"long": 2.0, "short": 1.0}
    assert inflated["jain_index"] == pytest.approx(0.9)


def test_context_scaling_recovers_linear_prefill() -> None:
    records = [
        record(i, ttft_ms=5 + 0.02 * length, gaps_ms=[1], category=str(length), prompt=length)
        for i, length in enumerate([1024, 2048, 4096, 8192] * 5)
    ]
    table = context_scaling(collected(records).rows)
    assert table["linear_us_per_token"] == pytest.approx(20, rel=1e-3)
    assert table["linear_r_squared"] == pytest.approx(1.0)
    assert 0.8 < table["exponent"] < 1.0  # the 5 ms constant flattens the log-log slope
    assert [row[0] for row in table["rows"]] == [1024, 2048, 4096, 8192]
    assert table["kind"] == "curve" and table["x"] == "context tokens"


def _runs(ttft_ms: list[float]) -> list[RunResult]:
    return [
        run_result([record(i, ttft_ms=t + j, gaps_ms=[3] * 20) for j in range(30)])
        for i, t in enumerate(ttft_ms)
    ]


def test_compare_table_intervals_and_significance() -> None:
    base, slower, same = _runs([50, 51, 49]), _runs([80, 82, 79]), _runs([50.5, 49.5, 50])
    table = compare_table({"base": base, "slower": slower, "same": same}, ("ttft.p50", "e2e.mean"))
    diffs = table["differences"]["ttft.p50"]
    assert diffs["slower"]["significant"] and not diffs["same"]["significant"]
    assert diffs["slower"]["difference"] == pytest.approx(30.33, abs=0.1)
    base_row = table["rows"][0]
    assert base_row[:3] == ["ttft.p50", "base", 3] and base_row[4] < base_row[3] < base_row[5]
    overhead = guardrail_overhead({"baseline": base, "filter": slower})["overhead"]["filter"]
    assert overhead["ttft_p50_ms"] == pytest.approx(30.33, abs=0.1)
    assert overhead["throughput_reduction"] is not None
    assert metric_value(base[0], "ttft.p50") == pytest.approx(
        statistics.median_low(range(50, 80)), abs=0.1
    )
    with pytest.raises(LlmPerfUsageError, match="rate"):
        metric_value(base[0], "output_throughput.p50")
    with pytest.raises(LlmPerfUsageError, match="latency"):
        metric_value(base[0], "ttft")


def test_prometheus_text_parsing_and_counter_deltas() -> None:
    text = (
        "# HELP vllm:num_preemptions Cumulative number of preemption.\n"
        "# TYPE vllm:num_preemptions counter\n"
        'vllm:num_preemptions_total{engine="0",model_name="m"} 7.0\n'
        'vllm:request_success_total{finished_reason="length"} 3\n'
        'vllm:request_success_total{finished_reason="stop"} 2\n'
        "vllm:kv_cache_usage_perc 0.5\n"
        "garbage line here\n"
    )
    parsed = parse_prometheus(text)
    assert parsed["vllm:num_preemptions_total"] == 7.0
    assert parsed["vllm:request_success_total"] == 5.0 and parsed["vllm:kv_cache_usage_perc"] == 0.5
    later = dict(parsed, **{"vllm:num_preemptions_total": 12.0})
    assert counter_deltas(parsed, later) == {
        "vllm:num_preemptions_total": 5.0,
        "vllm:request_success_total": 0.0,
    }
    assert counter_deltas(None, later) is None
    assert metrics_url("http://h:8000/v1") == "http://h:8000/metrics"


def test_latency_results_has_the_draft_columns() -> None:
    result = run_result([record(i, ttft_ms=10 + i, gaps_ms=[2] * 5) for i in range(100)])
    table = latency_results(result, ("ttft", "e2e"))
    assert table["columns"][1:6] == ["p50", "p90", "p95", "p99", "p99.9"]
    ttft = table["rows"][0]
    assert ttft[0] == "ttft" and ttft[-1] == 100
    assert ttft[1] == pytest.approx(59, abs=0.1) and ttft[7] == pytest.approx(10, abs=0.1)
