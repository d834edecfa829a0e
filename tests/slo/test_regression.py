"""Baseline regression: beyond the threshold AND significant; faster is reported, not failed."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import numpy as np
import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.slo.paired import paired_checks
from pytest_llmperf.slo.percentile_change import exceedance_tail
from pytest_llmperf.slo.regression import (
    RegressionVerdict,
    Thresholds,
    bootstrap_p_value,
    compare_accumulators,
    worst,
)

Draw = Callable[..., np.ndarray]
MakeAcc = Callable[..., MetricsAccumulator]


def verdicts(checks: list, stat: str = "p50") -> dict[str, str]:
    return {c.metric: c.verdict for c in checks if c.stat == stat}


def test_twenty_percent_slower_regresses_and_names_the_test(
    make_acc: MakeAcc, lognormal: Draw
) -> None:
    base = make_acc(lognormal(100, 1500, seed=1))
    slow = make_acc(lognormal(120, 1500, seed=2))
    checks = compare_accumulators(base, slow, run="run0")
    ttft = {c.stat: c for c in checks if c.metric == "ttft"}
    for stat in ("p50", "p99"):
        c = ttft[stat]
        assert c.verdict == "regressed", c
        assert c.change == pytest.approx(c.current / c.baseline - 1, abs=1e-4)
        assert c.change > 0.10 and c.p_value < 0.01
        assert "bootstrap" in c.test and c.run == "run0"
    # TPOT did not change: the threshold keeps identical distributions unchanged
    assert verdicts(checks)["tpot"] == "unchanged"


def test_faster_is_improved_not_regressed(make_acc: MakeAcc, lognormal: Draw) -> None:
    base = make_acc(lognormal(100, 1500, seed=1))
    fast = make_acc(lognormal(75, 1500, seed=3))
    assert verdicts(compare_accumulators(base, fast))["ttft"] == "improved"


def test_a_small_real_shift_stays_under_the_threshold(make_acc: MakeAcc, lognormal: Draw) -> None:
    base = make_acc(lognormal(100, 5000, seed=1))
    cur = make_acc(lognormal(105, 5000, seed=4))
    (c,) = [c for c in compare_accumulators(base, cur) if c.name == "ttft.p50"]
    assert c.p_value < 0.01 and 0 < c.change < 0.10 and c.verdict == "unchanged"
    strict = compare_accumulators(base, cur, thresholds=Thresholds.parse("ttft=2%"))
    assert verdicts(strict)["ttft"] == "regressed"


def test_a_big_change_on_few_samples_is_not_decided_and_says_how_many_would(
    make_acc: MakeAcc, lognormal: Draw
) -> None:
    """+28% at p50 with 30 samples a side: beyond the threshold, not significant. Not a
    failure (unchanged), and the reason says how many samples would decide it: that many
    with the distributions as observed (each run's samples repeated) do, fewer do not."""
    base_ms, cur_ms = lognormal(100, 30, seed=1, sigma=0.4), lognormal(120, 30, seed=101, sigma=0.4)
    (c,) = [
        c for c in compare_accumulators(make_acc(base_ms), make_acc(cur_ms)) if c.name == "ttft.p50"
    ]
    assert c.change > 0.10 and c.p_value >= 0.01 and c.verdict == "unchanged", c
    found = re.search(r"about (\d+) samples on each side would decide it", c.reason)
    assert found and "beyond the 10% threshold but not significant" in c.reason, c.reason
    needed = int(found[1])
    assert 30 < needed < 1000

    def p50_at(reps: int) -> str:
        base, cur = make_acc(np.tile(base_ms, reps)), make_acc(np.tile(cur_ms, reps))
        return next(c.verdict for c in compare_accumulators(base, cur) if c.name == "ttft.p50")

    assert p50_at(-(-needed // 30)) == "regressed"  # at least ``needed`` a side
    assert p50_at(needed // 30 // 2 or 1) == "unchanged"  # half as many: not yet


def test_false_alarm_rate_under_identical_distributions_is_near_alpha(
    make_acc: MakeAcc, lognormal: Draw
) -> None:
    """With a negligible threshold only significance guards; alarms must be ~1% of trials,
    at p50 and at p99 (the exceedance test, no minimum sample count: 400 a side)."""
    tiny = Thresholds.parse("0.01%")
    alarms = {"ttft.p50": 0, "ttft.p99": 0}
    trials = 150
    for seed in range(trials):
        base = make_acc(lognormal(50, 400, seed=2 * seed))
        cur = make_acc(lognormal(50, 400, seed=2 * seed + 1))
        for c in compare_accumulators(base, cur, thresholds=tiny, seed=seed):
            if c.name in alarms:
                alarms[c.name] += c.verdict == "regressed"
    assert max(alarms.values()) <= 6, f"{alarms} false regressions in {trials} null trials"


def test_p99_doubling_with_200_samples_a_side_is_decided(
    make_acc: MakeAcc, lognormal: Draw
) -> None:
    """No 1,000-sample minimum: p99's order statistics decide a doubling at 200 a side
    (about 200 of the run's samples above the baseline's p99 where 2 or 3 would be)."""
    samples = lognormal(20, 200, seed=7)
    checks = compare_accumulators(make_acc(samples), make_acc(2 * samples))
    by = {c.name: c for c in checks}
    p99 = by["ttft.p99"]
    assert p99.verdict == "regressed" and p99.samples == (200, 200), p99
    assert p99.change == pytest.approx(1.0, abs=0.01) and p99.p_value < 1e-10
    assert "exceedance" in p99.test
    # the same 200 samples against themselves: nothing to report
    same = {c.name: c for c in compare_accumulators(make_acc(samples), make_acc(samples))}
    assert same["ttft.p99"].verdict == "unchanged" and same["ttft.p99"].change == 0


def test_runs_too_small_to_ever_decide_are_inconclusive_saying_how_many_would(
    make_acc: MakeAcc,
) -> None:
    """3 samples a side: even a run slower in every sample could not be significant at
    0.01 (1 chance in 20 when nothing changed), so it is inconclusive, not unchanged."""
    checks = compare_accumulators(make_acc([10.0, 11.0, 12.0]), make_acc([50.0, 51.0, 52.0]))
    by = {c.name: c for c in checks}
    for name, would in (("ttft.p99", 5), ("ttft.p50", 11)):
        c = by[name]
        assert c.verdict == "inconclusive" and not c.note_only, c
        assert "cannot be decided at alpha 0.01 with 3 (baseline) and 3 (current)" in c.reason
        assert f"about {would} on each side would" in c.reason, c.reason
    assert worst(checks) is RegressionVerdict.INCONCLUSIVE


def test_a_zero_baseline_against_a_nonzero_run_is_inconclusive_naming_stat_and_side(
    make_acc: MakeAcc, lognormal: Draw
) -> None:
    """A baseline whose replies each came in one read (TPOT and ITL 0 ms) against a streamed
    run: a change relative to 0 is undefined, so a note, not a failure (it was an infinite
    change, "regressed"); TTFT, nonzero on both sides, is still judged."""
    ttft = lognormal(100, 1500, seed=1)
    base = make_acc(ttft, tpot_ms=0.0)
    cur = make_acc(ttft * 1.3, tpot_ms=1.3)
    by = {c.name: c for c in compare_accumulators(base, cur)}
    for name in ("tpot.p50", "tpot.p99", "itl.p50", "itl.p99"):
        c = by[name]
        assert c.verdict == "inconclusive", c
        assert c.reason == (
            f"{name}: baseline is 0 ms: a relative change is undefined (every token in one read?)"
        )
        assert (c.baseline, c.current) == (0.0, 1.3)
        assert c.change is None and c.p_value is None and c.spread is None
        assert c.note_only  # a note: never an inconclusive verdict of its test
    assert by["ttft.p50"].verdict == "regressed"  # the other statistics are judged as ever
    gaps = [c for c in by.values() if c.metric in ("tpot", "itl")]
    assert worst(gaps) is RegressionVerdict.INCONCLUSIVE


def test_zero_against_zero_is_no_change(make_acc: MakeAcc, lognormal: Draw) -> None:
    base = make_acc(lognormal(100, 1500, seed=1), tpot_ms=0.0)
    cur = make_acc(lognormal(100, 1500, seed=2), tpot_ms=0.0)
    by = {c.name: c for c in compare_accumulators(base, cur)}
    for name in ("tpot.p50", "tpot.p99", "itl.p50", "itl.p99"):
        c = by[name]
        assert (c.verdict, c.change, c.reason) == ("unchanged", 0.0, ""), c
        assert (c.baseline, c.current) == (0.0, 0.0) and c.p_value is not None


def test_a_tiny_nonzero_baseline_is_still_compared(make_acc: MakeAcc, lognormal: Draw) -> None:
    """10 µs is not 0: the change is finite (huge) and judged as any other."""
    ttft = lognormal(100, 1500, seed=1)
    by = {
        c.name: c
        for c in compare_accumulators(make_acc(ttft, tpot_ms=0.01), make_acc(ttft, tpot_ms=1.3))
    }
    c = by["tpot.p50"]
    assert (c.baseline, c.current) == (0.01, 1.3) and c.reason == ""
    assert c.verdict == "regressed" and c.change == pytest.approx(129.0)


def test_a_zero_reference_in_an_ab_comparison_is_inconclusive_naming_the_reference(
    make_acc: MakeAcc, lognormal: Draw
) -> None:
    """The A/B comparison shares the rule (and the code): the side named is the reference."""
    reference = [make_acc(lognormal(100, 300, seed=k), tpot_ms=0.0) for k in range(4)]
    candidate = [make_acc(lognormal(100, 300, seed=10 + k), tpot_ms=1.3) for k in range(4)]
    (check,) = paired_checks(candidate, reference, [("tpot", "p50")])
    assert check.verdict == "inconclusive" and check.change is None
    assert check.reason == (
        "tpot.p50: reference is 0 ms: a relative change is undefined (every token in one read?)"
    )
    (same,) = paired_checks(reference, reference, [("tpot", "p50")])
    assert (same.verdict, same.change) == ("unchanged", 0.0)


def test_bootstrap_p_values_are_one_sided(make_acc: MakeAcc, lognormal: Draw) -> None:
    base = make_acc(lognormal(100, 2000, seed=1))
    slow = make_acc(lognormal(130, 2000, seed=2))
    not_slower, not_faster = bootstrap_p_value(
        base.histograms["ttft"], slow.histograms["ttft"], "p50"
    )
    assert not_slower < 0.01 < 0.99 < not_faster


def test_thresholds_parse_defaults_metrics_and_statistics() -> None:
    t = Thresholds.parse("ttft.p99=20%,tpot=15%,5%")
    assert t.for_stat("ttft", "p99") == pytest.approx(0.20)
    assert t.for_stat("ttft", "p50") == pytest.approx(0.05)
    assert t.for_stat("tpot", "p99") == pytest.approx(0.15)
    assert Thresholds.parse(None).default == 0.10 and Thresholds.parse("0.25").default == 0.25
    assert ("e2e", "p90") in Thresholds.parse("e2e.p90=30%").stats()


@pytest.mark.parametrize("bad", ["ttfx=5%", "ttft.p100.5=5%", "fast", "ttft=0%", "ttft.max=5%"])
def test_bad_thresholds_name_the_option_and_the_value(bad: str) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        Thresholds.parse(bad)
    assert "--llm-baseline-threshold" in str(info.value) and bad.split("=")[0] in str(info.value)


@pytest.mark.parametrize(("m", "n", "s"), [(4, 3, 3), (5, 5, 1), (6, 4, 6), (3, 6, 2)])
def test_the_exceedance_law_is_every_interleaving_counted(m: int, n: int, s: int) -> None:
    """When nothing changed every interleaving of the m baseline and n current samples is
    equally likely: the law of M (current samples above the s-th baseline one) counted
    over all of them is the one the p-values come from."""
    counts = [0] * (n + 1)
    for current in itertools.combinations(range(m + n), n):
        is_current = [i in current for i in range(m + n)]
        seen = 0
        for i, flag in enumerate(is_current):
            seen += not flag
            if not flag and seen == s:
                counts[sum(is_current[i + 1 :])] += 1
                break
    total = sum(counts)
    for k in range(n + 1):
        above = sum(counts[k:]) / total
        below = sum(counts[: k + 1]) / total
        assert exceedance_tail(m, n, s, k, upper=True) == pytest.approx(above, rel=1e-9)
        assert exceedance_tail(m, n, s, k, upper=False) == pytest.approx(below, rel=1e-9)
