"""False failures and power of a session of many baseline comparisons (issue 27, part 3).

Not a test: prints its figures (docs/reports.md "Many comparisons in one session" and
benchmarks/README.md quote them). A session is 10 tests x 20 gated statistics (TTFT,
TPOT, E2E and ITL-like latencies x p50, p75, p90, p95, p99; the mean, whose bootstrap
is a multinomial over the buckets, is left out for run time: same rule, same code),
each test's baseline and current samples drawn from fixed lognormal distributions into
the project's HDR histograms, compared by the baseline gate's own code
(:func:`pytest_llmperf.slo.regression.compare_stat`, its bootstrap and rule) and judged
as the plugin judges a test (:func:`pytest_llmperf.slo.multiplicity.judge_family`: Holm
within the test at the session's alpha split over its 10 tests). A session fails when
any test has a regressed statistic.

- identical servers: 100 sessions, both sides from the same distributions;
- one slowdown: 100 sessions in which one metric of one test is 10% slower (every
  sample x 1.1, so its five statistics move by 10%); caught when that test fails.

The threshold is 5% (``--llm-baseline-threshold=5%``): a true 10% change sits *at* the
default 10% allowance and would be caught only about half the time, whatever the sample
size. Each side has 5,000 samples.

Run: ``python benchmarks/session_false_failures.py [sessions]`` (a few minutes).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.slo.multiplicity import judge_family, test_level
from pytest_llmperf.slo.regression import (
    DEFAULT_ALPHA,
    RegressionCheck,
    RegressionVerdict,
    compare_stat,
)

TESTS = 10
SAMPLES = 5000
THRESHOLD = 0.05
SLOWDOWN = 1.10
# (metric, median ms, lognormal sigma): four latencies of different shapes
METRICS = (("ttft", 40.0, 0.5), ("tpot", 12.0, 0.2), ("itl", 11.0, 0.35), ("e2e", 900.0, 0.3))
STATS = ("p50", "p75", "p90", "p95", "p99")


def _histogram(
    rng: np.random.Generator, median: float, sigma: float, factor: float
) -> LatencyHistogram:
    h = LatencyHistogram()
    values = rng.lognormal(np.log(median), sigma, SAMPLES) * factor
    h.record_many_ns([int(v * 1e6) for v in values])
    return h


def run_test(rng: np.random.Generator, seed: int, slow_metric: str | None) -> list[RegressionCheck]:
    """One test's 20 comparisons, judged together as the plugin judges them."""
    checks: list[RegressionCheck] = []
    for metric, median, sigma in METRICS:
        base = _histogram(rng, median, sigma, 1.0)
        cur = _histogram(rng, median, sigma, SLOWDOWN if metric == slow_metric else 1.0)
        for stat in STATS:
            compared = compare_stat(base, cur, stat, sides=("baseline", "current"), seed=seed)
            checks.append(
                RegressionCheck(
                    metric=metric,
                    stat=stat,
                    baseline=compared.before,
                    current=compared.after,
                    threshold=THRESHOLD,
                    **compared.outcome(THRESHOLD, DEFAULT_ALPHA),
                )
            )
    return judge_family(checks, test_level(DEFAULT_ALPHA, TESTS))


def run_session(
    rng: np.random.Generator, session: int, slow: bool
) -> tuple[bool, bool, int, float]:
    """(failed, failed when each comparison is judged alone, comparisons, median mde)."""
    failed = alone = False
    mdes: list[float] = []
    count = 0
    slow_test = int(rng.integers(TESTS)) if slow else -1
    for t in range(TESTS):
        checks = run_test(
            rng, seed=session * TESTS + t, slow_metric="ttft" if t == slow_test else None
        )
        count += len(checks)
        failed |= any(c.verdict is RegressionVerdict.REGRESSED for c in checks)
        alone |= any(c.alone == RegressionVerdict.REGRESSED for c in checks)
        mdes += [c.mde for c in checks if c.mde is not None]
    return failed, alone, count, float(np.median(mdes))


def main() -> None:
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    rng = np.random.default_rng(27)
    started = time.monotonic()
    for slow, title in ((False, "identical servers"), (True, "one metric of one test 10% slower")):
        results = [run_session(rng, s, slow) for s in range(sessions)]
        failed = sum(r[0] for r in results)
        alone = sum(r[1] for r in results)
        comparisons = results[0][2]
        mde = float(np.median([r[3] for r in results]))
        print(
            f"{title}: {failed} of {sessions} sessions failed "
            f"({comparisons} comparisons each; Holm within each test at "
            f"{test_level(DEFAULT_ALPHA, TESTS):g}); judged alone at p < {DEFAULT_ALPHA:g}: "
            f"{alone} of {sessions}; median minimal detectable change {mde * 100:+.1f}%"
        )
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
