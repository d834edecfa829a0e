"""A statistic that is not a percentile 0 < p < 100 is a usage error before any load.

Any ``pN`` / ``pN.M`` is accepted (issue 16), so what is left to refuse is
nonsense: ``p100.5``, ``p-1``, ``p0``, ``p100``, ``p``, ``p7x``, ``p50.``. Each
case is a real pytest session (pytester) against a listening socket that must
never see a connection (the ``watched_endpoint`` fixture of
``test_usage_errors.py``), and the error names the test, the expression and
the bad word, in a marker, a stage's SLO, a ruleset file and the baseline
threshold option alike.
"""

from __future__ import annotations

import pytest
import test_usage_errors as base
from test_usage_errors import GOOD_MARKS, _assert_usage_error, _run

watched_endpoint = base.watched_endpoint  # the fixture: a socket that must see no connection

NONSENSE = ["p100.5", "p-1", "p0", "p100", "p", "p7x", "p50."]


@pytest.mark.parametrize("word", NONSENSE)
def test_a_nonsense_percentile_in_a_marker_names_test_expression_and_word(
    pytester: pytest.Pytester, watched_endpoint: str, word: str
) -> None:
    expr = f"ttft.{word} < 2s"
    result = _run(pytester, watched_endpoint, GOOD_MARKS + f'\n@pytest.mark.llm_slo("{expr}")')
    _assert_usage_error(result, "test_bad.py::test_perf", expr, f"unknown statistic '{word}'")


def test_a_nonsense_percentile_in_a_stage_slo_is_a_usage_error(
    pytester: pytest.Pytester, watched_endpoint: str
) -> None:
    marks = (
        '@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4)\n'
        '@pytest.mark.llm_load("poisson", stages=['
        '{"rate": 1, "duration": 5, "slo": "tpot.p99.99.9 < 1s"}])'
    )
    result = _run(pytester, watched_endpoint, marks)
    _assert_usage_error(result, "test_perf", "stages[0]", "'p99.99.9'")


def test_a_nonsense_percentile_in_a_ruleset_file_names_file_and_key(
    pytester: pytest.Pytester, watched_endpoint: str
) -> None:
    (pytester.path / "rules.yaml").write_text("targets:\n  ttft: {p75: 2s, p100: 3s}\n")
    result = _run(pytester, watched_endpoint, GOOD_MARKS, "--llm-ruleset=rules.yaml")
    _assert_usage_error(result, "rules.yaml", "targets.ttft.p100", "'p100'")


def test_a_nonsense_percentile_in_the_threshold_option_names_the_option(
    pytester: pytest.Pytester, watched_endpoint: str
) -> None:
    args = "--llm-baseline-threshold=ttft.p75=20%,tpot.p0=5%"
    result = _run(pytester, watched_endpoint, GOOD_MARKS, args)
    _assert_usage_error(result, "--llm-baseline-threshold", "'tpot.p0'")


def test_any_percentile_is_accepted_at_collection(
    pytester: pytest.Pytester, watched_endpoint: str
) -> None:
    """The control: the same session with valid words collects (no usage error)."""
    slos = '"ttft.p75 < 2s", "e2e.p99.99 < 9s", "itl.p0.5 < 1s"'
    marks = f"{GOOD_MARKS}\n@pytest.mark.llm_slo({slos})"
    pytester.makepyfile(test_ok=f"import pytest\n\n{marks}\nasync def test_perf(llm_loadgen): ...")
    (pytester.path / "rules.yaml").write_text("targets:\n  ttft: {p75: 2s, p99.95: 3s}\n")
    result = pytester.runpytest(
        f"--llm-endpoint={watched_endpoint}",
        "--llm-model=m",
        "--llm-ruleset=rules.yaml",
        "--llm-baseline-threshold=ttft.p75=20%",
        "--collect-only",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*test_perf*"])
