"""The client's per-replica view: each request counted under the replica its response named
(``RequestRecord.replica``), kept through merges and states (worker processes, xdist), and
written as ``runs[].by_replica`` only where some request was attributed."""

from __future__ import annotations

import json

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult


def record(i: int, replica: str, ttft_ms: float, *, failed: bool = False) -> RequestRecord:
    t0 = i * 10_000_000
    r = RequestRecord(index=i, t_sched=t0, t_send=t0, replica=replica)
    if failed:
        r.fail("http_error", "500", now=t0 + 1_000_000)
        return r
    r.t_first = t0 + int(ttft_ms * 1e6)
    r.t_last = r.t_end = r.t_first + 4_000_000
    r.token_events = 3
    r.gaps_ns = [2_000_000, 2_000_000]
    r.usage_completion_tokens = 3
    return r


def accumulate(records: list[RequestRecord]) -> MetricsAccumulator:
    acc = MetricsAccumulator()
    for r in records:
        acc.add(r)
    return acc


def run_of(acc: MetricsAccumulator) -> RunResult:
    return RunResult(workload={}, load={}, endpoint={}, accumulator=acc, label="run0")


def test_each_request_counts_under_the_replica_that_served_it() -> None:
    acc = accumulate(
        [
            record(0, "a", 10),
            record(1, "b", 50),
            record(2, "a", 20),
            record(3, "", 30),  # a response that named no replica
            record(4, "b", 0, failed=True),
        ]
    )
    assert sorted(acc.replicas) == ["a", "b"]
    a, b = acc.replicas["a"], acc.replicas["b"]
    assert (a.issued, a.completed, a.failed) == (2, 2, 0)
    assert (b.issued, b.completed, b.failed) == (2, 1, 1)
    assert b.histograms["ttft"].max == acc.histograms["ttft"].max  # the slow one is b's
    assert a.histograms["ttft"].max < 25
    assert acc.counts()["replica_unattributed"] == 1
    shown = run_of(acc).to_dict()
    assert list(shown["by_replica"]) == ["a", "b"]
    assert shown["by_replica"]["b"]["counts"]["failed"] == 1
    assert shown["by_replica"]["a"]["metrics"]["ttft"]["count"] == 2
    assert "replica_unattributed" not in shown["by_replica"]["a"]["counts"]
    json.dumps(shown)  # plain JSON


def test_a_run_without_attribution_writes_no_new_key() -> None:
    acc = accumulate([record(0, "", 10), record(1, "", 12)])
    shown = run_of(acc).to_dict()
    assert "by_replica" not in shown
    assert "replica_unattributed" not in shown["counts"]
    assert "replicas" not in acc.to_state()


def test_the_breakdown_survives_merges_and_states() -> None:
    one = accumulate([record(0, "a", 10), record(1, "b", 50)])
    two = accumulate([record(2, "b", 60), record(3, "c", 15), record(4, "", 11)])
    back = MetricsAccumulator.from_state(json.loads(json.dumps(one.to_state())))
    back.merge(MetricsAccumulator.from_state(json.loads(json.dumps(two.to_state()))))
    assert {k: v.issued for k, v in back.replicas.items()} == {"a": 1, "b": 2, "c": 1}
    assert back.replicas["b"].histograms["ttft"].count == 2
    assert back.counts()["replica_unattributed"] == 1
    # a replica's breakdown is not split again
    assert not back.replicas["b"].replicas and not back.replicas["b"].stages
    result = run_of(back)
    assert result.replicas == ["a", "b", "c"]
    part = result.replica_result("b")
    assert part.label == "run0 replica b" and part.accumulator.completed == 2
