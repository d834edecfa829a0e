"""Any percentile in the SLO grammar (issue 16): ``pN`` and ``pN.M…`` for 0 < N < 100.

The parser's edges: what is a percentile, what is nonsense and how the error
names it, one spelling per statistic, and the same words in rulesets and the
baseline/A-B threshold option; plus the minimum-sample rule for any p.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.metrics.sample_size import min_samples, nearest_rank, supported_percentile
from pytest_llmperf.slo.regression import Thresholds
from pytest_llmperf.specs.rulesets import load_ruleset
from pytest_llmperf.specs.slo import parse_slo, percentile_of, request_limits, stat_problem


@pytest.mark.parametrize(
    ("word", "percentile"),
    [
        ("p75", 75.0),
        ("p1", 1.0),
        ("p5", 5.0),
        ("p0.5", 0.5),
        ("p0.001", 0.001),
        ("p33.3", 33.3),
        ("p99.9", 99.9),
        ("p99.99", 99.99),
        ("p99.999", 99.999),
        ("p99.9999", 99.9999),
    ],
)
def test_any_percentile_parses(word: str, percentile: float) -> None:
    slo = parse_slo(f"ttft.{word} < 2s")
    assert (slo.metric, slo.stat, slo.op, slo.target, slo.unit) == ("ttft", word, "<", 2000, "ms")
    assert slo.name == f"ttft.{word}"
    assert slo.percentile == percentile == percentile_of(word)
    assert stat_problem(word) is None


@pytest.mark.parametrize(
    "word",
    ["p100.5", "p-1", "p0", "p100", "p", "p7x", "p50.", "p0.0", "p1e2", "p+5", "p99.99.9", "p٥"],
)
def test_nonsense_is_refused_naming_the_expression_and_the_word(word: str) -> None:
    expr = f"ttft.{word} < 2s"
    with pytest.raises(LlmPerfUsageError) as info:
        parse_slo(expr)
    message = str(info.value)
    assert repr(expr) in message and f"unknown statistic {word!r}" in message
    assert stat_problem(word) is not None
    with pytest.raises(ValueError, match="unknown statistic"):
        percentile_of(word)


@pytest.mark.parametrize(
    ("word", "spelling"), [("p05", "p5"), ("p50.0", "p50"), ("p99.90", "p99.9"), ("p50.", "p50")]
)
def test_a_percentile_has_one_spelling_and_the_error_gives_it(word: str, spelling: str) -> None:
    """``p50.0`` would be a second JSON key for p50: refused, with the one to write."""
    assert stat_problem(word) == f"unknown statistic {word!r}: write it {spelling!r}"


def test_the_other_statistics_and_rates_are_unchanged() -> None:
    assert parse_slo("e2e.mean < 1s").percentile is None
    assert parse_slo("e2e.max <= 1s").percentile is None
    assert parse_slo("error_rate < 1%").percentile is None
    with pytest.raises(LlmPerfUsageError, match="'min'"):
        parse_slo("ttft.min < 1s")  # not an SLO statistic (a report column only)
    with pytest.raises(LlmPerfUsageError, match="takes no statistic"):
        parse_slo("error_rate.p75 < 1%")


def test_a_percentile_slo_implies_a_goodput_limit_like_the_standard_ones() -> None:
    limits = request_limits([parse_slo("ttft.p75 < 300ms"), parse_slo("ttft.p99 < 500ms")])
    assert limits == {"ttft": 300.0}


@pytest.mark.parametrize(
    ("percentile", "needed"),
    [(50, 20), (75, 40), (90, 100), (99, 1000), (99.9, 10_000), (99.99, 100_000), (0.5, 11)],
)
def test_the_minimum_sample_rule_holds_for_any_percentile(percentile: float, needed: int) -> None:
    """``10 × 100/(100 − p)`` samples: ten above the percentile, computed exactly."""
    assert min_samples(percentile) == needed
    assert supported_percentile(needed, percentile, ()) == percentile
    assert supported_percentile(needed - 1, percentile, ()) is None


@pytest.mark.parametrize(
    ("percentile", "count", "rank"),
    [(99.9, 1000, 999), (99.9, 20_000, 19_980), (75, 4, 3), (75, 5, 4), (0.5, 10, 1), (50, 1, 1)],
)
def test_nearest_rank_is_exact_in_decimals(percentile: float, count: int, rank: int) -> None:
    """In binary floats 99.9 / 100 × 1000 is a hair above 999: the rank is 999, not 1000."""
    assert nearest_rank(percentile, count) == rank


def test_rulesets_accept_any_percentile_and_name_the_key_of_nonsense(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("targets:\n  ttft: {p75: 2s, p99.99: 5s}\nslos: ['tpot.p80 < 90ms']\n")
    assert [s.expr for s in load_ruleset(str(good)).slos] == [
        "ttft.p75 < 2s",
        "ttft.p99.99 < 5s",
        "tpot.p80 < 90ms",
    ]
    bad = tmp_path / "bad.yaml"
    bad.write_text("targets:\n  ttft: {p75: 2s, p7x: 3s}\n")
    with pytest.raises(LlmPerfUsageError) as info:
        load_ruleset(str(bad))
    assert "bad.yaml: targets.ttft.p7x" in str(info.value) and "'p7x'" in str(info.value)


def test_thresholds_accept_any_percentile_and_compare_it() -> None:
    thresholds = Thresholds.parse("ttft.p75=20%,tpot.p99.99=30%,5%")
    assert thresholds.for_stat("ttft", "p75") == pytest.approx(0.2)
    assert thresholds.for_stat("ttft", "p50") == pytest.approx(0.05)
    assert ("ttft", "p75") in thresholds.stats() and ("tpot", "p99.99") in thresholds.stats()
    for bad in ("ttft.p100=5%", "ttft.p50.0=5%", "ttft.p0=5%"):
        with pytest.raises(LlmPerfUsageError, match="--llm-baseline-threshold"):
            Thresholds.parse(bad)
