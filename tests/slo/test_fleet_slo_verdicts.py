"""Verdicts of the fleet's SLOs on hand-built runs: ``replica.*`` on each replica's
requests, ``fleet.imbalance`` / ``fleet.busy_imbalance`` / ``fleet.prefix_hit_rate``, a
pool's ``<pool>.*`` and ``kv_transfer.*``, each with its inconclusive cases and why."""

from __future__ import annotations

import math

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.server_metrics.fleet import FleetMetrics, PageMetrics
from pytest_llmperf.server_metrics.summary import ServerFamily, ServerMetrics
from pytest_llmperf.slo.fleet_verdicts import NOT_ATTRIBUTED
from pytest_llmperf.slo.verdicts import Verdict, evaluate, evaluate_runs
from pytest_llmperf.specs.fleet_names import PageRole
from pytest_llmperf.specs.slo import parse_slo
from pytest_llmperf.specs.stages import Stage


def served(ttft_by_replica: dict[str, list[float]], unattributed: int = 0) -> RunResult:
    """A run whose requests each name a replica (``""``: none) with the TTFTs given."""
    acc = MetricsAccumulator()
    rows = [(name, t) for name, ts in ttft_by_replica.items() for t in ts]
    rows += [("", 20.0)] * unattributed
    for i, (name, ttft) in enumerate(rows):
        t0 = i * 5_000_000
        r = RequestRecord(index=i, t_sched=t0, t_send=t0, replica=name)
        r.t_first = t0 + int(ttft * 1e6)
        r.t_last = r.t_end = r.t_first + 2_000_000
        r.token_events = r.usage_completion_tokens = 2
        r.gaps_ns = [2_000_000]
        acc.add(r)
    return RunResult(workload={}, load={}, endpoint={}, accumulator=acc, label="run0")


def page(role: PageRole, name: str, **metrics: dict[str, float]) -> PageMetrics:
    view = ServerMetrics(source=f"http://{name}/metrics", family=ServerFamily.VLLM, scrapes=3)
    view.metrics = dict(metrics)
    return PageMetrics(role, name, view)


def test_replica_slo_fails_naming_the_slow_replica_where_the_fleet_passes() -> None:
    fast = [20.0 + i % 7 for i in range(600)]
    result = served({"0": fast, "1": fast, "2": fast, "3": [900.0] * 600})
    verdicts = evaluate_runs(
        [parse_slo("replica.ttft.p99 < 500ms"), parse_slo("ttft.p50 < 500ms")], [result]
    )
    by_replica = {v.replica: v for v in verdicts if v.replica is not None}
    assert list(by_replica) == ["0", "1", "2", "3"]
    assert {k: v.verdict for k, v in by_replica.items()} == {
        "0": Verdict.PASS,
        "1": Verdict.PASS,
        "2": Verdict.PASS,
        "3": Verdict.FAIL,
    }
    slow = by_replica["3"]
    assert slow.expr == "replica.ttft.p99 < 500ms" and slow.run == "run0"
    assert slow.where == "replica 3" and slow.samples == 600
    assert slow.reason.startswith("replica 3 (600 of 2400 requests)")
    assert slow.interval is not None and slow.confidence == 0.99  # the percentile's bounds
    assert slow.to_dict()["replica"] == "3"
    plain = next(v for v in verdicts if v.replica is None)
    assert plain.verdict is Verdict.PASS and "replica" not in plain.to_dict()
    # one verdict per SLO (a session ruleset's, a search's): the worst replica's
    assert evaluate(parse_slo("replica.ttft.p99 < 500ms"), result).replica == "3"


def test_a_replica_with_few_requests_is_inconclusive_with_its_own_count() -> None:
    result = served({"a": [20.0] * 600, "b": [20.0] * 3})
    verdicts = evaluate_runs([parse_slo("replica.ttft.p99 < 500ms")], [result])
    assert [(v.replica, v.verdict) for v in verdicts] == [
        ("a", Verdict.PASS),
        ("b", Verdict.INCONCLUSIVE),  # 3 samples bound no p99 from above
    ]
    b = verdicts[1]
    assert b.samples == 3 and b.reason.startswith("replica b (3 of 603 requests): ")
    assert "run has 3" in b.reason


