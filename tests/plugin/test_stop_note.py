"""The terminal summary's last note when a session did not run to its end.

pytest calls ``pytest_keyboard_interrupt`` for a real interrupt (Ctrl-C, SIGTERM made
Ctrl-C by plugin/interrupts.py, a KeyboardInterrupt in a test) and also when it stops
the session itself: errors during collection (exit status 2, "Interrupted: 1 error
during collection") and ``pytest.exit`` (the plugin's usage errors found mid-session).
Only a real interrupt marks the session interrupted (the note and the JSON report's
``session.interrupted``); a stop names its cause when runs were measured before it,
and says nothing when none were (pytest prints the cause itself).

Each session runs in-process (pytester) against the embedded simulator; the interrupt
is a real SIGINT, sent once the run's first request has completed (the approach of
tests/loadgen/test_session.py: the run's handler is then in place, no timer).
"""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.terminal import stop_note, summary_lines

FAST = (
    '@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=8)\n'
    '@pytest.mark.llm_load("concurrency", concurrency=8)\n'
)

MEASURED = f"""
import pytest

{FAST}async def test_measured(llm_loadgen):
    await llm_loadgen.run()
"""

SIGINT_MID_RUN = """
import os
import signal

import pytest


@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4)
@pytest.mark.llm_load("constant", rate=50, requests=10000)
async def test_long(llm_loadgen):
    sent = []

    def sigint_at_the_first_completion(record):
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)

    await llm_loadgen.run_spec(
        llm_loadgen.spec.run, label="run0", observers=[sigint_at_the_first_completion]
    )
"""

INTERRUPTED_NOTE = "session was interrupted: figures cover what was measured until then"
NOTHING_MEASURED_NOTE = "session was interrupted before any run was measured"


def llmperf_section(result: pytest.RunResult) -> list[str]:
    """The lines of the ``llmperf`` section of the terminal summary."""
    lines = result.outlines
    starts = [k for k, line in enumerate(lines) if line.startswith("=") and " llmperf " in line]
    assert starts, result.stdout.str()
    section = []
    for line in lines[starts[0] + 1 :]:
        if line.startswith(("=", "!")):
            break
        section.append(line)
    return section


def session_of(pytester: pytest.Pytester) -> dict[str, Any]:
    session: dict[str, Any] = json.loads((pytester.path / "r.json").read_text())["session"]
    return session


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # no_reraise_ctrlc: pytester re-raises an inner session's KeyboardInterrupt otherwise
    return pytester.runpytest(
        "-p", "no:cacheprovider", "--llm-json=r.json", *args, no_reraise_ctrlc=True
    )


def test_a_collection_error_is_no_interruption(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_measured=MEASURED, test_broken="def test_broken(:\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's status for it, too
    result.stdout.fnmatch_lines(["*Interrupted: 1 error during collection*"])
    section = llmperf_section(result)
    assert section == ["llmperf report: r.json"], section  # no note: nothing was measured
    assert "interrupted" not in "\n".join(section)
    session = session_of(pytester)
    assert session["interrupted"] is False
    assert session["exitstatus"] == pytest.ExitCode.INTERRUPTED


def test_a_usage_error_mid_session_is_no_interruption(pytester: pytest.Pytester) -> None:
    """``--llm-baseline-strict`` against another server's baseline: the plugin's
    ``pytest.exit`` (exit status 4) as the first test gets its load generator, before it
    measures anything (no run finishes), so nothing measured is dropped."""
    pytester.makepyfile(test_measured=MEASURED)
    saved = run(pytester, "--llm-baseline-save=b.json")
    assert saved.ret == pytest.ExitCode.OK, saved.stdout.str()
    baseline = json.loads((pytester.path / "b.json").read_text())
    baseline["fingerprint"]["model"]["max_model_len"] = 7  # "measured on another server"
    (pytester.path / "b.json").write_text(json.dumps(baseline))
    pytester.makeconftest(
        "def pytest_llmperf_run_finished(item, result):\n"
        "    open('runs.txt', 'a').write(result.label + '\\n')\n"
    )
    result = run(pytester, "--llm-baseline-compare=b.json", "--llm-baseline-strict")
    assert not (pytester.path / "runs.txt").exists()  # stopped before its run
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*Exit: pytest-llmperf: baseline b.json: measured on a diff*"])
    section = llmperf_section(result)
    assert section == ["llmperf report: r.json"], section
    assert session_of(pytester)["interrupted"] is False


def test_pytest_exit_after_a_measured_test_names_the_stop(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_measured=MEASURED,
        test_stop='import pytest\n\ndef test_stop():\n    pytest.exit("enough for today", 4)\n',
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    section = llmperf_section(result)
    assert section[0] == "test_measured.py::test_measured [passed]", section
    note = "session stopped early (enough for today): figures cover what was measured until then"
    assert note in " ".join(line.strip() for line in section), section  # wrapped at 80
    assert not any("interrupted" in line for line in section), section
    session = session_of(pytester)
    assert session["interrupted"] is False and session["outcomes"] == {"passed": 1}


def test_sigint_mid_run_keeps_the_note(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_long=SIGINT_MID_RUN)
    before = signal.getsignal(signal.SIGINT)
    result = run(pytester)
    assert signal.getsignal(signal.SIGINT) is before  # the run's handler went with it
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    section = llmperf_section(result)
    assert section[-2:] == [INTERRUPTED_NOTE, "llmperf report: r.json"], section
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["session"]["interrupted"] is True
    [test] = report["tests"]
    assert test["outcome"] == "interrupted"
    [measured] = test["runs"]
    assert measured["interrupted"] is True and measured["counts"]["completed"] >= 1


def test_an_interrupt_before_any_run_says_nothing_was_measured(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_early=f"""
import pytest

{FAST}@pytest.mark.llm_slo("ttft.p99 < 10s")
async def test_early(llm_loadgen):
    raise KeyboardInterrupt
"""
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    section = llmperf_section(result)
    assert NOTHING_MEASURED_NOTE in section, section
    assert INTERRUPTED_NOTE not in section
    assert session_of(pytester)["interrupted"] is True


def test_a_normal_session_has_no_note(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_measured=MEASURED)
    result = run(pytester)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    section = llmperf_section(result)
    assert section[0] == "test_measured.py::test_measured [passed]"  # it measured
    text = "\n".join(section)
    assert "interrupted" not in text and "stopped early" not in text
    assert session_of(pytester)["interrupted"] is False


def test_stop_note_of_each_case() -> None:
    run = {"label": "run0", "metrics": {}, "counts": {}}
    empty, measured = SessionData(), SessionData()
    measured.add("t.py::test_a", "passed", {"runs": [run]})
    assert stop_note(empty) == stop_note(measured) == ""
    assert stop_note(empty, "1 error during collection") == ""
    assert stop_note(measured, "stopping after 1 failures") == (
        "session stopped early (stopping after 1 failures): "
        "figures cover what was measured until then"
    )
    empty.interrupted = measured.interrupted = True
    assert stop_note(empty) == NOTHING_MEASURED_NOTE
    assert stop_note(measured) == INTERRUPTED_NOTE
    assert stop_note(measured, "ignored: an interrupt wins") == INTERRUPTED_NOTE
    assert summary_lines(empty, []) == [NOTHING_MEASURED_NOTE]
