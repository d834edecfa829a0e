"""The extension hooks (pytest_llmperf/hooks.py): arguments, JSON additions, xdist, failures."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

# Records every call, with the process it ran in (an xdist worker's id, or None); the outer
# suite may itself run under xdist, so the worker is read from the config, not the environment.
RECORDING = """
import json
from pathlib import Path

import pytest

LOG = Path(__file__).with_name("calls.jsonl")


def _log(**entry):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\\n")


def _worker(config):
    return getattr(config, "workerinput", {}).get("workerid")


def pytest_llmperf_run_finished(item, result):
    _log(
        hook="run_finished",
        item=isinstance(item, pytest.Item),
        nodeid=item.nodeid,
        result=type(result).__name__,
        label=result.label,
        gated=result.gated,
        completed=result.counts["completed"],
        ttft_p99=result.metrics["ttft"].p(99),
        worker=_worker(item.config),
    )


def pytest_llmperf_update_json(config, report):
    _log(
        hook="update_json",
        config=isinstance(config, pytest.Config),
        keys=sorted(report),
        worker=_worker(config),
    )
    report["ci"] = {"commit": "abc123"}
    for test in report["tests"]:
        for run in test["runs"]:
            run["metrics"]["ttft_p99_x2"] = run["metrics"]["ttft"]["p99"] * 2


def pytest_llmperf_session_finished(session, report):
    written = Path(session.config.getoption("llm_json") or "missing.json")
    _log(
        hook="session_finished",
        session=isinstance(session, pytest.Session),
        ci=report.get("ci"),
        written=written.exists() and json.loads(written.read_text()).get("ci"),
        worker=_worker(session.config),
    )
"""

TWO_TESTS = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=20)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 5s")
async def test_twice(llm_loadgen):
    await llm_loadgen.run()
    await llm_loadgen.run(concurrency=2, gate=False)

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=8)
async def test_once(llm_loadgen):
    await llm_loadgen.run()
"""


@pytest.fixture(autouse=True)
def _loop_scope(pytester: pytest.Pytester) -> None:
    """Inner sessions set pytest-asyncio's loop scope (else it warns in every run)."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def calls(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    log = pytester.path / "calls.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_each_hook_is_called_with_its_arguments(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RECORDING)
    pytester.makepyfile(test_hooked=TWO_TESTS)
    result = pytester.runpytest("--llm-json=r.json")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    log = calls(pytester)
    assert [c["hook"] for c in log] == ["run_finished"] * 3 + ["update_json", "session_finished"]
    runs = log[:3]
    assert [(c["nodeid"], c["label"], c["gated"], c["completed"]) for c in runs] == [
        ("test_hooked.py::test_twice", "run0", True, 20),
        ("test_hooked.py::test_twice", "run1(concurrency=2)", False, 20),
        ("test_hooked.py::test_once", "run0", True, 8),
    ]
    assert all(c["item"] and c["result"] == "RunResult" and c["ttft_p99"] > 0 for c in runs)
    update, finished = log[3:]
    assert update["config"] and {"endpoint", "tests", "session"} <= set(update["keys"])
    # the session hook sees the report as written, additions included
    assert finished["session"] and finished["ci"] == finished["written"] == {"commit": "abc123"}


def test_json_additions_appear_in_the_written_report(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RECORDING)
    pytester.makepyfile(test_hooked=TWO_TESTS)
    result = pytester.runpytest("--llm-json=r.json", "--llm-html=r.html")
    result.assert_outcomes(passed=2)
    report = read_json(pytester.path / "r.json")
    assert report["ci"] == {"commit": "abc123"}
    runs = [run for test in report["tests"] for run in test["runs"]]
    assert len(runs) == 3
    for run in runs:
        assert run["metrics"]["ttft_p99_x2"] == run["metrics"]["ttft"]["p99"] * 2
    assert report["session"]["hook_errors"] == []
    assert (pytester.path / "r.html").exists()


def test_every_reported_run_reaches_the_run_hook(pytester: pytest.Pytester) -> None:
    """Methodology procedures make runs of their own (sweep points, warm-up probes): each one
    in the report must have passed through the hook, in order."""
    pytester.makeconftest(RECORDING)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=10)
        @pytest.mark.llm_load("constant", rate=50)
        async def test_procedures(llm_loadgen):
            await llm_loadgen.sweep(rates=[20, 40])
            await llm_loadgen.warm_up(requests=5, probes=2, requests_per_probe=1, max_rounds=1)
        """
    )
    pytester.runpytest("--llm-json=r.json").assert_outcomes(passed=1)
    hooked = [(c["label"], c["gated"]) for c in calls(pytester) if c["hook"] == "run_finished"]
    (test,) = read_json(pytester.path / "r.json")["tests"]
    assert hooked == [(run["label"], run["gated"]) for run in test["runs"]]
    assert hooked[:2] == [("sweep rate=20", False), ("sweep rate=40", False)]
    assert len(hooked) > 2  # and the warm-up's runs


