"""``--llm-summary``: a line per passed test, in full every test that did not pass, and
every warning kept (what ``pytest example_suites`` prints: its ``pytest.ini`` says brief).

Each session is real: the tests measure a simulator that fails one request in five with
HTTP 500 (seeded), so a passing test has failures in the server's words to keep."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from pytest_llmperf.sim import SimProcess, start_sim_process

SUITE = """
import pytest

FAST = pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=30)

@FAST
@pytest.mark.llm_slo("ttft.p50 < 5s", "error_rate < 60%")
async def test_green(llm_loadgen):
    await llm_loadgen.run()

@FAST
@pytest.mark.llm_slo("ttft.p50 < 1us")
async def test_red(llm_loadgen):
    await llm_loadgen.run()

@FAST
async def test_ungated(llm_loadgen):
    await llm_loadgen.run(gate=False)
    await llm_loadgen.run(gate=False)
"""


@pytest.fixture(autouse=True)
def eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sessions run in this process: their terminal is 80 columns wide whatever this
    process's own is (a session's output in a log, as a process of its own would see)."""
    monkeypatch.setenv("COLUMNS", "80")


@pytest.fixture(scope="module")
def server() -> Iterator[SimProcess]:
    process = start_sim_process("fixed", overrides={"ttft_ms": 2, "itl_ms": 1, "error_rate": 0.2})
    yield process
    process.stop()


def section(result: pytest.RunResult) -> list[str]:
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "= llmperf =" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("session ("))
    return lines[start + 1 : end]


def run(pytester: pytest.Pytester, server: SimProcess, *args: str) -> list[str]:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", f"--llm-endpoint={server.url}", *args)
    result.assert_outcomes(passed=2, failed=1)
    return section(result)


def assert_brief(lines: list[str]) -> None:
    green = [i for i, line in enumerate(lines) if line.startswith("test_suite.py::test_green ")]
    assert len(green) == 1, lines
    at = green[0]
    assert lines[at] == "test_suite.py::test_green [passed]: ✓ 2 SLO verdict(s) passed, 1 run"
    # its failed requests, in the server's words, are kept under it; its SLO lines are not
    assert lines[at + 1].startswith("    ✗ run0: http_error x") and "HTTP 500" in lines[at + 1]
    assert not any("✓ ttft.p50 < 5s" in line or "✓ error_rate" in line for line in lines)
    assert "test_suite.py::test_ungated [passed]: 2 runs" in lines
    # the failing test in full: its verdict line, its run's server line
    red = lines.index("test_suite.py::test_red [failed]")
    assert lines[red + 1].startswith("  ✗ ttft.p50 < 1us [run0]: observed ")
    assert any(line.startswith("    server [run0]: ") for line in lines[red:])
    # the ungated runs' figures are not (a full summary gives them: "run0: 27/30 ok, ...")
    assert not any(re.match(r"\s*run\d: \d+/\d+ ok", line) for line in lines)


def assert_full(lines: list[str]) -> None:
    assert "test_suite.py::test_green [passed]" in lines
    assert any(line.startswith("  ✓ ttft.p50 < 5s [run0]: observed ") for line in lines)
    assert "test_suite.py::test_ungated [passed]" in lines
    assert any(re.match(r"\s*run1: \d+/30 ok", line) for line in lines)
    assert "test_suite.py::test_red [failed]" in lines


@pytest.mark.parametrize(
    "args",
    [("-q", "--llm-summary=auto"), ("--llm-summary=brief",), ("-o", "llm_summary=brief")],
    ids=["auto-under-q", "option", "ini"],
)
def test_brief_says_a_line_per_passed_test_and_keeps_what_did_not_pass(
    pytester: pytest.Pytester, server: SimProcess, args: tuple[str, ...]
) -> None:
    assert_brief(run(pytester, server, *args))


@pytest.mark.parametrize(
    "args",
    [(), ("-q",), ("--llm-summary=auto",)],
    ids=["full-default", "full-default-under-q", "auto-without-q"],
)
def test_full_says_every_test_in_full(
    pytester: pytest.Pytester, server: SimProcess, args: tuple[str, ...]
) -> None:
    assert_full(run(pytester, server, *args))


def test_a_bad_summary_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest("--llm-summary=short")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--llm-summary: must be one of auto, brief, full, got 'short'" in result.stderr.str()


@pytest.mark.parametrize("rate", [0.5, 1.0], ids=["some-blank", "all-blank"])
def test_brief_keeps_the_blank_replies_on_the_line_and_an_all_blank_run(
    pytester: pytest.Pytester, rate: float
) -> None:
    """A passed test's one line counts its blank replies (shown wherever failed requests
    are); a run of nothing but blank replies keeps its note under it."""
    blank = start_sim_process(
        "fixed", overrides={"ttft_ms": 2, "itl_ms": 1, "blank_reply_rate": rate}
    )
    try:
        pytester.makepyfile(
            test_blank_suite="""
            import pytest

            @pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=20)
            @pytest.mark.llm_slo("ttft.p50 < 5s")
            async def test_green(llm_loadgen):
                await llm_loadgen.run()
            """
        )
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--llm-endpoint={blank.url}", "--llm-summary=brief"
        )
    finally:
        blank.stop()
    result.assert_outcomes(passed=1)
    said = " ".join(line.strip() for line in section(result))  # a long line wraps
    match = re.search(r"test_green \[passed\]: [^\n]*?, blank (\d+) \((\d+\.\d\d)%\)", said)
    assert match is not None, said
    assert 0 < int(match[1]) <= 20 and float(match[2]) == pytest.approx(int(match[1]) * 5)
    all_blank = [line for line in section(result) if "completed replies were blank" in line]
    assert bool(all_blank) is (rate == 1.0)
