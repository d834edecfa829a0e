"""Always-valid percentile verdicts (``until="decided"``): looking after every request
does not inflate the wrong-verdict rate.

Coverage by simulation: lognormal, bimodal and heavy-tailed (Pareto) latencies,
p50, p90, p99, p99.9, targets at, just above (+2%) and just below (−2%) the true
percentile; 10,000 seeded runs per case, each looked at after every one of its
2,000 requests. A run counts as wrong when, at *any* look, the bounds of
:mod:`pytest_llmperf.slo.sequential` gave the wrong verdict (a pass when the true
percentile is >= t, a fail when it is < t; the mirror image for ``>``): a
superset of the runs a stop at the first decision, or a verdict at the end,
gets wrong. Allowed: 1 − confidence plus three binomial standard deviations of
the simulation's noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_percentile_coverage import DISTRIBUTIONS, Sampler

from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.slo.quantile_bounds import rank_bounds
from pytest_llmperf.slo.sequential import (
    decide_run,
    log_evidence,
    sequential_rank_bounds,
    sequential_rank_table,
    stop_blockers,
)
from pytest_llmperf.specs.slo import parse_slo

RUNS = 10_000
LOOKS = 2_000  # a look after every request
CONFIDENCE = 0.99
TARGETS = {"at": 1.0, "just above": 1.02, "just below": 0.98}
ALLOWED = (1 - CONFIDENCE) + 3 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / RUNS)
PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def wrong_anywhere(
    sampler: Sampler, targets: list[float], percentile: float, seed: int
) -> np.ndarray:
    """``(len(targets), 2, 2)``: per target, per ``pass``/``fail``, the share of runs whose
    bounds ever said so at one of the looks, and (last axis) the share that said so by
    the end, counted for ``pN < t`` (its mirror for ``>``)."""
    k_lo, k_hi = sequential_rank_table(LOOKS, percentile, CONFIDENCE)
    lo, hi = k_lo[1:], k_hi[1:]  # index n - 1: after n requests
    rng = np.random.default_rng(seed)
    hits = np.zeros((len(targets), 2), dtype=np.int64)
    chunk = 1_000
    for _ in range(RUNS // chunk):
        x = sampler(rng, (chunk, LOOKS))
        for i, t in enumerate(targets):
            m = np.cumsum(x < np.float32(t), axis=1, dtype=np.int32)
            hits[i, 0] += int(np.count_nonzero((m >= hi).any(axis=1)))
            hits[i, 1] += int(np.count_nonzero((m <= lo).any(axis=1)))
    return hits / RUNS


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
@pytest.mark.parametrize("percentile", PERCENTILES)
def test_looking_after_every_request_keeps_wrong_verdicts_under_one_minus_confidence(
    name: str, percentile: float
) -> None:
    sampler, quantile = DISTRIBUTIONS[name]
    q = quantile(percentile / 100)
    targets = [q * f for f in TARGETS.values()]
    seed = 27_500 + list(DISTRIBUTIONS).index(name) * 10 + PERCENTILES.index(percentile)
    shares = wrong_anywhere(sampler, targets, percentile, seed)
    for (where, _), t, (passed, failed) in zip(TARGETS.items(), targets, shares, strict=True):
        # pN < t: a pass is wrong when q >= t, a fail when q < t;
        # pN > t: a pass (the lower bound over t, i.e. ``failed`` above) is wrong when q <= t
        wrong = {"<": passed if q >= t else failed, ">": failed if q <= t else passed}
        for op, rate in wrong.items():
            assert rate <= ALLOWED, (
                f"{name} p{percentile:g} {op} target {where} the true value ({t:.4g} vs "
                f"{q:.4g}), looked at after each of {LOOKS} requests: {rate:.2%} of {RUNS} "
                f"runs wrong at some look, allowed {ALLOWED:.2%}"
            )


def test_far_targets_are_decided_early_and_near_ones_are_not() -> None:
    """The point of stopping: p90 of a lognormal with the target at twice (half) the true
    value is decided within a small fraction of 2,000 requests."""
    sampler, quantile = DISTRIBUTIONS["lognormal"]
    q = quantile(0.9)
    k_lo, k_hi = sequential_rank_table(LOOKS, 90.0, CONFIDENCE)
    n = np.arange(1, LOOKS + 1)
    x = sampler(np.random.default_rng(7), (500, LOOKS))
    m_far_pass = np.cumsum(x < np.float32(2 * q), axis=1)
    m_far_fail = np.cumsum(x < np.float32(q / 2), axis=1)
    m_near = np.cumsum(x < np.float32(q), axis=1)
    first_pass = np.argmax(m_far_pass >= k_hi[n], axis=1) + 1
    first_fail = np.argmax(m_far_fail <= k_lo[n], axis=1) + 1
    assert (m_far_pass >= k_hi[n]).any(axis=1).all() and np.median(first_pass) <= 150
    assert (m_far_fail <= k_lo[n]).any(axis=1).all() and np.median(first_fail) <= 60
    decided_near = ((m_near >= k_hi[n]) | (m_near <= k_lo[n])).any(axis=1)
    assert decided_near.mean() <= 2 * (1 - CONFIDENCE) + 0.01


def test_the_bounds_are_the_table_and_wider_than_the_fixed_size_ones() -> None:
    k_lo, k_hi = sequential_rank_table(3000, 99.0, CONFIDENCE)
    for n in (1, 5, 20, 100, 459, 460, 1000, 3000):
        r_lo, r_hi = sequential_rank_bounds(n, 99.0, CONFIDENCE)
        assert r_lo == (k_lo[n] + 1 if k_lo[n] >= 0 else None)
        assert r_hi == (k_hi[n] if k_hi[n] <= n else None)
        f_lo, f_hi = rank_bounds(n, 99.0, CONFIDENCE)
        assert (r_lo or 0) <= (f_lo or 0)
        assert (r_hi or n + 1) >= (f_hi or n + 1)
    # the evidence rises with the count under the target (passing side), falls (failing)
    m = np.arange(0, 101)
    assert np.all(np.diff(log_evidence(100, m, 99.0, +1)) > 0)
    assert np.all(np.diff(log_evidence(100, m, 99.0, -1)) < 0)
    # huge runs: no overflow, an interval around the 99th rank
    r_lo, r_hi = sequential_rank_bounds(10**9, 99.0, CONFIDENCE)
    assert r_lo is not None and r_hi is not None
    assert r_lo < 0.99 * 10**9 < r_hi and (r_hi - r_lo) < 0.002 * 10**9


def _accumulator(values_ms: np.ndarray) -> MetricsAccumulator:
    acc = MetricsAccumulator()
    for v in values_ms:
        acc.histograms["ttft"].record_ns(round(float(v) * 1e6))
    acc.issued = acc.completed = len(values_ms)
    return acc


def test_a_run_is_decided_from_its_live_histograms() -> None:
    x = np.random.default_rng(3).lognormal(3.0, 0.1, 300)  # ~ 20 ms, p90 ~ 22.7 ms
    far, near = parse_slo("ttft.p90 < 200ms"), parse_slo("ttft.p90 < 22.7ms")
    fails = parse_slo("ttft.p99 < 5ms")
    early = decide_run([far], _accumulator(x[:10]), confidence=CONFIDENCE)
    assert not early.done and "needs >= 20" in early.why
    done = decide_run([far, fails], _accumulator(x), confidence=CONFIDENCE)
    assert done.done and done.verdicts == {far.expr: True, fails.expr: False}
    assert done.samples == 300 and "decided after 300 samples" in done.why
    pending = decide_run([far, near], _accumulator(x), confidence=CONFIDENCE)
    assert not pending.done and pending.verdicts[near.expr] is None
    assert near.expr in pending.why
    assert not decide_run([], _accumulator(x)).done


def test_slos_without_an_always_valid_verdict_keep_the_run_going() -> None:
    slos = [
        parse_slo("ttft.p90 < 200ms"),
        parse_slo("ttft.mean < 200ms"),
        parse_slo("ttft.max < 200ms"),
        parse_slo("error_rate < 1%"),
        parse_slo("ttft.p50 == 20ms"),
    ]
    assert stop_blockers(slos) == [s.expr for s in slos[1:]]
    x = np.full(100, 20.0)
    decision = decide_run(slos, _accumulator(x))
    assert not decision.done and "not decidable before the end" in decision.why


def test_a_stop_waits_for_its_rulesets_minimum_samples_and_duration() -> None:
    far = parse_slo("ttft.p90 < 200ms")
    acc = _accumulator(np.full(300, 20.0))
    acc.window_start_ns, acc.window_end_ns = 0, 2_000_000_000  # 2 s measured
    assert decide_run([far], acc, confidence=CONFIDENCE).done
    short = decide_run([far], acc, confidence=CONFIDENCE, bars={far: (1000, 0.0)})
    assert not short.done and "has 300 of its ruleset's 1000 samples" in short.why
    brief = decide_run([far], acc, confidence=CONFIDENCE, bars={far: (100, 60.0)})
    assert not brief.done and "2.0 s of its ruleset's 60 s" in brief.why
    met = decide_run([far], acc, confidence=CONFIDENCE, bars={far: (300, 2.0)})
    assert met.done and met.verdicts == {far.expr: True}


def test_requests_in_flight_count_at_their_worst_for_each_side() -> None:
    # 200 fast samples, and 200 requests still in flight (the slow ones end last):
    # a pass would need them under the target, a fail over it, so neither is decided
    passes, fails = parse_slo("ttft.p50 < 100ms"), parse_slo("ttft.p50 > 100ms")
    acc = _accumulator(np.full(200, 20.0))
    assert decide_run([passes], acc, confidence=CONFIDENCE).verdicts == {passes.expr: True}
    assert decide_run([fails], acc, confidence=CONFIDENCE).verdicts == {fails.expr: False}
    held = decide_run([passes, fails], acc, confidence=CONFIDENCE, pending=200)
    assert not held.done and held.verdicts == {passes.expr: None, fails.expr: None}
    # a few in flight do not hold back a clear answer
    few = decide_run([passes, fails], acc, confidence=CONFIDENCE, pending=10)
    assert few.done and few.verdicts == {passes.expr: True, fails.expr: False}
