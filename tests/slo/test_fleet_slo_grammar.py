"""The fleet's SLO names (specs/fleet_names.py) in the grammar: ``replica.<metric>``,
``fleet.*``, ``<pool>.<name>[.<stat>]`` and ``kv_transfer.<stat>``, good and bad, in
markers' strings and in rulesets' targets."""

from __future__ import annotations

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.api_fit import check_api_fit
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.specs.rulesets import ruleset_from_mapping
from pytest_llmperf.specs.slo import parse_slo
from pytest_llmperf.specs.stages import parse_stages
from pytest_llmperf.workloads.apis import Api


@pytest.mark.parametrize(
    ("expr", "metric", "stat", "target", "unit"),
    [
        ("replica.ttft.p99 < 500ms", "replica.ttft", "p99", 500.0, "ms"),
        ("replica.tpot.p99.9 < 0.05s", "replica.tpot", "p99.9", 50.0, "ms"),
        ("replica.error_rate < 1%", "replica.error_rate", None, 0.01, "fraction"),
        ("replica.request_throughput > 2 req/s", "replica.request_throughput", None, 2.0, "req/s"),
        ("fleet.imbalance < 1.5", "fleet.imbalance", None, 1.5, "ratio"),
        ("fleet.busy_imbalance <= 2x", "fleet.busy_imbalance", None, 2.0, "ratio"),
        ("fleet.prefix_hit_rate > 40%", "fleet.prefix_hit_rate", None, 0.4, "fraction"),
        ("prefill.queue_time.p99 < 200ms", "prefill.queue_time", "p99", 200.0, "ms"),
        ("decode.kv_usage.max < 90%", "decode.kv_cache_usage", "max", 0.9, "fraction"),
        ("decode.kv_cache_usage.mean < 0.5", "decode.kv_cache_usage", "mean", 0.5, "fraction"),
        ("router.requests >= 10", "router.requests", None, 10.0, "count"),
        ("kv_transfer.p99 < 50ms", "server.kv_transfer", "p99", 50.0, "ms"),
    ],
)
def test_the_fleet_names_parse(expr, metric, stat, target, unit) -> None:
    slo = parse_slo(expr)
    assert (slo.metric, slo.stat, slo.target, slo.unit) == (metric, stat, target, unit)
    assert slo.expr == expr
    assert slo.is_server == (metric == "server.kv_transfer")  # judged as any server.*
    assert slo.in_fleet_scope == (metric != "server.kv_transfer")


def test_the_scopes_say_what_they_judge() -> None:
    replica = parse_slo("replica.ttft.p99 < 500ms")
    assert replica.is_replica and replica.plain_metric == "ttft" and replica.pool is None
    pool = parse_slo("decode.kv_usage.max < 90%")
    assert pool.pool == "decode" and pool.plain_metric == "server.kv_cache_usage"
    fleet = parse_slo("fleet.imbalance < 1.5")
    assert fleet.is_fleet and not fleet.is_replica and fleet.pool is None
    plain = parse_slo("ttft.p99 < 500ms")
    assert not plain.in_fleet_scope and plain.plain_metric == "ttft"


