"""SLOs over nothing measured are not a pass: a test that declares ``llm_slo`` but whose
gated runs measured nothing (no run, only ``gate=False`` runs, or gated runs that
completed no request) fails, in one line, and every report says so. A test that
skipped or failed by itself keeps its own outcome; a test without SLOs is not judged."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

HEAD = "llm_slo declared but no gated run measured anything"

SESSION = """
import pytest

pytestmark = pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=8)


@pytest.mark.llm_slo("ttft.p90 < 10s")
async def test_never_runs(llm_loadgen):
    pass


@pytest.mark.llm_slo("ttft.p90 < 10s")
async def test_probes_only(llm_loadgen):
    await llm_loadgen.run(gate=False, label="probe")


@pytest.mark.llm_slo("ttft.p90 < 10s")
async def test_skips(llm_loadgen):
    pytest.skip("not on this server")


@pytest.mark.llm_slo("ttft.p90 < 10s")
async def test_fails_by_itself(llm_loadgen):
    assert 1 == 2, "the body's own failure"


async def test_no_slo_never_runs(llm_loadgen):
    pass


@pytest.mark.llm_slo(ruleset="mlperf-llama3.1-8b-server")
async def test_ruleset_never_runs(llm_loadgen):
    pass
"""

NEVER = "llm_loadgen.run() was never called"
PROBES = "its only runs were gate=False (probe), which are reported, not judged"


def _json(path: Any) -> dict[str, dict[str, Any]]:
    return {t["nodeid"].split("::")[-1]: t for t in json.loads(path.read_text())["tests"]}


def _check_session(pytester: pytest.Pytester, result: pytest.RunResult) -> None:
    """Outcomes, the one-line reasons and every report's record of them."""
    result.assert_outcomes(failed=4, passed=1, skipped=1)
    # each failure's first line, which pytest's summary and JUnit show
    result.stdout.fnmatch_lines(["*_ test_never_runs _*", f"{HEAD}: {NEVER}"])
    result.stdout.fnmatch_lines(["*_ test_probes_only _*", f"{HEAD}: {PROBES}"])
    result.stdout.fnmatch_lines(["*_ test_ruleset_never_runs _*", f"{HEAD}: {NEVER}"])
    result.stdout.fnmatch_lines(["*AssertionError: the body's own failure"])
    # the llmperf section names it under the test too
    result.stdout.fnmatch_lines(["*::test_never_runs [[]failed[]]", f"  ✗ {HEAD}: {NEVER}"])
    tests = _json(pytester.path / "r.json")
    assert (tests["test_never_runs"]["outcome"], tests["test_never_runs"]["nothing_measured"]) == (
        "failed",
        NEVER,
    )
    assert tests["test_ruleset_never_runs"]["nothing_measured"] == NEVER
    probes = tests["test_probes_only"]
    assert (probes["outcome"], probes["nothing_measured"]) == ("failed", PROBES)
    assert [r["gated"] for r in probes["runs"]] == [False]
    # the body's own failure and the skip are theirs: no "nothing measured" is said of them
    assert "test_fails_by_itself" not in tests or not tests["test_fails_by_itself"].get(
        "nothing_measured"
    )
    assert "test_skips" not in tests and "test_no_slo_never_runs" not in tests

    root = ET.parse(pytester.path / "j.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    failure = cases["test_never_runs"].find("failure")
    assert failure is not None and failure.get("message") == f"Failed: {HEAD}: {NEVER}"
    assert cases["test_no_slo_never_runs"].find("failure") is None
    assert cases["test_skips"].find("skipped") is not None
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    nodeid = next(t["nodeid"] for k, t in tests.items() if k == "test_probes_only")
    assert props[f"{nodeid}::llm_nothing_measured"] == PROBES

    markdown = (pytester.path / "r.md").read_text()
    assert (
        "### ❌ Failed: `test_nothing_measured_reports.py::test_never_runs` "
        "(llm\\_slo declared but no gated run measured anything: "
        "llm\\_loadgen.run() was never called)"
    ) in markdown
    html = (pytester.path / "r.html").read_text()
    assert f"{HEAD}: {PROBES}" in html


def test_slos_over_nothing_measured_fail_and_every_report_says_so(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_nothing_measured_reports=SESSION)
    result = pytester.runpytest(
        "--llm-json=r.json", "--junitxml=j.xml", "--llm-markdown=r.md", "--llm-html=r.html"
    )
    _check_session(pytester, result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_under_xdist_the_worker_judges_and_the_controller_reports(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_nothing_measured_reports=SESSION)
    result = pytester.runpytest_subprocess(
        "-n",
        "2",
        "-p",
        "xdist",
        "--llm-json=r.json",
        "--junitxml=j.xml",
        "--llm-markdown=r.md",
        "--llm-html=r.html",
    )
    _check_session(pytester, result)


def test_a_gated_run_that_completed_nothing_fails_whatever_the_inconclusive_policy(
    pytester: pytest.Pytester,
) -> None:
    """Every stream cut after its first token (the preflight's probe, which reads only the
    first event, passes): the run issued its requests and completed none."""
    from pytest_llmperf.sim import start_sim_process

    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=12)
        @pytest.mark.llm_slo("ttft.p90 < 10s")
        async def test_dead(llm_loadgen):
            await llm_loadgen.run()
        """
    )
    sim = start_sim_process("fixed", overrides={"cut_rate": 1.0})
    try:
        result = pytester.runpytest(
            f"--llm-endpoint={sim.url}", "--llm-inconclusive=warn", "--llm-json=r.json"
        )
    finally:
        sim.stop()
    result.assert_outcomes(failed=1)
    why = "run0: 12 issued, 0 completed: every request failed (truncated_stream x12)"
    result.stdout.fnmatch_lines(["*_ test_dead _*", f"{HEAD}: {why}"])
    (test,) = _json(pytester.path / "r.json").values()
    assert test["nothing_measured"] == why


def test_sweeps_and_searches_count_where_they_confirm_with_a_gated_run(
    pytester: pytest.Pytester,
) -> None:
    """A procedure's probes are ``gate=False``; its confirming run is gated, and judged."""
    pytester.makepyfile(
        """
        import pytest

        pytestmark = [
            pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=8),
            pytest.mark.llm_slo("ttft.p90 < 10s"),
        ]

        async def test_sweep_only(llm_loadgen):
            await llm_loadgen.sweep(rates=[20, 40], attach=False)

        async def test_search_confirmed(llm_loadgen):
            found = await llm_loadgen.max_concurrency(
                initial=1, maximum=2, slos=["error_rate < 50%"], confirm=True, attach=False
            )
            assert found.confirmed is not None and found.confirmed.gated
        """
    )
    result = pytester.runpytest("--llm-inconclusive=warn", "--llm-json=r.json")
    result.assert_outcomes(failed=1, passed=1)
    tests = _json(pytester.path / "r.json")
    assert tests["test_sweep_only"]["nothing_measured"].startswith("its only runs were gate=False")
    assert tests["test_search_confirmed"]["nothing_measured"] is None


def test_a_session_ruleset_with_no_perf_test_selected_judges_nothing(
    pytester: pytest.Pytester,
) -> None:
    """A ruleset in the ini and a run of plain tests only (``-k``, a unit-test folder): no
    test used ``llm_loadgen``, so the ruleset has nothing to judge and the session keeps
    its tests' outcome; once a selected test uses ``llm_loadgen`` and measures nothing,
    the ruleset fails the session."""
    pytester.makefile(".yaml", rules="name: team\ntargets:\n  ttft: {p90: 5s}\n")
    pytester.makeini("[pytest]\nllm_ruleset = rules.yaml\n")
    pytester.makepyfile(
        """
        async def test_uses_the_generator(llm_loadgen):
            pass

        def test_plain():
            pass
        """
    )
    result = pytester.runpytest("-k", "plain", "--llm-json=r.json")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    assert json.loads((pytester.path / "r.json").read_text())["session"]["slos"] == []
    result = pytester.runpytest("--llm-json=r.json")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_session_ruleset_over_nothing_measured_fails_the_session(
    pytester: pytest.Pytester,
) -> None:
    """``--llm-ruleset`` judges the session's merged gated runs, not any one test: the
    tests keep their outcomes (a test without SLOs is not judged), the session fails."""
    pytester.makefile(".yaml", rules="name: team\ntargets:\n  ttft: {p90: 5s}\n")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=4)
        async def test_probe(llm_loadgen):
            await llm_loadgen.run(gate=False)

        def test_plain():
            pass
        """
    )
    result = pytester.runpytest("--llm-ruleset=rules.yaml", "--llm-json=r.json", "--junitxml=j.xml")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    why = (
        "--llm-ruleset team declared but no gated run measured anything: "
        "no test made a gated llm_loadgen.run()"
    )
    result.stdout.fnmatch_lines([f"✗ {why}", "*(targets ttft.p90 < 5s)"])
    session = json.loads((pytester.path / "r.json").read_text())["session"]
    assert session["exitstatus"] == 1
    assert [(v["verdict"], v["run"], v["reason"]) for v in session["slos"]] == [
        ("fail", "session", why)
    ]
    props = {
        p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").iter("property")
    }
    assert props["llm_session[ttft.p90 < 5s][session].verdict"] == "fail"
