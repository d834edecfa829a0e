import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.metrics.sample_size import min_samples
from pytest_llmperf.specs.slo import parse_slo, request_limits


@pytest.mark.parametrize(
    ("expr", "metric", "stat", "op", "target", "unit"),
    [
        ("ttft.p99 < 500ms", "ttft", "p99", "<", 500.0, "ms"),
        ("tpot.p99.9<=0.05s", "tpot", "p99.9", "<=", 50.0, "ms"),
        ("itl.mean < 800us", "itl", "mean", "<", 0.8, "ms"),
        ("e2e.max < 2 s", "e2e", "max", "<", 2000.0, "ms"),
        ("error_rate < 1%", "error_rate", None, "<", 0.01, "fraction"),
        ("blank_rate < 5%", "blank_rate", None, "<", 0.05, "fraction"),
        ("goodput >= 0.95", "goodput", None, ">=", 0.95, "fraction"),
        ("request_throughput > 10 req/s", "request_throughput", None, ">", 10.0, "req/s"),
        ("output_throughput > 1e3 tok/s", "output_throughput", None, ">", 1000.0, "tok/s"),
    ],
)
def test_valid_expressions(expr, metric, stat, op, target, unit) -> None:
    slo = parse_slo(expr)
    assert (slo.metric, slo.stat, slo.op, slo.unit) == (metric, stat, op, unit)
    assert slo.target == pytest.approx(target)


@pytest.mark.parametrize(
    ("expr", "bad_word"),
    [
        ("ttfx.p99 < 5ms", "'ttfx'"),
        ("ttft.p100.5 < 5ms", "'p100.5'"),
        ("ttft.p99 < 5mm", "'mm'"),
        ("ttft.p99 < 5", "a unit is required"),
        ("ttft < 5ms", "needs a statistic"),
        ("error_rate < 1ms", "'ms'"),
        ("error_rate.p99 < 1%", "'p99'"),
        ("ttft.p99 != 5ms", "'!='"),
        ("fast please", "malformed"),
    ],
)
def test_invalid_expressions_name_the_bad_word(expr: str, bad_word: str) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        parse_slo(expr)
    assert bad_word in str(info.value)


def test_holds_uses_the_operator() -> None:
    assert parse_slo("ttft.p99 < 500ms").holds(499.9)
    assert not parse_slo("ttft.p99 < 500ms").holds(500.0)
    assert parse_slo("goodput >= 90%").holds(0.9)


def test_minimum_samples_rule() -> None:
    assert [min_samples(p) for p in (50, 90, 95, 99, 99.9)] == [20, 100, 200, 1000, 10000]
    assert min_samples(None) == 1


def test_request_limits_take_the_tightest_upper_bound() -> None:
    slos = [
        parse_slo(e)
        for e in (
            "ttft.p99 < 500ms",
            "ttft.p50 < 200ms",
            "tpot.p90 <= 40ms",
            "itl.p99 < 100ms",
            "request_throughput > 1 req/s",
        )
    ]
    assert request_limits(slos) == {"ttft": 200.0, "tpot": 40.0}
