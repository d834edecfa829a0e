"""Many comparisons in one session (slo/multiplicity.py): Holm and Benjamini–Hochberg
against hand-worked examples and brute-force reference computations, their monotonicity,
a test's comparisons judged together, the power figure, and a pytester session in which
a baseline comparison of many statistics of an identical run does not fail."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from itertools import pairwise

import numpy as np
import pytest

from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.sim import start_sim_process
from pytest_llmperf.sim.process import SimProcess
from pytest_llmperf.slo.multiplicity import (
    benjamini_hochberg,
    bh_adjusted,
    holm,
    holm_adjusted,
    judge_family,
    minimal_detectable_change,
    multiple_comparisons_line,
    session_comparisons,
    session_summary,
    test_level,
)
from pytest_llmperf.slo.regression import (
    RegressionCheck,
    RegressionVerdict,
    bootstrap_p_value,
    inconclusive_check,
)

# -- hand-worked examples ------------------------------------------------------------

P = [0.01, 0.04, 0.03, 0.005]


def test_holm_by_hand() -> None:
    # sorted 0.005 <= 0.05/4, 0.01 <= 0.05/3, then 0.03 > 0.05/2: stop
    assert holm(P, 0.05) == [True, False, False, True]
    # 4 x 0.005, 3 x 0.01, 2 x 0.03, then max(0.06, 1 x 0.04)
    assert holm_adjusted(P) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_benjamini_hochberg_by_hand() -> None:
    # i alpha / m: 0.0125, 0.025, 0.0375, 0.05; every sorted p is under its bound
    assert benjamini_hochberg(P, 0.05) == [True, True, True, True]
    # min over j >= i of 4 p_(j) / j: 0.02, 0.02, 0.04, 0.04
    assert bh_adjusted(P) == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_step_up_against_step_down() -> None:
    # the smallest fails Holm's (and BH's own first) bound, yet BH steps up to k = 3
    p = [0.02, 0.03, 0.035]
    assert holm(p, 0.05) == [False, False, False]
    assert benjamini_hochberg(p, 0.05) == [True, True, True]
    # and with the largest past 0.05 only the first two rows of the step-up hold
    assert benjamini_hochberg([0.001, 0.02, 0.5], 0.05) == [True, True, False]


def test_empty_and_single() -> None:
    assert holm([], 0.01) == [] and benjamini_hochberg([], 0.01) == []
    assert holm([0.009], 0.01) == [True] and benjamini_hochberg([0.011], 0.01) == [False]


# -- against brute-force reference computations -----------------------------------------


def reference_holm(p: Sequence[float], alpha: float) -> list[bool]:
    """Closed testing with Bonferroni tests of every intersection: H_i is rejected when
    every subset S containing i has min_{j in S} p_j <= alpha / |S| (exponential: small m)."""
    m = len(p)
    out = []
    for i in range(m):
        ok = True
        for mask in range(1 << m):
            if not mask >> i & 1:
                continue
            members = [p[j] for j in range(m) if mask >> j & 1]
            if min(members) > alpha / len(members):
                ok = False
                break
        out.append(ok)
    return out


def reference_bh(p: Sequence[float], alpha: float) -> list[bool]:
    """The textbook definition: k the largest i with p_(i) <= i alpha / m, reject every
    p <= p_(k)."""
    m = len(p)
    ordered = sorted(p)
    k = max((i for i in range(1, m + 1) if ordered[i - 1] <= i * alpha / m), default=0)
    return [k > 0 and x <= ordered[k - 1] for x in p]


@pytest.mark.parametrize("seed", range(60))
def test_matches_the_reference_computations(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 9))
    # a mix of nulls (uniform) and signals (tiny p), with ties now and then
    p = [float(x) for x in rng.uniform(0, 1, m) ** rng.choice([1.0, 4.0, 12.0])]
    if m > 2 and seed % 3 == 0:
        p[1] = p[0]
    for alpha in (0.01, 0.05, 0.2):
        assert holm(p, alpha) == reference_holm(p, alpha)
        assert benjamini_hochberg(p, alpha) == reference_bh(p, alpha)
        assert holm(p, alpha) == [a <= alpha for a in holm_adjusted(p)]
        assert benjamini_hochberg(p, alpha) == [q <= alpha for q in bh_adjusted(p)]
        # Bonferroni within Holm within BH
        bonferroni = [x <= alpha / m for x in p]
        h, b = holm(p, alpha), benjamini_hochberg(p, alpha)
        assert all(h_i or not bf for h_i, bf in zip(h, bonferroni, strict=True))
        assert all(b_i or not h_i for b_i, h_i in zip(b, h, strict=True))


# -- monotonicity ------------------------------------------------------------------


@pytest.mark.parametrize("method", [holm, benjamini_hochberg])
@pytest.mark.parametrize("seed", range(20))
def test_monotone(method: object, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    p = [float(x) for x in rng.uniform(0, 0.1, 12)]
    fn = method  # holm or benjamini_hochberg
    assert callable(fn)
    base = fn(p, 0.05)
    # a larger alpha never un-rejects
    for alpha in (0.06, 0.1, 0.5):
        assert all(r or not b for r, b in zip(fn(p, alpha), base, strict=True))
    # a smaller p-value (here: halving one) never un-rejects any hypothesis
    for i in range(len(p)):
        lower = list(p)
        lower[i] /= 2
        assert all(r or not b for r, b in zip(fn(lower, 0.05), base, strict=True))
    # rejections are the smallest p-values: a rejected p is below every kept one
    kept = [x for x, r in zip(p, base, strict=True) if not r]
    assert all(x <= min(kept, default=1.0) for x, r in zip(p, base, strict=True) if r)


@pytest.mark.parametrize("adjust", [holm_adjusted, bh_adjusted])
def test_adjusted_p_values_keep_the_order(adjust: object) -> None:
    rng = np.random.default_rng(7)
    p = [float(x) for x in rng.uniform(0, 1, 30) ** 3]
    assert callable(adjust)
    adjusted = adjust(p)
    pairs = sorted(zip(p, adjusted, strict=True))
    assert all(a[1] <= b[1] for a, b in pairwise(pairs))
    assert all(x <= a <= 1.0 for x, a in zip(p, adjusted, strict=True))


# -- a test's comparisons judged together -------------------------------------------


def check(p: float, verdict: str = "regressed", *, stat: str = "p99") -> RegressionCheck:
    return RegressionCheck(
        metric="ttft",
        stat=stat,
        baseline=100.0,
        current=120.0,
        change=0.2,
        threshold=0.1,
        p_value=p,
        verdict=RegressionVerdict(verdict),
        run="run0",
        spread=0.02,
    )


def test_a_test_family_is_judged_by_holm_at_its_share() -> None:
    level = test_level(0.01, 10)  # 0.001
    assert level == pytest.approx(0.001)
    family = [check(0.005), check(1e-6, stat="p50")] + [
        check(0.5, "unchanged", stat=f"p{n}") for n in (60, 70, 80)
    ]
    family.append(inconclusive_check("run0", "no baseline"))
    judged = judge_family(family, level)
    # significant alone at 0.01, not by Holm over 5 comparisons at 0.001
    assert judged[0].verdict is RegressionVerdict.UNCHANGED and judged[0].alone == "regressed"
    assert "not significant by Holm over this test's 5 comparison(s)" in judged[0].reason
    assert judged[1].verdict is RegressionVerdict.REGRESSED  # 1e-6 <= 0.001 / 5
    assert judged[2].verdict is RegressionVerdict.UNCHANGED and judged[2].alone == "unchanged"
    assert all(c.level == pytest.approx(0.0002) for c in judged[:5])
    # no p-value: outside the family, untouched
    assert judged[-1] == family[-1]
    # z(1 - 0.0002) * 0.02 = 0.0708 > 0.1? no: the threshold binds, plus z(0.8) * 0.02
    assert judged[0].mde == pytest.approx(0.1 + 0.841621 * 0.02, abs=1e-5)


def test_minimal_detectable_change() -> None:
    # significance binds: z(0.999) = 3.0902
    assert minimal_detectable_change(0.05, 0.001, 0.1) == pytest.approx(
        3.090232 * 0.05 + 0.841621 * 0.05, abs=1e-5
    )
    # the threshold binds
    assert minimal_detectable_change(0.01, 0.001, 0.1) == pytest.approx(0.108416, abs=1e-5)
    assert minimal_detectable_change(None, 0.001, 0.1) is None


def test_minimal_detectable_change_has_its_power() -> None:
    """A true change of exactly the mde, observed with normal noise of sd ``spread``, is
    caught (beyond the threshold and significant) in 80% of draws."""
    spread, level, threshold = 0.03, 0.0005, 0.05
    mde = minimal_detectable_change(spread, level, threshold)
    assert mde is not None
    z = 3.290527  # z(1 - 0.0005)
    rng = np.random.default_rng(1)
    observed = rng.normal(mde, spread, 200_000)
    caught = np.mean((observed > threshold) & (observed / spread > z))
    assert caught == pytest.approx(0.8, abs=0.01)


def test_p_values_below_the_resamples_resolution() -> None:
    """A clear shift: beyond ``1 / (resamples + 1)`` the tail is the normal
    approximation, so a session's small levels can be reached at all."""
    rng = np.random.default_rng(3)
    base, cur = LatencyHistogram(), LatencyHistogram()
    base.record_many_ns([int(x * 1e6) for x in rng.lognormal(np.log(40), 0.3, 3000)])
    cur.record_many_ns([int(x * 1e6) for x in rng.lognormal(np.log(48), 0.3, 3000)])
    slower, faster = bootstrap_p_value(base, cur, "p50")
    assert slower < 1e-6 and faster == pytest.approx(1.0, abs=1e-3)
    same = LatencyHistogram()
    same.merge(base)
    slower, faster = bootstrap_p_value(base, same, "p50")
    assert slower > 0.1 and faster > 0.1