def test_replica_rates_are_each_replicas_own() -> None:
    result = served({"a": [20.0] * 10, "b": [20.0] * 10})
    failed = RequestRecord(index=99, t_sched=0, t_send=0, replica="b")
    failed.fail("http_error", "500", now=1_000_000)  # type: ignore[arg-type]
    result.accumulator.add(failed)
    verdicts = evaluate_runs([parse_slo("replica.error_rate < 5%")], [result])
    assert [(v.replica, v.verdict, v.observed) for v in verdicts] == [
        ("a", Verdict.PASS, 0.0),
        ("b", Verdict.FAIL, round(1 / 11, 4)),
    ]


def test_no_attributed_request_is_one_inconclusive_verdict_saying_how_to_fix_it() -> None:
    result = served({}, unattributed=50)
    (verdict,) = evaluate_runs([parse_slo("replica.ttft.p99 < 500ms")], [result])
    assert verdict.verdict is Verdict.INCONCLUSIVE and verdict.replica is None
    assert verdict.reason == NOT_ATTRIBUTED
    assert "--llm-replica-header" in verdict.reason and "docs/fleets.md" in verdict.reason


def test_a_staged_run_judges_replica_slos_on_the_whole_run() -> None:
    result = served({"a": [20.0] * 50, "b": [20.0] * 50})
    result.stage_plan = (Stage(rate=5, duration_s=1.0), Stage(rate=10, duration_s=1.0))
    verdicts = evaluate_runs([parse_slo("replica.ttft.max < 1s")], [result])
    assert [(v.replica, v.stage) for v in verdicts] == [("a", None), ("b", None)]


def test_imbalance_from_the_clients_attribution_counts_idle_replica_pages() -> None:
    result = served({"0": [20.0] * 30, "1": [20.0] * 10})
    slo = parse_slo("fleet.imbalance < 1.4")
    verdict = evaluate(slo, result)  # 30 over a mean of 20
    assert (verdict.verdict, verdict.observed, verdict.samples) == (Verdict.FAIL, 1.5, 2)
    assert "0=30, 1=10" in verdict.reason and "replica header" in verdict.reason
    # a third replica page that served nothing counts as 0: 30 over a mean of 13.3
    result.fleet = FleetMetrics(
        pages=[page(PageRole.REPLICA, n) for n in ("0", "1", "2")] + [page(PageRole.ROUTER, "r")]
    )
    verdict = evaluate(slo, result)
    assert verdict.observed == round(30 / (40 / 3), 4) and verdict.samples == 3


def test_imbalance_from_the_pages_counters_without_attribution() -> None:
    result = served({}, unattributed=10)
    result.fleet = FleetMetrics(
        pages=[
            page(PageRole.ROUTER, "r"),
            page(PageRole.REPLICA, "w1"),
            page(PageRole.REPLICA, "w2"),
        ],
        requests={"r": 100.0, "w1": 50.0, "w2": 50.0},
    )
    verdict = evaluate(parse_slo("fleet.imbalance <= 1.1"), result)
    assert (verdict.verdict, verdict.observed, verdict.samples) == (Verdict.PASS, 1.0, 2)


def test_imbalance_with_neither_source_is_inconclusive() -> None:
    verdict = evaluate(parse_slo("fleet.imbalance < 2"), served({}, unattributed=5))
    assert verdict.verdict is Verdict.INCONCLUSIVE and verdict.observed is None
    assert "no replica page counted its requests" in verdict.reason


