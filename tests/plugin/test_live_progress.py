"""``--llm-progress``: progress lines with req/s while a test's load runs, in a log (not a tty).

``runpytest_subprocess`` writes the inner session's output to a file, as a CI
log is: so these sessions get the plain lines, never the terminal's
updating status line (checked by hand in a terminal, docs/progress.md).
"""

from __future__ import annotations

import re

import pytest

PROGRESS = re.compile(r"^llmperf progress: test_live\.py::test_poisson: (\w[\w-]*) .*req/s")


def poisson_test(duration: float, rate: float = 20) -> str:
    return f"""
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4)
@pytest.mark.llm_load("poisson", rate={rate}, duration={duration}, seed=1)
async def test_poisson(llm_loadgen):
    await llm_loadgen.run()
"""


def progress_lines(lines: list[str]) -> list[tuple[int, str]]:
    return [(i, line) for i, line in enumerate(lines) if PROGRESS.match(line)]


def test_lines_with_req_s_come_every_second_before_the_test_s_result(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_live=poisson_test(3.0))
    result = pytester.runpytest_subprocess("--llm-progress=1", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    lines = result.outlines
    found = progress_lines(lines)
    assert 2 <= len(found) <= 5, "\n".join(lines)  # one a second of a 3 s run (and its drain)
    verdict = next(i for i, line in enumerate(lines) if line.startswith("PASSED"))
    assert all(i < verdict for i, _ in found), "\n".join(lines)
    assert lines[found[0][0] - 1] == "test_live.py::test_poisson "  # its own line, after the id
    assert any(PROGRESS.match(line)[1] == "measure" for _, line in found)  # type: ignore[index]
    assert "\r" not in result.stdout.str()  # a log gets lines, not a rewritten status line


def test_auto_writes_a_line_every_10_s_to_a_log(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_live=poisson_test(12.0, rate=10))
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    lines = result.outlines
    found = progress_lines(lines)
    assert len(found) == 1, "\n".join(lines)  # at 10 s of a 12 s run: not one a second
    [(i, line)] = found
    assert "measure" in line and "elapsed 10s" in line and "ETA" in line
    summary = next(k for k, text in enumerate(lines) if "1 passed" in text)
    assert i < summary


def test_off_prints_no_progress_and_wins_over_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nllm_progress = 0.5\n")
    pytester.makepyfile(test_live=poisson_test(1.5))
    quiet = pytester.runpytest_subprocess("--llm-progress=off", "-p", "no:cacheprovider")
    quiet.assert_outcomes(passed=1)
    assert "llmperf progress" not in quiet.stdout.str()
    assert not progress_lines(quiet.outlines)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "must be > 0 seconds, got '-1'"),
        ("abc", "expected auto, off or a number of seconds, got 'abc'"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_the_option_and_value(
    pytester: pytest.Pytester, value: str, message: str
) -> None:
    pytester.makepyfile(test_live=poisson_test(1.0))
    result = pytester.runpytest(f"--llm-progress={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str()
    assert "--llm-progress" in text and message in text, text
