"""A fleet run's figures in what a history keeps (``fleet.*``, ``<pool>.*``,
``replica[NAME].*``), and each replica against the baseline's same replica where
``--llm-baseline-threshold`` names a ``replica.*`` statistic (a file's or a history's
reference alike: both hand the shared loop an accumulator whose state keeps each
replica's requests)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.history.cli import metric_and_stat
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.fleet_figures import fleet_figures, run_metrics_with_fleet
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.server_metrics.fleet import FleetMetrics, PageMetrics
from pytest_llmperf.server_metrics.summary import ServerMetrics, run_metrics_with_server
from pytest_llmperf.slo.comparison import BaselineSource, Reference
from pytest_llmperf.slo.regression import RegressionVerdict, Thresholds
from pytest_llmperf.slo.replica_regression import compare_replicas
from pytest_llmperf.specs.fleet_names import PageRole


def accumulate(ttft_by_replica: dict[str, np.ndarray]) -> MetricsAccumulator:
    acc = MetricsAccumulator()
    i = 0
    for name, ttfts in ttft_by_replica.items():
        for ttft in ttfts:
            t0 = i * 2_000_000
            r = RequestRecord(index=i, t_sched=t0, t_send=t0, replica=name)
            r.t_first = t0 + int(ttft * 1e6)
            r.t_last = r.t_end = r.t_first + 3_000_000
            r.token_events = r.usage_completion_tokens = 2
            r.gaps_ns = [3_000_000]
            acc.add(r)
            i += 1
    return acc


def draw(median: float, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(median), 0.2, n)


def fleet_run() -> RunResult:
    acc = accumulate({"0": draw(20, 30, 1), "1": draw(20, 10, 2)})
    pool = ServerMetrics(source="pool", metrics={"server.kv_cache_usage": {"max": 0.7}})
    running = {"server.running": {"mean": 3.0}}
    pages = [
        PageMetrics(PageRole.REPLICA, "0", ServerMetrics(source="a", metrics=running)),
        PageMetrics(PageRole.REPLICA, "1", ServerMetrics(source="b", metrics={})),
        PageMetrics(PageRole.DECODE, "d", ServerMetrics(source="c")),
    ]
    result = RunResult(workload={}, load={}, endpoint={}, accumulator=acc, label="run0")
    result.fleet = FleetMetrics(pages=pages, roles={"decode": pool}, prefix_hit_rate=0.25)
    return result


def test_a_history_keeps_the_fleets_figures_by_their_slo_names() -> None:
    run = fleet_run().to_dict()
    kept = run_metrics_with_fleet(run)
    assert kept["fleet.imbalance"] == {"value": 1.5}  # 30 over a mean of 20
    assert kept["fleet.prefix_hit_rate"] == {"value": 0.25}
    assert "fleet.busy_imbalance" in kept and kept["fleet.busy_imbalance"] == {"value": 1.0}
    assert kept["decode.kv_cache_usage"] == {"max": 0.7}
    assert kept["replica[0].ttft"]["count"] == 30 and kept["replica[1].ttft"]["count"] == 10
    assert kept["replica[1].error_rate"] == 0.0
    assert kept["ttft"] == run["metrics"]["ttft"]  # the plain ones as before
    assert fleet_figures(run)["fleet.imbalance"] == 1.5


def test_a_single_servers_run_keeps_what_it_kept() -> None:
    acc = accumulate({"": draw(20, 10, 3)})
    run = RunResult(workload={}, load={}, endpoint={}, accumulator=acc).to_dict()
    assert run_metrics_with_fleet(run) == run_metrics_with_server(run)


def test_replica_thresholds_parse_and_say_their_bad_word() -> None:
    thresholds = Thresholds.parse("replica.ttft.p99=20%,replica.tpot=30%,ttft=5%")
    assert thresholds.replica_stats() == [("ttft", "p99"), ("tpot", "p50"), ("tpot", "p99")]
    assert ("replica", "ttft.p99") not in thresholds.stats()
    assert all(not m.startswith("replica") for m, _ in thresholds.stats())
    with pytest.raises(LlmPerfUsageError, match=r"unknown statistic 'replica.queue_wait.p99'"):
        Thresholds.parse("replica.queue_wait.p99=20%")


def test_each_replica_is_compared_with_the_baselines_same_replica() -> None:
    base = accumulate({"a": draw(20, 400, 4), "b": draw(20, 400, 5)})
    now = accumulate({"a": draw(20, 400, 6), "b": draw(40, 400, 7)})  # b got twice as slow
    thresholds = Thresholds.parse("replica.ttft.p50=20%")
    checks = compare_replicas(base, now, thresholds, run="run0", compared_with="b.json")
    assert [(c.run, c.metric, c.stat, c.verdict) for c in checks] == [
        ("run0 replica a", "replica.ttft", "p50", RegressionVerdict.UNCHANGED),
        ("run0 replica b", "replica.ttft", "p50", RegressionVerdict.REGRESSED),
    ]
    assert checks[1].threshold == 0.2 and checks[1].compared_with == "b.json"
    assert compare_replicas(base, now, Thresholds.parse("ttft.p50=20%")) == []  # not named


def test_a_replica_on_one_side_only_is_a_note() -> None:
    base = accumulate({"a": draw(20, 50, 8)})
    now = accumulate({"a": draw(20, 50, 9), "c": draw(20, 50, 10)})
    checks = compare_replicas(base, now, Thresholds.parse("replica.ttft.p50=20%"), run="run0")
    note, compared = checks
    assert note.note_only and note.verdict is RegressionVerdict.INCONCLUSIVE
    assert note.reason.startswith("replicas differ: the baseline's a, this run's a, c")
    assert compared.run == "run0 replica a" and not compared.note_only


class OneReference(BaselineSource):
    """A baseline of one stored run (what a file or a history hands the shared loop)."""

    path = "b.json"

    def __init__(self, stored: MetricsAccumulator) -> None:
        self.stored = stored

    @property
    def created_at(self) -> str:
        return ""

    @property
    def endpoint(self) -> dict[str, Any]:
        return {}

    def describe(self, nodeid: str) -> str:
        return self.path

    def references(
        self, nodeid: str, results: Sequence[RunResult], endpoint: Mapping[str, Any]
    ) -> Iterator[Reference]:
        yield Reference(self.path, MetricsAccumulator.from_state(self.stored.to_state()))


def test_a_baseline_compares_the_named_replica_statistics_beside_the_fleets() -> None:
    stored = accumulate({"a": draw(20, 400, 11), "b": draw(20, 400, 12)})
    now = accumulate({"a": draw(20, 400, 13), "b": draw(40, 400, 14)})
    result = RunResult(workload={}, load={}, endpoint={}, accumulator=now, label="run0")
    checks = OneReference(stored).compare(
        "t::x", [result], endpoint={}, thresholds=Thresholds.parse("replica.ttft.p50=20%")
    )
    replicas = [(c.run, c.verdict) for c in checks if c.metric == "replica.ttft"]
    assert replicas == [
        ("run0 replica a", RegressionVerdict.UNCHANGED),
        ("run0 replica b", RegressionVerdict.REGRESSED),
    ]
    assert any(c.metric == "ttft" and c.run == "run0" for c in checks)  # the fleet's, as ever


@pytest.mark.parametrize(
    ("asked", "kept"),
    [
        ("fleet.imbalance", ("fleet.imbalance", "value")),
        ("decode.kv_cache_usage.max", ("decode.kv_cache_usage", "max")),
        ("prefill.queue_time.p99", ("prefill.queue_time", "p99")),
        ("replica[0].ttft.p99", ("replica[0].ttft", "p99")),
        ("replica[w1:8001].e2e", ("replica[w1:8001].e2e", "p50")),
        ("server.queue_time.p99", ("server.queue_time", "p99")),  # as before
    ],
)
def test_the_history_commands_read_the_fleets_names(asked: str, kept: tuple[str, str]) -> None:
    assert metric_and_stat(asked, None) == kept
