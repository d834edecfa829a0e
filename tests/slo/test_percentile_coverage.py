"""Coverage by simulation: percentile verdicts are wrong at most 1 − confidence of the time.

For lognormal, bimodal and heavy-tailed (Pareto) latencies, and p50, p90, p99,
p99.9 with targets at, just above (+2%) and just below (−2%) the true
percentile: 10,000 seeded synthetic runs per case. A run's verdict on
``pN < t`` follows from the count ``m`` of its samples under ``t``: a pass
when ``m >= r_hi``, a fail when ``m <= r_lo − 1`` (:mod:`.quantile_bounds`),
which is what :func:`~pytest_llmperf.slo.verdicts.evaluate` decides on the
histogram (checked on a sample of runs below). Wrong: a pass when the true
percentile is >= t, a fail when it is < t (for ``>``, the mirror image). The
allowed rate is 1 − confidence plus three binomial standard deviations of the
simulation's own noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np
import pytest

from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.quantile_bounds import rank_bounds
from pytest_llmperf.slo.verdicts import Verdict, evaluate
from pytest_llmperf.specs.slo import parse_slo

RUNS = 10_000
CONFIDENCE = 0.99
SAMPLES = {50.0: 60, 90.0: 150, 99.0: 600, 99.9: 3000}  # per run
TARGETS = {"at": 1.0, "just above": 1.02, "just below": 0.98}
ALLOWED = (1 - CONFIDENCE) + 3 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / RUNS)
_N = NormalDist()

Sampler = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]


def _lognormal(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return np.exp(3.0 + 0.5 * rng.standard_normal(shape, dtype=np.float32))


def _lognormal_q(p: float) -> float:
    return math.exp(3.0 + 0.5 * _N.inv_cdf(p))


# two modes: 70% around 20 ms (cache hits), 30% around 80 ms
_MODES = ((0.7, math.log(20.0), 0.1), (0.3, math.log(80.0), 0.2))


def _bimodal(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    z = rng.standard_normal(shape, dtype=np.float32)
    first = rng.random(shape, dtype=np.float32) < _MODES[0][0]
    mu = np.where(first, _MODES[0][1], _MODES[1][1]).astype(np.float32)
    sigma = np.where(first, _MODES[0][2], _MODES[1][2]).astype(np.float32)
    return np.exp(mu + sigma * z)


def _bimodal_q(p: float) -> float:
    def cdf(x: float) -> float:
        return sum(w * _N.cdf((math.log(x) - mu) / s) for w, mu, s in _MODES)

    lo, hi = 1e-3, 1e4
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return math.sqrt(lo * hi)


_ALPHA, _XM = 1.5, 10.0  # Pareto: infinite variance


def _pareto(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    u = 1.0 - rng.random(shape, dtype=np.float64)  # in (0, 1]
    return (_XM * u ** (-1.0 / _ALPHA)).astype(np.float32)


def _pareto_q(p: float) -> float:
    return _XM * (1.0 - p) ** (-1.0 / _ALPHA)


DISTRIBUTIONS: dict[str, tuple[Sampler, Callable[[float], float]]] = {
    "lognormal": (_lognormal, _lognormal_q),
    "bimodal": (_bimodal, _bimodal_q),
    "pareto": (_pareto, _pareto_q),
}


def counts_below(sampler: Sampler, n: int, targets: list[float], seed: int) -> np.ndarray:
    """``(len(targets), RUNS)``: each run's number of samples under each target."""
    rng = np.random.default_rng(seed)
    out = np.empty((len(targets), RUNS), dtype=np.int64)
    chunk = max(1, 2_000_000 // n)
    for start in range(0, RUNS, chunk):
        stop = min(RUNS, start + chunk)
        x = sampler(rng, (stop - start, n))
        for i, t in enumerate(targets):
            out[i, start:stop] = np.count_nonzero(x < np.float32(t), axis=1)
    return out


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
@pytest.mark.parametrize("percentile", list(SAMPLES))
def test_wrong_verdicts_are_at_most_one_minus_confidence(name: str, percentile: float) -> None:
    sampler, quantile = DISTRIBUTIONS[name]
    n = SAMPLES[percentile]
    q = quantile(percentile / 100)
    targets = [q * f for f in TARGETS.values()]
    seed = 27_000 + list(DISTRIBUTIONS).index(name) * 10 + list(SAMPLES).index(percentile)
    below = counts_below(sampler, n, targets, seed)
    r_lo, r_hi = rank_bounds(n, percentile, CONFIDENCE)
    for (where, _), t, m in zip(TARGETS.items(), targets, below, strict=True):
        upper_below = m >= r_hi if r_hi is not None else np.zeros(RUNS, dtype=bool)
        lower_at_or_above = m <= r_lo - 1 if r_lo is not None else np.zeros(RUNS, dtype=bool)
        # pN < t: pass when the upper bound is under t, fail when the lower one is at or over
        wrong_lt = upper_below if q >= t else lower_at_or_above
        # pN > t: pass when the lower bound is over t, fail when the upper one is at or under
        # (the same counts: no sample equals t in a continuous law)
        wrong_gt = lower_at_or_above if q <= t else upper_below
        for op, wrong in (("<", wrong_lt), (">", wrong_gt)):
            rate = float(wrong.mean())
            assert rate <= ALLOWED, (
                f"{name} p{percentile:g} {op} target {where} the true value ({t:.4g} vs "
                f"{q:.4g}): {rate:.2%} wrong verdicts over {RUNS} runs, allowed {ALLOWED:.2%}"
            )


def test_the_histogram_verdict_is_the_count_verdict_or_more_cautious() -> None:
    """The simulation's rule is what ``evaluate`` decides on a run's HDR histogram, except
    that a bound in the target's own bucket is not decided (never the other way)."""
    rng = np.random.default_rng(2727)
    n, percentile = 150, 90.0
    q = _lognormal_q(0.9)
    r_lo, r_hi = rank_bounds(n, percentile, CONFIDENCE)
    decided = by_counts = 0
    for k in range(120):
        x = _lognormal(rng, (1, n))[0].astype(np.float64)
        target = q * (0.8, 0.95, 1.0, 1.05, 1.2)[k % 5]
        acc = MetricsAccumulator()
        for v in x:
            acc.histograms["ttft"].record_ns(round(float(v) * 1e6))
        acc.issued = acc.completed = n
        run = RunResult(workload={}, load={}, endpoint={}, accumulator=acc, label="sim")
        verdict = evaluate(parse_slo(f"ttft.p90 < {target:.6f}ms"), run).verdict
        m = int(np.count_nonzero(x < round(target, 6)))
        by_count = (
            Verdict.PASS
            if r_hi is not None and m >= r_hi
            else Verdict.FAIL
            if r_lo is not None and m <= r_lo - 1
            else Verdict.INCONCLUSIVE
        )
        assert verdict in (by_count, Verdict.INCONCLUSIVE), (k, target, m)
        decided += verdict is by_count and by_count is not Verdict.INCONCLUSIVE
        by_counts += by_count is not Verdict.INCONCLUSIVE
    # the far targets are decided, not merely never wrong: the histogram leaves undecided
    # only the rare run whose bound falls in the target's own bucket
    assert by_counts >= 20 and decided >= by_counts - 2