def test_session_summary_and_line() -> None:
    judged = judge_family([check(1e-7), check(0.006, stat="p50")], test_level(0.01, 2))
    other = judge_family([check(0.3, "unchanged")], test_level(0.01, 2))
    checks, tests = session_comparisons(
        [
            ("t.py::a", [c.to_dict() for c in judged], []),
            ("t.py::b", [c.to_dict() for c in other], [{"reference": None}]),
        ]
    )
    assert tests == 2 and len(checks) == 3
    summary = session_summary(checks, alpha=0.01, tests=tests)
    assert summary["method"] == "holm" and summary["comparisons"] == 3
    assert summary["rejected"] == 1 and summary["regressed"] == ["t.py::a::ttft.p99 [run0]"]
    assert summary["alone"] == 2  # both of a's were regressed judged alone at 0.01
    # in the test: 0.006 > 0.005 / 1 at Holm's second step; session-wide Holm:
    # 0.006 > 0.01 / 2; BH: 0.006 <= 2 x 0.01 / 3
    assert summary["session_holm"] == ["t.py::a::ttft.p99 [run0]"]
    assert len(summary["session_bh"]) == 2
    line = multiple_comparisons_line(summary)
    assert "3 baseline/A/B comparison(s) of 2 test(s)" in line and "Holm at 0.005" in line
    assert math.isclose(summary["test_level"], 0.005)