XDIST_TESTS = """
import pytest

@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=10)
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_part(llm_loadgen, seed):
    await llm_loadgen.run(seed=seed)
"""


def test_under_xdist_runs_fire_in_workers_and_the_report_in_the_controller(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("xdist")
    pytester.makeconftest(RECORDING)
    pytester.makepyfile(test_parts=XDIST_TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist", "--llm-json=r.json")
    result.assert_outcomes(passed=4)
    log = calls(pytester)
    runs = [c for c in log if c["hook"] == "run_finished"]
    assert len(runs) == 4
    assert {c["worker"] for c in runs} <= {"gw0", "gw1"} and None not in {c["worker"] for c in runs}
    session_calls = [(c["hook"], c["worker"]) for c in log if c["hook"] != "run_finished"]
    assert session_calls == [("update_json", None), ("session_finished", None)]
    report = read_json(pytester.path / "r.json")
    assert report["ci"] == {"commit": "abc123"}
    assert [len(t["runs"]) for t in report["tests"]] == [1, 1, 1, 1]
    assert all("ttft_p99_x2" in t["runs"][0]["metrics"] for t in report["tests"])


ONE_RUN = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=8)
async def test_one(llm_loadgen):
    await llm_loadgen.run()
"""


def test_a_raising_run_hook_fails_its_test_and_keeps_the_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_llmperf_run_finished(item, result):
            raise ValueError("dashboard unreachable")
        """
    )
    pytester.makepyfile(test_broken=ONE_RUN)
    result = pytester.runpytest("--llm-json=r.json")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*LlmPerfHookError: pytest_llmperf_run_finished raised ValueError: dashboard "
            "unreachable at conftest.py:2 in pytest_llmperf_run_finished after run 'run0' "
            "of test_broken.py::test_one; the run is kept in the reports",
        ]
    )
    (test,) = read_json(pytester.path / "r.json")["tests"]
    assert test["outcome"] == "failed"
    assert [run["counts"]["completed"] for run in test["runs"]] == [8]


UNWRITABLE = "left the report unwritable as JSON:"


@pytest.mark.parametrize(
    ("body", "what", "error"),
    [
        ('raise RuntimeError("no git here")', "raised", "RuntimeError: no git here"),
        ("report['ci']['tags'] = {'a', 'b'}", UNWRITABLE, "TypeError"),
        ("report['ci']['ratio'] = float('nan')", UNWRITABLE, "ValueError"),
    ],
    ids=["raises", "not-json", "nan"],
)
def test_a_failing_update_json_costs_only_the_additions(
    pytester: pytest.Pytester, body: str, what: str, error: str
) -> None:
    pytester.makeconftest(
        "def pytest_llmperf_update_json(config, report):\n"
        "    report['ci'] = {'commit': 'abc123'}\n"
        f"    {body}\n"
    )
    pytester.makepyfile(test_broken=ONE_RUN)
    result = pytester.runpytest("--llm-json=r.json", "--llm-html=r.html")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    report = read_json(pytester.path / "r.json")
    assert "ci" not in report  # the core report, without the half-made additions
    assert [len(t["runs"]) for t in report["tests"]] == [1]
    (failure,) = report["session"]["hook_errors"]
    assert failure["hook"] == "pytest_llmperf_update_json"
    assert failure["error"].startswith(error)
    raised_here = "conftest.py:3 in pytest_llmperf_update_json" if what == "raised" else ""
    assert failure["where"] == raised_here
    assert (pytester.path / "r.html").exists()
    at = f" at {raised_here}" if raised_here else ""
    result.stdout.fnmatch_lines(
        [
            f"pytest-llmperf: pytest_llmperf_update_json {what} {error}*{at}; "
            "the reports were written without the plugins' additions",
        ]
    )


