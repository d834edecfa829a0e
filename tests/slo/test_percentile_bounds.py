"""Percentile verdicts from distribution-free confidence bounds (issue 27, part 1).

The runs are built from request records with known TTFTs, so every bound is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import comb

import pytest

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.options import OPTIONS, LlmPerfOptions
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.quantile_bounds import rank_bounds, samples_to_decide
from pytest_llmperf.slo.verdicts import Verdict, evaluate
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.specs.slo import parse_slo

MS = 1_000_000
BASE_NS = 10_000 * MS


def run_of(ttft_ms: Sequence[float]) -> RunResult:
    """A run whose requests had these TTFTs (one every 10 ms)."""
    acc = MetricsAccumulator()
    for i, ttft in enumerate(ttft_ms):
        t0 = BASE_NS + i * 10 * MS
        first = t0 + round(ttft * MS)
        record = RequestRecord(index=i, t_sched=t0, t_send=t0, t_first=first)
        record.t_last = record.t_end = first + 3 * MS
        record.token_events = 4
        record.gaps_ns = [MS] * 3
        record.usage_completion_tokens = 4
        acc.add(record)
    return RunResult(
        workload={"name": "synthetic"}, load={}, endpoint={}, accumulator=acc, label="run0"
    )


def exact_ranks(n: int, percentile: float, confidence: float) -> tuple[int | None, int | None]:
    """The definition, in exact rational arithmetic: ``percentile`` and ``confidence`` are the
    decimals as written (0.9 is 9/10, not the nearest double), so a tail probability equal
    to the confidence is a tie, and a tie reaches it."""
    p = Fraction(repr(percentile)) / 100
    c = Fraction(repr(confidence))
    cdf, total = [], Fraction(0)
    for j in range(n + 1):
        total += comb(n, j) * p**j * (1 - p) ** (n - j)
        cdf.append(total)
    r_hi = next((r for r in range(1, n + 1) if cdf[r - 1] >= c), None)
    r_lo = max((r for r in range(1, n + 1) if 1 - cdf[r - 1] >= c), default=None)
    return r_lo, r_hi


@pytest.mark.parametrize("n", [1, 2, 5, 10, 46, 100, 200, 333])
@pytest.mark.parametrize("percentile", [5, 50, 75, 90, 99, 99.9])
@pytest.mark.parametrize("confidence", [0.6, 0.9, 0.99, 0.999])
def test_rank_bounds_are_the_exact_binomial_ones(
    n: int, percentile: float, confidence: float
) -> None:
    assert rank_bounds(n, percentile, confidence) == exact_ranks(n, percentile, confidence)


@pytest.mark.parametrize(("percentile", "confidence"), [(90, 0.9), (99, 0.99), (99.9, 0.999)])
def test_a_tail_probability_equal_to_the_confidence_reaches_it_on_every_cpu(
    percentile: float, confidence: float
) -> None:
    # One sample: P(X(1) <= q) = P(B >= 1) = p, here exactly the confidence. In floats
    # that probability lands a bit under or over c depending on the CPU's exp (numpy's
    # AVX-512 path or libm): the tie rule makes the rank the same on both.
    assert exact_ranks(1, percentile, confidence) == (1, None)
    assert rank_bounds(1, percentile, confidence) == (1, None)


def test_the_issue_s_46_sample_stage_passes_p90_under_200ms() -> None:
    ttft = [20.5 + 2.5 * i / 45 for i in range(46)]  # every one 20.5-23 ms
    v = evaluate(parse_slo("ttft.p90 < 200ms"), run_of(ttft))
    assert v.verdict is Verdict.PASS, v.reason
    # r_hi = 46 (0.9**46 < 1%): the upper bound is the slowest sample, exactly
    assert v.samples == 46 and v.confidence == 0.99
    assert v.interval is not None and v.interval[1] == pytest.approx(23.0, abs=1e-3)
    assert v.interval[0] >= 20.5 - 0.01
    assert v.to_dict()["interval"] == v.interval and v.to_dict()["confidence"] == 0.99


def test_the_issue_s_200_samples_above_20ms_fail_p99_under_5ms() -> None:
    ttft = [20.1 + i * 0.1 for i in range(200)]
    v = evaluate(parse_slo("ttft.p99 < 5ms"), run_of(ttft))
    assert v.verdict is Verdict.FAIL
    lower, upper = v.interval or (0.0, None)
    assert lower > 20 and upper is None  # 200 samples bound no p99 from above at 99%
    assert v.reason == ""


def test_a_target_inside_the_interval_is_inconclusive_and_says_how_many_would_decide() -> None:
    ttft = [float(i) for i in range(1, 101)]  # 1..100 ms: p90's 99% interval is [83, 97] ms
    v = evaluate(parse_slo("ttft.p90 < 95ms"), run_of(ttft))
    assert v.verdict is Verdict.INCONCLUSIVE
    lower, upper = v.interval or (0.0, None)
    assert upper is not None and lower < 95 < upper
    assert "holds the target; about " in v.reason and "run has 100" in v.reason
    needed = int(v.reason.split("about ")[1].split()[0])
    assert needed > 100
    # the same distribution, that many samples: decided (a pass: 94% of it is under 95 ms)
    more = [100.0 * (i + 1) / needed for i in range(needed)]
    assert evaluate(parse_slo("ttft.p90 < 95ms"), run_of(more)).verdict is Verdict.PASS
    # and about: half as many do not decide it
    half = [100.0 * (i + 1) / (needed // 2) for i in range(needed // 2)]
    assert evaluate(parse_slo("ttft.p90 < 95ms"), run_of(half)).verdict is Verdict.INCONCLUSIVE


def test_a_target_at_the_observed_percentile_is_never_decided() -> None:
    assert samples_to_decide(100, 90, 10, 90, 0.99) is None
    v = evaluate(parse_slo("ttft.p50 < 50.5ms"), run_of([float(i) for i in range(1, 101)]))
    assert v.verdict is Verdict.INCONCLUSIVE
    assert "more samples would not decide it" in v.reason


@pytest.mark.parametrize(
    ("expr", "verdict"),
    [
        ("ttft.p90 < 200ms", Verdict.PASS),
        ("ttft.p90 <= 200ms", Verdict.PASS),
        ("ttft.p90 > 10ms", Verdict.PASS),
        ("ttft.p90 >= 10ms", Verdict.PASS),
        ("ttft.p90 < 22ms", Verdict.FAIL),
        ("ttft.p90 <= 10ms", Verdict.FAIL),
        ("ttft.p90 > 200ms", Verdict.FAIL),
        ("ttft.p90 >= 200ms", Verdict.FAIL),
        ("ttft.p90 < 22.7ms", Verdict.INCONCLUSIVE),
        ("ttft.p90 > 22.7ms", Verdict.INCONCLUSIVE),
    ],
)
def test_every_order_operator_reads_the_bound_on_its_side(expr: str, verdict: Verdict) -> None:
    ttft = [20.5 + 2.5 * i / 45 for i in range(46)]
    assert evaluate(parse_slo(expr), run_of(ttft)).verdict is verdict


def test_equality_keeps_the_point_rule_mean_and_max_are_compared_as_observed() -> None:
    run = run_of([20.0] * 46)
    eq = evaluate(parse_slo("ttft.p90 == 20ms"), run)
    assert (
        eq.verdict is Verdict.INCONCLUSIVE and eq.reason == "p90 needs >= 100 samples, run has 46"
    )
    assert eq.interval is None and eq.confidence is None
    for expr in ("ttft.mean < 21ms", "ttft.max <= 20ms"):
        v = evaluate(parse_slo(expr), run_of([20.0]))
        assert v.verdict is Verdict.PASS and v.interval is None


def test_a_bound_is_taken_at_the_conservative_edge_of_its_hdr_bucket() -> None:
    run = run_of([100.0] * 150 + [200.0] * 50)  # p50's upper bound is a 100 ms sample
    at = evaluate(parse_slo("ttft.p50 < 100.02ms"), run)
    # the bucket holding 100 ms is 64 µs wide: its top, not 100.000, is the bound
    assert at.verdict is Verdict.INCONCLUSIVE
    assert at.interval is not None and at.interval[1] is not None and at.interval[1] > 100.02
    assert evaluate(parse_slo("ttft.p50 < 100.1ms"), run).verdict is Verdict.PASS
    low = evaluate(parse_slo("ttft.p90 > 199.98ms"), run)  # the lower bound at its bucket's bottom
    assert low.verdict is Verdict.INCONCLUSIVE
    assert low.interval is not None and low.interval[0] < 199.98


def test_confidence_per_slo_and_session_wide() -> None:
    run = run_of([20.0] * 30)  # 0.9**30 = 4.2%: decides p90 at 95%, not at 99%
    slo = parse_slo("ttft.p90 < 200ms")
    assert evaluate(slo, run).verdict is Verdict.INCONCLUSIVE
    assert evaluate(slo, run, confidence=0.95).verdict is Verdict.PASS
    spec = PerfSpec.from_markers(None, None, [(("ttft.p90 < 200ms",), {"confidence": 0.95})])
    (own,) = spec.slos
    assert own.confidence == 0.95
    judged = evaluate(own, run, confidence=0.999)  # the SLO's own wins
    assert judged.verdict is Verdict.PASS and judged.confidence == 0.95


@pytest.mark.parametrize("bad", [0.5, 1, 1.5, "high", True, float("nan")])
def test_a_bad_per_slo_confidence_is_a_usage_error(bad: object) -> None:
    with pytest.raises(LlmPerfUsageError, match=r"llm_slo\(confidence=\)"):
        PerfSpec.from_markers(None, None, [(("ttft.p90 < 200ms",), {"confidence": bad})])


@pytest.mark.parametrize("bad", ["0.5", "1", "99", "abc", "nan"])
def test_a_bad_llm_confidence_is_a_usage_error_naming_option_and_value(bad: str) -> None:
    given = {"--llm-confidence": bad}
    with pytest.raises(LlmPerfUsageError) as info:
        LlmPerfOptions.resolve(lambda o: given.get(o.flag, o.default))
    assert "--llm-confidence" in str(info.value) and repr(bad) in str(info.value)


def test_llm_confidence_default_and_value() -> None:
    assert any(o.flag == "--llm-confidence" for o in OPTIONS)
    default = LlmPerfOptions.resolve(lambda o: o.default)
    assert default.confidence == 0.99
    given = {"--llm-confidence": "0.95"}
    assert LlmPerfOptions.resolve(lambda o: given.get(o.flag, o.default)).confidence == 0.95
