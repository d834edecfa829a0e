"""Verdicts on conversation SLOs: makespans, affinity shares and turn bands (slo/verdicts.py)."""

from __future__ import annotations

import pytest

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.history.cli import metric_and_stat
from pytest_llmperf.history.records import metric_value
from pytest_llmperf.history.trends import unit_of
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.regression import Thresholds, compare_accumulators
from pytest_llmperf.slo.sequential import stop_decidable
from pytest_llmperf.slo.verdicts import Verdict, evaluate
from pytest_llmperf.specs.slo import parse_slo

MS = 1_000_000


def conversations(n: int, *, makespan_ms: float, replica: str = "", turns: int = 2) -> RunResult:
    """``n`` conversations of ``turns`` back-to-back calls, each ``makespan_ms`` long in all;
    the first turn's TTFT is 50 ms, later turns' 5 ms."""
    acc = MetricsAccumulator()
    step = int(makespan_ms * MS / turns)
    for c in range(n):
        t0 = (1 + c) * 10_000 * MS
        for k in range(turns):
            start = t0 + k * step
            r = RequestRecord(index=c * turns + k, t_sched=start, t_send=start)
            r.conversation, r.turn, r.replica = c, k, replica
            r.t_first = start + (50 if k == 0 else 5) * MS
            r.t_last = r.t_end = start + step
            r.token_events = 2
            acc.add(r)
    return RunResult(workload={}, load={}, endpoint={}, accumulator=acc, label="run")


def test_makespan_percentile_is_judged_with_confidence_bounds() -> None:
    result = conversations(200, makespan_ms=1000)
    passed = evaluate(parse_slo("conversation.makespan_excl_tools.p90 < 2s"), result)
    assert passed.verdict is Verdict.PASS and passed.samples == 200
    assert passed.interval is not None
    failed = evaluate(parse_slo("conversation.makespan.p90 < 500ms"), result)
    assert failed.verdict is Verdict.FAIL


def test_few_conversations_are_inconclusive_not_passed() -> None:
    few = conversations(3, makespan_ms=10)
    verdict = evaluate(parse_slo("conversation.makespan.p99 < 2s"), few)
    assert verdict.verdict is Verdict.INCONCLUSIVE


def test_no_conversation_is_inconclusive_with_why() -> None:
    empty = RunResult(workload={}, load={}, endpoint={}, accumulator=MetricsAccumulator())
    verdict = evaluate(parse_slo("conversation.makespan.p90 < 60s"), empty)
    assert verdict.verdict is Verdict.INCONCLUSIVE
    assert "no conversation" in verdict.reason


def test_same_replica_rate() -> None:
    pinned = conversations(10, makespan_ms=100, replica="r1")
    assert evaluate(parse_slo("conversation.same_replica_rate > 90%"), pinned).verdict == "pass"
    unsaid = conversations(10, makespan_ms=100)
    verdict = evaluate(parse_slo("conversation.same_replica_rate > 90%"), unsaid)
    assert verdict.verdict is Verdict.INCONCLUSIVE and "not attributed" in verdict.reason


def test_affinity_is_judged_on_a_generator_bound_run() -> None:
    pinned = conversations(10, makespan_ms=100, replica="r1")
    pinned.self_check = {"generator_bound": True, "reasons": ["lagged"]}
    assert evaluate(parse_slo("conversation.same_replica_rate > 90%"), pinned).verdict == "pass"
    verdict = evaluate(parse_slo("conversation.makespan.p50 < 1s"), pinned)
    assert verdict.verdict is Verdict.INCONCLUSIVE


def test_a_turn_band_is_judged_on_its_requests_only() -> None:
    result = conversations(300, makespan_ms=200)  # turn 1: 50 ms TTFT, turn 2: 5 ms
    later = evaluate(parse_slo("turns[2-5].ttft.p90 < 20ms"), result)
    assert later.verdict is Verdict.PASS and later.samples == 300
    assert later.run == "run turns 2-5" and later.expr == "turns[2-5].ttft.p90 < 20ms"
    first = evaluate(parse_slo("turns[1].ttft.p90 < 20ms"), result)
    assert first.verdict is Verdict.FAIL
    assert evaluate(parse_slo("ttft.p90 < 20ms"), result).verdict is Verdict.FAIL
    nobody = evaluate(parse_slo("turns[51+].ttft.p90 < 20ms"), result)
    assert nobody.verdict is Verdict.INCONCLUSIVE


def test_conversation_and_band_slos_wait_for_the_run_to_end() -> None:
    assert not stop_decidable(parse_slo("conversation.makespan.p90 < 60s"))
    assert not stop_decidable(parse_slo("turns[1].ttft.p90 < 2s"))
    assert stop_decidable(parse_slo("ttft.p90 < 2s"))


# -- baselines and history ---------------------------------------------------------------


def test_a_baseline_compares_makespans_where_both_runs_had_conversations() -> None:
    base = conversations(300, makespan_ms=1000).accumulator
    slower = conversations(300, makespan_ms=2000).accumulator
    checks = compare_accumulators(base, slower, resamples=200)
    by_name = {(c.metric, c.stat): c for c in checks}
    assert by_name[("conversation.makespan_excl_tools", "p50")].verdict == "regressed"
    assert by_name[("conversation.makespan", "p99")].verdict == "regressed"
    plain = compare_accumulators(MetricsAccumulator(), slower, resamples=200)
    assert not any(c.metric.startswith("conversation.") for c in plain)


def test_thresholds_name_conversation_statistics() -> None:
    thresholds = Thresholds.parse("conversation.makespan.p90=25%,conversation.makespan=30%")
    assert thresholds.for_stat("conversation.makespan", "p90") == 0.25
    assert thresholds.for_stat("conversation.makespan", "p50") == 0.30
    assert ("conversation.makespan", "p90") in thresholds.conversation_stats()
    with pytest.raises(LlmPerfUsageError, match=r"conversation\.makespan_excl_tools"):
        Thresholds.parse("conversation.wait.p90=10%")


def test_history_reads_conversation_metrics_by_their_slo_names() -> None:
    metrics = conversations(10, makespan_ms=1000, replica="r1").to_dict()["metrics"]
    assert metrics["conversation.makespan"]["count"] == 10
    assert metrics["conversation.same_replica_rate"] == 1.0
    metric, stat = metric_and_stat("conversation.makespan_excl_tools.p90", None)
    assert (metric, stat) == ("conversation.makespan_excl_tools", "p90")
    assert metric_value(metrics, metric, stat) == pytest.approx(1000, rel=2e-3)
    assert unit_of(metric) == "ms" and unit_of("conversation.same_replica_rate") == "fraction"
