"""SLOs on the server's own metrics judged on a run's :class:`ServerMetrics`.

The summaries are built by hand with known numbers (how they are scraped and
mapped is tests/server_metrics'), so each verdict and reason is exact.
"""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.server_metrics.summary import ServerFamily, ServerMetrics
from pytest_llmperf.slo.verdicts import Verdict, evaluate, evaluate_runs
from pytest_llmperf.specs.slo import parse_slo
from pytest_llmperf.specs.stages import Stage


def run_with(server: ServerMetrics | None, **kw: object) -> RunResult:
    result = RunResult(
        workload={}, load={}, endpoint={}, accumulator=MetricsAccumulator(), label="run0"
    )
    result.server_metrics = server
    for key, value in kw.items():
        setattr(result, key, value)
    return result


def vllm_view(**metrics: dict[str, float]) -> ServerMetrics:
    return ServerMetrics(
        source="http://127.0.0.1:9/metrics",
        family=ServerFamily.VLLM,
        metrics=dict(metrics),
        scrapes=3,
        buckets={
            # 150 queue times: 100 under 10 ms, 45 under 20 ms, 5 under 50 ms
            "server.queue_time": [[10.0, 100], [20.0, 45], [50.0, 5], [math.inf, 0]],
        },
    )


QUEUE = {"p50": 10.0, "p90": 20.0, "p99": 50.0, "mean": 9.0, "max": 50.0, "count": 150}


@pytest.mark.parametrize(
    ("expr", "verdict", "observed"),
    [
        ("server.preemptions == 0", Verdict.PASS, 0.0),
        ("server.preemptions == 0", Verdict.FAIL, 3.0),
        ("server.kv_cache_usage.max < 95%", Verdict.PASS, 0.5),
        ("server.kv_cache_usage.max < 40%", Verdict.FAIL, 0.5),
        ("server.queue_time.p50 <= 10ms", Verdict.PASS, 10.0),
        ("server.queue_time.p90 < 10ms", Verdict.FAIL, 20.0),  # all of p90's interval over
        ("server.queue_time.p90 < 20ms", Verdict.INCONCLUSIVE, 20.0),  # its bucket: (10, 20]
    ],
)
def test_server_slos_pass_and_fail_on_the_servers_numbers(expr, verdict, observed) -> None:
    preemptions = 3.0 if verdict is Verdict.FAIL and "preemptions" in expr else 0.0
    server = vllm_view(
        **{
            "server.preemptions": {"value": preemptions},
            "server.kv_cache_usage": {"max": 0.5, "mean": 0.3, "min": 0.0},
            "server.queue_time": QUEUE,
        }
    )
    judged = evaluate(parse_slo(expr), run_with(server))
    assert (judged.verdict, judged.observed) == (verdict, observed)


def test_any_percentile_is_read_from_the_bucket_deltas_at_the_upper_bound() -> None:
    server = vllm_view(**{"server.queue_time": QUEUE})
    # rank ceil(0.7 * 150) = 105 falls in the (10, 20] bucket
    judged = evaluate(parse_slo("server.queue_time.p70 < 15ms"), run_with(server))
    assert (judged.verdict, judged.observed) == (Verdict.INCONCLUSIVE, 20.0)
    # a target inside the bucket: the buckets cannot place p70 on either side of it
    assert judged.interval == (0.0, 20.0) and "more samples would not decide it" in judged.reason
    decided = evaluate(parse_slo("server.queue_time.p70 < 25ms"), run_with(server))
    assert (decided.verdict, decided.interval) == (Verdict.PASS, (0.0, 20.0))


def test_a_percentile_is_judged_by_its_bounds_like_a_client_one() -> None:
    server = vllm_view(**{"server.queue_time": QUEUE})
    judged = evaluate(parse_slo("server.queue_time.p99 < 100ms"), run_with(server))
    # 150 samples bound p99 from below only (1 - 0.99**150 < 99%): upper bound unbounded
    assert judged.verdict is Verdict.INCONCLUSIVE
    assert judged.interval == (10.0, None) and judged.samples == 150
    assert judged.reason.startswith("0.99 interval of p99 [10.0 ms, ∞] holds the target; about ")
    assert "samples would decide it" in judged.reason


def test_missing_server_metrics_are_inconclusive_with_the_reason() -> None:
    slo = parse_slo("server.preemptions == 0")
    off = evaluate(slo, run_with(None))
    assert off.verdict is Verdict.INCONCLUSIVE and "--llm-server-metrics off" in off.reason
    failed = ServerMetrics(source="http://h/metrics", missing="GET http://h/metrics: 404")
    judged = evaluate(slo, run_with(failed))
    assert (judged.verdict, judged.reason) == (Verdict.INCONCLUSIVE, "GET http://h/metrics: 404")
    llama = ServerMetrics(source="http://h/metrics", family=ServerFamily.LLAMACPP, scrapes=2)
    judged = evaluate(slo, run_with(llama))
    assert judged.reason == "the server (llama.cpp) does not export server.preemptions"


def test_a_generator_bound_run_cannot_judge_the_servers_metrics_either() -> None:
    server = vllm_view(**{"server.preemptions": {"value": 0.0}})
    bound = {"generator_bound": True, "reasons": ["schedule lag p99 12 ms"]}
    judged = evaluate(parse_slo("server.preemptions == 0"), run_with(server, self_check=bound))
    assert judged.verdict is Verdict.INCONCLUSIVE
    assert judged.reason == "load generator bound: schedule lag p99 12 ms"


def test_a_staged_run_judges_each_stage_on_its_own_window() -> None:
    calm = vllm_view(**{"server.preemptions": {"value": 0.0}})
    busy = vllm_view(**{"server.preemptions": {"value": 7.0}})
    stages = (Stage(rate=1.0, duration_s=1.0), Stage(rate=9.0, duration_s=1.0))
    run = run_with(calm, stage_plan=stages, stage_server_metrics=[calm, busy])
    verdicts = evaluate_runs([parse_slo("server.preemptions == 0")], [run])
    assert [(v.stage, v.verdict, v.observed) for v in verdicts] == [
        (0, Verdict.PASS, 0.0),
        (1, Verdict.FAIL, 7.0),
    ]


@pytest.mark.parametrize(
    ("expr", "verdict"),
    [
        ("server.queue_time.p99 < 40ms", Verdict.FAIL),  # beyond 50 ms: over any target below
        ("server.queue_time.p99 > 40ms", Verdict.PASS),
        ("server.queue_time.p99 < 80ms", Verdict.INCONCLUSIVE),  # somewhere above 50 ms
    ],
)
def test_a_percentile_in_the_open_top_bucket_decides_only_below_its_bound(expr, verdict) -> None:
    server = vllm_view(**{"server.queue_time": {"count": 1000}})
    server.buckets["server.queue_time"] = [[10.0, 500], [50.0, 480], [math.inf, 20]]
    judged = evaluate(parse_slo(expr), run_with(server))
    assert (judged.verdict, judged.observed) == (verdict, None)
    assert judged.reason.startswith("p99 is beyond the server's last finite bucket (> 50 ms)")
    assert judged.interval == (50.0, None)