def test_busy_imbalance_reads_each_replica_pages_running_mean() -> None:
    result = served({}, unattributed=5)
    result.fleet = FleetMetrics(
        pages=[
            page(PageRole.DECODE, "d0", **{"server.running": {"mean": 6.0, "max": 8.0}}),
            page(PageRole.DECODE, "d1", **{"server.running": {"mean": 2.0, "max": 4.0}}),
            page(PageRole.PREFILL, "p0", **{"server.running": {"mean": 50.0}}),
        ]
    )
    verdict = evaluate(parse_slo("fleet.busy_imbalance < 1.2"), result)
    assert (verdict.verdict, verdict.observed) == (Verdict.FAIL, 1.5)  # 6 over a mean of 4
    assert "d0=6, d1=2" in verdict.reason
    result.fleet = FleetMetrics(pages=[page(PageRole.REPLICA, "w")])
    verdict = evaluate(parse_slo("fleet.busy_imbalance < 1.2"), result)
    assert verdict.verdict is Verdict.INCONCLUSIVE and "server.running" in verdict.reason


def test_prefix_hit_rate_from_the_fleet_else_the_server_as_one() -> None:
    result = served({"0": [20.0]})
    slo = parse_slo("fleet.prefix_hit_rate > 40%")
    assert "--llm-server-metrics off" in evaluate(slo, result).reason
    result.server_metrics = ServerMetrics(
        source="x", metrics={"server.prefix_cache_hit_rate": {"value": 0.3}}, scrapes=2
    )
    assert (evaluate(slo, result).verdict, evaluate(slo, result).observed) == (Verdict.FAIL, 0.3)
    result.fleet = FleetMetrics(pages=[page(PageRole.REPLICA, "0")], prefix_hit_rate=0.55)
    assert (evaluate(slo, result).verdict, evaluate(slo, result).observed) == (Verdict.PASS, 0.55)


def test_a_pool_slo_is_judged_as_a_server_slo_on_the_pools_pages() -> None:
    result = served({"0": [20.0]})
    decode = ServerMetrics(
        source="pool",
        metrics={
            "server.kv_cache_usage": {"max": 0.95, "mean": 0.5, "min": 0.1},
            "server.queue_time": {"p99": 50.0, "count": 150},
        },
        scrapes=3,
        buckets={"server.queue_time": [[10.0, 100], [20.0, 45], [50.0, 5], [math.inf, 0]]},
    )
    result.fleet = FleetMetrics(
        pages=[page(PageRole.PREFILL, "p0"), page(PageRole.DECODE, "d0")], roles={"decode": decode}
    )
    usage = evaluate(parse_slo("decode.kv_usage.max < 90%"), result)
    assert (usage.verdict, usage.observed, usage.expr) == (
        Verdict.FAIL,
        0.95,
        "decode.kv_usage.max < 90%",
    )
    queue = evaluate(parse_slo("decode.queue_time.p50 <= 10ms"), result)
    assert queue.verdict is Verdict.PASS and queue.interval is not None  # the bucket bounds
    missing = evaluate(parse_slo("prefill.queue_time.p99 < 1s"), result)
    assert missing.verdict is Verdict.INCONCLUSIVE
    assert missing.reason == "no prefill pages among the pages given (prefill p0, decode d0)"
    result.fleet = None
    missing = evaluate(parse_slo("decode.kv_usage.max < 90%"), result)
    assert "no decode pages: the run read no list of pages" in missing.reason


def test_kv_transfer_is_the_fleets_server_kv_transfer() -> None:
    result = served({"0": [20.0]})
    result.server_metrics = ServerMetrics(
        source="fleet",
        metrics={"server.kv_transfer": {"p99": 20.0, "count": 200}},
        scrapes=3,
        buckets={"server.kv_transfer": [[5.0, 150], [20.0, 50], [math.inf, 0]]},
    )
    assert evaluate(parse_slo("kv_transfer.p90 < 25ms"), result).verdict is Verdict.PASS
    assert evaluate(parse_slo("kv_transfer.p50 > 6ms"), result).verdict is Verdict.FAIL