# -- a session: many statistics of an identical run ----------------------------------

SUITE = """
import pytest

@pytest.mark.parametrize("n", range(4))
@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=3, requests=60, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=60)
async def test_chat(llm_loadgen, n):
    await llm_loadgen.run()
"""
# more statistics than the default p50 and p99: 4 metrics x p50, p75, p99, mean. The two
# sessions are measured one after the other on a machine that may be busy, so the server
# is slow (300 ms to the first token, 100 ms a token) and the allowance wide (30%): a few
# ms of scheduling noise must not be a real shift between them. What this test is about
# is the session's count of false failures, and the levels each comparison is judged at.
# The fixed profile's latencies do not depend on the load: all 60 in flight take one round
# of half a second for a test's 60 requests (20 took 3, 10 took 6), with the same samples
STATS = ",".join(f"{m}.{s}=30%" for m in ("ttft", "tpot", "itl", "e2e") for s in ("p75", "mean"))
STATS += ",30%"


@pytest.fixture(scope="module")
def steady_sim() -> Iterator[SimProcess]:
    with start_sim_process("fixed", overrides={"ttft_ms": 300, "itl_ms": 100}) as sim:
        yield sim


def test_many_statistics_of_an_identical_run_do_not_fail(
    pytester: pytest.Pytester, steady_sim: SimProcess
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    url = f"--llm-endpoint={steady_sim.url}"
    pytester.runpytest(url, "--llm-baseline-save=b.json").assert_outcomes(passed=4)
    again = pytester.runpytest(
        url,
        "--llm-baseline-compare=b.json",
        f"--llm-baseline-threshold={STATS}",
        "--llm-json=r.json",
        "--llm-html=r.html",
        "--llm-markdown=r.md",
    )
    again.assert_outcomes(passed=4)
    again.stdout.fnmatch_lines(
        ["llmperf: * baseline/A/B comparison(s) of 4 test(s), each test's by Holm at 0.0025*"]
    )
    report = json.loads((pytester.path / "r.json").read_text())
    multiple = report["session"]["multiple_comparisons"]
    checks = [c for t in report["tests"] for c in t["baseline"] if c["p_value"] is not None]
    assert multiple["method"] == "holm" and multiple["alpha"] == 0.01
    # 4 metrics x p50, p75, p99, mean: every percentile is compared by its order statistics
    # at 60 samples (no 1,000-sample minimum for p99 any more)
    assert multiple["tests"] == 4 and multiple["comparisons"] == len(checks) >= 4 * 16
    assert multiple["rejected"] == 0 and multiple["regressed"] == []
    for test in report["tests"]:
        family = [c for c in test["baseline"] if c["p_value"] is not None]
        for c in family:  # Bonferroni's share of the test's 0.0025, and the power figure
            assert c["level"] * len(family) == pytest.approx(0.0025)
            assert c["mde"] >= c["threshold"] and c["verdict"] != "regressed"
    again.stdout.fnmatch_lines(["*baseline: 16 unchanged; detects >= +*% to +*% at p<0.00016*"])
    # the HTML and Markdown reports say it too: the session's line, each comparison's power
    html = (pytester.path / "r.html").read_text()
    assert "comparison(s) of 4 test(s), each test&#39;s by Holm at 0.0025" in html
    assert "<th>detects</th>" in html and "&ge; +" in html
    markdown = (pytester.path / "r.md").read_text()
    assert "of 4 test(s), each test's by Holm at 0.0025" in markdown, markdown[:2000]
    assert "| detects |" in markdown and "≥ +" in markdown
