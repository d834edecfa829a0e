"""The server's statistics against a baseline's: only where named, decided by buckets."""

from __future__ import annotations

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.server_metrics.summary import ServerFamily, ServerMetrics
from pytest_llmperf.slo.regression import RegressionVerdict, Thresholds
from pytest_llmperf.slo.server_regression import compare_server_metrics


def queue(p99: float, p99_lo: float, count: int = 2000, mean: float = 5.0) -> dict[str, float]:
    return {"p99": p99, "p99_lo": p99_lo, "mean": mean, "count": count}


def side(**stats: float) -> ServerMetrics:
    return ServerMetrics("http://h/metrics", ServerFamily.VLLM, {"server.queue_time": stats})


THRESHOLDS = Thresholds.parse("server.queue_time.p99=20%,server.queue_time.mean=10%")


@pytest.mark.parametrize(
    ("before", "after", "verdict"),
    [
        (queue(20, 10), queue(50, 20), RegressionVerdict.REGRESSED),  # next bucket up
        (queue(20, 10), queue(20, 10), RegressionVerdict.UNCHANGED),
        (queue(50, 20), queue(20, 10), RegressionVerdict.IMPROVED),
        # a wide bucket: 25 reads 25% slower, but the current bucket (10, 25] holds 20 too
        (queue(20, 10), queue(25, 10), RegressionVerdict.UNCHANGED),
    ],
)
def test_percentiles_change_only_when_the_buckets_do_not_overlap(before, after, verdict) -> None:
    checks = compare_server_metrics(
        side(**before).to_dict(), side(**after), THRESHOLDS, run="run0", compared_with="b.json"
    )
    by_stat = {c.stat: c for c in checks}
    assert by_stat["p99"].verdict is verdict
    assert by_stat["p99"].metric == "server.queue_time" and by_stat["p99"].run == "run0"


def test_a_mean_needs_only_the_threshold() -> None:
    checks = compare_server_metrics(
        side(**queue(20, 10, mean=5.0)).to_dict(), side(**queue(20, 10, mean=6.0)), THRESHOLDS
    )
    (mean,) = [c for c in checks if c.stat == "mean"]
    assert (mean.verdict, mean.change) == (RegressionVerdict.REGRESSED, pytest.approx(0.2))


def test_missing_sides_and_small_samples_are_inconclusive_with_the_reason() -> None:
    none = compare_server_metrics(None, side(**queue(20, 10)), THRESHOLDS)
    assert {c.verdict for c in none} == {RegressionVerdict.INCONCLUSIVE}
    assert none[0].reason == "the baseline has no server.queue_time p99"
    gone = ServerMetrics("http://h/metrics", missing="GET http://h/metrics: 404")
    checks = compare_server_metrics(side(**queue(20, 10)).to_dict(), gone, THRESHOLDS)
    assert checks[0].reason == "this run has no server.queue_time p99 (GET http://h/metrics: 404)"
    few = compare_server_metrics(
        side(**queue(20, 10, count=50)).to_dict(), side(**queue(50, 20)), THRESHOLDS
    )
    assert (
        few[0].reason
        == "p99 needs >= 1000 samples on both sides, have 50 (baseline) and 2000 (current)"
    )


def test_a_zero_baseline_against_a_nonzero_run_is_inconclusive() -> None:
    """A server that queued nothing in the baseline (mean 0 ms): any queueing now is a
    change relative to 0, undefined, so a note (it was an infinite change, "regressed");
    0 against 0 is no change."""
    checks = compare_server_metrics(
        side(**queue(20, 10, mean=0.0)).to_dict(), side(**queue(20, 10, mean=0.4)), THRESHOLDS
    )
    (mean,) = [c for c in checks if c.stat == "mean"]
    assert (mean.verdict, mean.change) == (RegressionVerdict.INCONCLUSIVE, None)
    assert mean.reason == "server.queue_time.mean: baseline is 0 ms: a relative change is undefined"
    assert (mean.baseline, mean.current) == (0.0, 0.4)
    zero = queue(0, 0, mean=0.0)
    both = compare_server_metrics(side(**zero).to_dict(), side(**zero), THRESHOLDS)
    assert {(c.verdict, c.change, c.reason) for c in both} == {
        (RegressionVerdict.UNCHANGED, 0.0, "")
    }


def test_nothing_is_compared_unless_named() -> None:
    assert (
        compare_server_metrics(side(**queue(20, 10)).to_dict(), side(**queue(90, 50)), Thresholds())
        == []
    )


@pytest.mark.parametrize(
    "bad", ["server.kv_cache_usage.max=5%", "server.queue_time=5%", "server.foo.p99=1%"]
)
def test_a_bad_server_threshold_names_itself(bad: str) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        Thresholds.parse(bad)
    assert bad.split("=")[0] in str(info.value)