@pytest.mark.parametrize(
    ("expr", "said"),
    [
        (
            "replica.kv_usage.max < 90%",
            "'kv_usage' has no per-replica form; replica.<metric> takes",
        ),
        ("replica.output_match > 99%", "'output_match' has no per-replica form"),
        ("replica.ttft < 500ms", "'ttft' needs a statistic"),
        ("replica.ttft.p100 < 500ms", "unknown statistic 'p100'"),
        ("replica.error_rate < 1ms", "bad unit 'ms' for error_rate"),
        ("fleet.balance < 1.5", "unknown fleet metric 'fleet.balance'; known: fleet.imbalance"),
        ("fleet.imbalance.max < 1.5", "takes no statistic (got 'max')"),
        ("fleet.imbalance < 50%", "bad unit '%' for fleet.imbalance (a ratio); use 'x'"),
        ("fleet.prefix_hit_rate > 2x", "bad unit 'x' for fleet.prefix_hit_rate (a fraction)"),
        ("decode.queue.p99 < 1s", "unknown server metric 'queue' for pool 'decode'; known:"),
        ("prefill.kv_usage.p99 < 90%", "its statistics are max, mean, min, not 'p99'"),
        ("prefill.queue_time < 1s", "needs a statistic"),
        ("router.preemptions.max == 0", "takes no statistic (got 'max')"),
        ("kv_transfer.p99 < 50", "bad unit '' for a latency"),
        ("kv_transfer < 50ms", "needs a statistic"),
    ],
)
def test_bad_fleet_names_say_the_bad_word_and_the_allowed_ones(expr: str, said: str) -> None:
    with pytest.raises(LlmPerfUsageError) as caught:
        parse_slo(expr)
    assert repr(expr) in str(caught.value)  # said of the expression as written
    assert said in str(caught.value)


def test_an_unknown_metric_lists_the_fleet_scopes() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"replica\.<metric>, fleet\.imbalance.*decode"):
        parse_slo("replicas.ttft.p99 < 1s")


def test_rulesets_take_the_fleet_names_with_their_directions() -> None:
    ruleset = ruleset_from_mapping(
        {
            "targets": {
                "replica.ttft": {"p99": "500ms"},
                "replica.error_rate": "1%",
                "replica.goodput": "90%",
                "fleet.imbalance": 1.5,
                "fleet.prefix_hit_rate": "30%",
                "kv_transfer": {"p99": "50ms"},
                "decode.kv_usage": {"max": "90%"},
                "prefill.queue_time": {"p99": "200ms"},
                "router.prefix_cache_hit_rate": "20%",
                "decode.preemptions": 0,
            },
            "slos": ["fleet.busy_imbalance < 2"],
        },
        source="fleet.yaml",
    )
    assert [s.expr for s in ruleset.slos] == [
        "replica.ttft.p99 < 500ms",
        "replica.error_rate < 1%",
        "replica.goodput >= 90%",
        "fleet.imbalance < 1.5",
        "fleet.prefix_hit_rate >= 30%",
        "kv_transfer.p99 < 50ms",
        "decode.kv_usage.max < 90%",
        "prefill.queue_time.p99 < 200ms",
        "router.prefix_cache_hit_rate >= 20%",
        "decode.preemptions <= 0",
        "fleet.busy_imbalance < 2",
    ]


def test_a_bad_fleet_target_names_the_file_and_key() -> None:
    said = r"fleet.yaml: targets.decode.queue.p99: .*'queue' for pool"
    with pytest.raises(LlmPerfUsageError, match=said):
        ruleset_from_mapping({"targets": {"decode.queue": {"p99": "1s"}}}, source="fleet.yaml")


def test_a_stage_cannot_own_a_fleet_slo() -> None:
    stages = [{"rate": 5, "duration": 1, "slo": "replica.ttft.p99 < 1s"}]
    with pytest.raises(LlmPerfUsageError, match=r"stages\[0\].*judged on whole runs"):
        parse_stages("poisson", stages, open_loop=True)


def test_a_replicas_token_stream_slo_on_embeddings_is_refused() -> None:
    marked = PerfSpec.from_markers(
        (("synthetic",), {"requests": 10}), None, [(("replica.ttft.p99 < 500ms",), {})]
    )
    with pytest.raises(LlmPerfUsageError, match=r"'replica.ttft.p99 < 500ms'.*streams no tokens"):
        check_api_fit(marked, Api.EMBEDDINGS, where="t.py::test_embed")
    fits = PerfSpec.from_markers(
        (("synthetic",), {"requests": 10}), None, [(("replica.e2e.p99 < 1s",), {})]
    )
    check_api_fit(fits, Api.EMBEDDINGS, where="t.py::test_embed")