def test_a_raising_session_hook_leaves_the_reports_written(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_llmperf_session_finished(session, report):
            raise ConnectionError("chat webhook down")
        """
    )
    pytester.makepyfile(test_broken=ONE_RUN)
    result = pytester.runpytest("--llm-json=r.json")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(
        [
            "*llmperf report: *r.json",
            "pytest-llmperf: pytest_llmperf_session_finished raised ConnectionError: chat "
            "webhook down at conftest.py:2 in pytest_llmperf_session_finished; "
            "the reports were written before it",
        ]
    )
    assert read_json(pytester.path / "r.json")["session"]["hook_errors"] == []


def test_a_failing_session_keeps_its_own_exit_status(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_llmperf_session_finished(session, report):
            raise ConnectionError("chat webhook down")
        """
    )
    pytester.makepyfile("def test_fails():\n    assert False\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["pytest-llmperf: pytest_llmperf_session_finished raised *"])


def _doc_example() -> str:
    """The worked example's conftest.py from docs/extending.md, so the doc cannot rot."""
    doc = (Path(__file__).parents[2] / "docs" / "extending.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(# conftest\.py\n.*?)```", doc, flags=re.S)
    return block


def test_the_documented_example_works(pytester: pytest.Pytester, monkeypatch) -> None:
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("LLMPERF_P99_LOG", str(pytester.path / "p99.jsonl"))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_SHA", "f00d")
    pytester.makeconftest(_doc_example())
    pytester.makepyfile(test_hooked=TWO_TESTS)
    result = pytester.runpytest("--llm-json=r.json")
    result.assert_outcomes(passed=2)
    lines = [json.loads(line) for line in (pytester.path / "p99.jsonl").read_text().splitlines()]
    assert [(r["test"], r["run"], r["samples"]) for r in lines] == [
        ("test_hooked.py::test_twice", "run0", 20),
        ("test_hooked.py::test_twice", "run1(concurrency=2)", 20),
        ("test_hooked.py::test_once", "run0", 8),
    ]
    assert all(r["ttft_p99_ms"] > 0 for r in lines)
    report = read_json(pytester.path / "r.json")
    assert report["build"] == {"commit": "f00d"}
    assert report["tests"][0]["runs"][0]["metrics"]["completed_share"] == 1.0
    text = summary.read_text()
    assert "| test_hooked.py::test_twice | passed | ttft.p50 < 5s: pass" in text
    assert "| test_hooked.py::test_once | passed | - |" in text


def test_ctrl_c_wins_over_a_raising_run_hook(tmp_path: Path) -> None:
    """A run that Ctrl-C ended must still stop the session when the hook then raises."""
    from types import SimpleNamespace

    from pytest_llmperf.hook_calls import LlmPerfHookError, call_run_finished

    def broken(**_: object) -> None:
        raise ValueError("boom")

    broken.get_hookimpls = list  # type: ignore[attr-defined]
    item = SimpleNamespace(
        ihook=SimpleNamespace(pytest_llmperf_run_finished=broken),
        config=SimpleNamespace(rootpath=tmp_path),
        nodeid="t.py::test",
    )
    interrupted = SimpleNamespace(label="run0", stop_reason="SIGINT")
    with pytest.raises(KeyboardInterrupt) as info:
        call_run_finished(item, interrupted)  # type: ignore[arg-type]
    assert isinstance(info.value.__cause__, LlmPerfHookError)
    completed = SimpleNamespace(label="run0", stop_reason="completed")
    with pytest.raises(LlmPerfHookError, match="raised ValueError: boom after run 'run0'"):
        call_run_finished(item, completed)  # type: ignore[arg-type]
