"""The terminal summary at 80 columns, and the line an A/B comparison prints when it passes."""

from __future__ import annotations

import re

import pytest

from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.terminal import endpoint_label, summary_lines

AB_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=40, seed=3)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 5s", "error_rate < 5%")
async def test_ab(llm_loadgen):
    await llm_loadgen.run()
"""


def test_a_passing_ab_comparison_prints_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the session runs in this process: 80 columns whatever this process's own terminal
    # is (as a session of its own writing to a log gets)
    monkeypatch.setenv("COLUMNS", "80")
    pytester.makepyfile(test_ab=AB_TEST)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--llm-reference-endpoint=sim:fixed", "--llm-endpoint=sim:fixed"
    )
    result.assert_outcomes(passed=1)
    # the verdict, the reference, the allowance, what was compared and the largest change,
    # broken at a clause to fit 80 columns
    lines = result.stdout.lines
    at = next(i for i, line in enumerate(lines) if "A/B [run0]" in line)
    assert lines[at + 1].startswith("      ") and all(len(x) <= 80 for x in lines[at : at + 2])
    text = " ".join(x.strip() for x in lines[at : at + 2]).replace("; ", " ")
    assert re.fullmatch(
        r"[=↑] A/B \[run0\] vs sim:fixed: passed \((unchanged|improved), allowed \+5%\) "
        r"compared ttft\.p50 largest change ttft\.p50 [+-]\d+\.\d%",
        text,
    ), text


def ab_session(verdict: str, changes: list[float]) -> SessionData:
    checks = [
        {"name": f"ttft.p{50 + 10 * i}", "change": c, "verdict": verdict}
        for i, c in enumerate(changes)
    ]
    endpoint = {"url": "http://h:8000/v1", "model": "m", "simulator": None, "api": "chat"}
    run = {
        "label": "run0",
        "metrics": {},
        "counts": {},
        "reference": {
            "verdict": verdict,
            "thresholds": {"default": 0.05, "ttft": 0.2},
            "reference_endpoint": {"url": "http://ref:8000/v1", "simulator": None},
            "checks": checks,
        },
    }
    data = SessionData()
    slo = {"verdict": "pass", "expr": "ttft.p50 < 1s", "run": "run0", "observed": 20.0}
    slo |= {"target": 1000.0, "unit": "ms", "samples": 100}
    data.add("t.py::test_x", "passed", {"endpoint": endpoint, "runs": [run], "slos": [slo]})
    return data


@pytest.mark.parametrize(
    ("verdict", "word", "mark"),
    [
        ("unchanged", "passed", "="),
        ("improved", "passed", "↑"),
        ("regressed", "failed", "✗"),
        ("inconclusive", "not judged", "?"),
    ],
)
def test_the_ab_line_names_the_largest_change(verdict: str, word: str, mark: str) -> None:
    data = ab_session(verdict, [0.01, -0.031, 0.02])
    lines = [line for line in summary_lines(data, []) if "A/B" in line]
    assert lines == [
        f"  {mark} A/B [run0] vs http://ref:8000/v1: {word} ({verdict}, allowed +5%, ttft +20%)"
        "; compared ttft.p50, ttft.p60, ttft.p70; largest change ttft.p60 -3.1%"
    ]


def test_long_lines_break_at_a_clause_within_the_width() -> None:
    data = ab_session("unchanged", [0.01, -0.031, 0.02])
    lines = summary_lines(data, [], width=80)
    ab = next(i for i, line in enumerate(lines) if "A/B" in line)
    assert lines[ab].endswith("(unchanged, allowed +5%, ttft +20%)")
    assert lines[ab + 1].startswith("      compared ttft.p50")
    assert all(len(line) <= 80 for line in lines)


def test_endpoint_label() -> None:
    assert endpoint_label({"simulator": "tiny", "url": "http://x/v1"}) == "sim:tiny"
    assert endpoint_label({"url": "http://x/v1", "simulator": None}) == "http://x/v1"
    assert endpoint_label(None) == "?"


ONE_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=8)
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_a(llm_loadgen):
    await llm_loadgen.run()
"""


def test_the_section_starts_right_under_its_header(pytester: pytest.Pytester) -> None:
    """pytest ends the last file's progress line lazily: done after the header, it would
    leave a blank line under ``=== llmperf ===``."""
    pytester.makepyfile(test_one=ONE_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    lines = result.stdout.lines
    header = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ llmperf =+", line))
    assert lines[header + 1].startswith("test_one.py::test_a [passed]"), lines[header : header + 3]


def test_a_sentence_in_a_runs_server_line_breaks_at_spaces_within_the_width() -> None:
    """Why the cache was not reset is a sentence longer than a line: broken at its spaces
    (it once ran to 196 columns), the figures before it still whole."""
    why = (
        "the server has no cache reset (POST /reset_prefix_cache: 404, POST /flush_cache:"
        " 404); vLLM serves POST /reset_prefix_cache in development mode only"
        " (VLLM_SERVER_DEV_MODE=1)"
    )
    data = ab_session("unchanged", [0.01])
    run = data.tests["t.py::test_x"].runs[0]
    run.pop("reference")
    # a vLLM with a prefix cache (its engine config says so) whose reset is not served
    run["cache_reset"] = {"done": False, "how": "", "why": why, "prefix_cache": True}
    run["server_metrics"] = {"source": "http://h:8000/metrics", "family": "vllm", "metrics": {}}
    lines = summary_lines(data, [], width=80)
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("server [run0]"))
    block = lines[at:]
    assert all(len(line) <= 80 for line in block), block
    text = " ".join(line.strip() for line in block)
    assert f"cache not reset: {why}; so this run may reuse prefixes cached before it" in text
    assert len(block) >= 3 and all(line.startswith("      ") for line in block[1:])
    assert summary_lines(data, [], width=None)[at].endswith("to accept a warm cache)")
