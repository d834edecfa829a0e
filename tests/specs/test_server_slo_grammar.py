"""SLOs on the server's own metrics: ``server.<name>[.<stat>] <op> <value>[unit]``."""

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.server_names import COMMON_METRICS, MetricKind
from pytest_llmperf.specs.slo import parse_slo, request_limits


@pytest.mark.parametrize(
    ("expr", "metric", "stat", "op", "target", "unit"),
    [
        ("server.preemptions == 0", "server.preemptions", None, "==", 0.0, "count"),
        ("server.kv_cache_usage.max < 95%", "server.kv_cache_usage", "max", "<", 0.95, "fraction"),
        (
            "server.kv_cache_usage.mean <= 0.5",
            "server.kv_cache_usage",
            "mean",
            "<=",
            0.5,
            "fraction",
        ),
        ("server.queue_time.p99 < 50ms", "server.queue_time", "p99", "<", 50.0, "ms"),
        ("server.ttft.p99.9 < 1s", "server.ttft", "p99.9", "<", 1000.0, "ms"),
        ("server.itl.p75 < 900us", "server.itl", "p75", "<", 0.9, "ms"),
        (
            "server.prefix_cache_hit_rate > 50%",
            "server.prefix_cache_hit_rate",
            None,
            ">",
            0.5,
            "fraction",
        ),
        ("server.running.max >= 1", "server.running", "max", ">=", 1.0, "count"),
        ("ttft.p99 == 5ms", "ttft", "p99", "==", 5.0, "ms"),
    ],
)
def test_server_metric_expressions(expr, metric, stat, op, target, unit) -> None:
    slo = parse_slo(expr)
    assert (slo.metric, slo.stat, slo.op, slo.unit) == (metric, stat, op, unit)
    assert slo.target == pytest.approx(target)
    assert slo.is_server == metric.startswith("server.")


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("server.foo.p99 < 5ms", "unknown server metric 'server.foo'"),
        ("server.preemptions.max < 1", "takes no statistic"),
        ("server.kv_cache_usage.p99 < 90%", "max, mean, min"),
        ("server.queue_time < 5ms", "needs a statistic, e.g. server.queue_time.p99"),
        ("server.queue_time.p99 < 5", "a unit is required"),
        ("server.queue_time.p100 < 5ms", "'p100'"),
        ("server.preemptions < 1ms", "takes no unit"),
        ("server.kv_cache_usage.max < 90ms", "'%' or no unit"),
        ("server.preemptions != 0", "'!='"),
    ],
)
def test_bad_server_expressions_name_the_problem(expr, says) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        parse_slo(expr)
    assert says in str(info.value) and expr in str(info.value)


def test_every_common_name_parses_with_its_kind() -> None:
    for name, (kind, unit) in COMMON_METRICS.items():
        if kind is MetricKind.LATENCY:
            expr = f"{name}.p99 < 10ms"
        elif kind is MetricKind.GAUGE:
            expr = f"{name}.max < 10" + ("%" if unit == "fraction" else "")
        else:
            expr = f"{name} >= 0"
        assert parse_slo(expr).metric == name


def test_server_latencies_set_no_per_request_goodput_limit() -> None:
    assert request_limits([parse_slo("server.ttft.p99 < 5ms"), parse_slo("ttft.p99 < 9ms")]) == {
        "ttft": 9.0
    }
