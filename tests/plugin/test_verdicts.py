"""Pass and fail verdicts end to end: marker -> load -> simulator -> verdict -> exit status."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

PASSING = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=40, seed=3)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("ttft.p50 < 2s", "e2e.max < 10s", "error_rate < 1%")
async def test_meets_slo(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.counts["completed"] == 40
    assert result.metrics["ttft"].p(50) > 0
"""

# A closed loop: an open one on a busy machine falls behind its schedule, and a latency
# verdict of a generator-bound run is "inconclusive" (the machine's verdict), not the FAIL
# these tests read.
FAILING = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=30)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 1us", "error_rate < 1%")
async def test_impossible(llm_loadgen):
    await llm_loadgen.run()
"""


def test_passing_slo_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PASSING)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*llmperf: endpoint under test: embedded simulator*", "*✓ ttft.p50 < 2s*observed*"]
    )


def test_violated_slo_fails_the_test_with_a_table(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(FAILING)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*SLO violated: ttft.p50 < 1us, observed * ms",
            "*SLO*run*observed*target*verdict*",
            "*ttft.p50 < 1us*run0*ms*< 0.001 ms*FAIL*",
            "*error_rate < 1%*0.00%*< 1.00%*PASS*",
        ]
    )
    # the failure is the table, not a traceback into the plugin
    assert "plugin.py" not in result.stdout.str()


def test_json_report_core(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--llm-json=out/report.json")
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "out" / "report.json").read_text())
    assert report["endpoint"]["simulator"] == "fixed" and report["endpoint"]["model"]
    (test,) = report["tests"]
    assert test["nodeid"].endswith("::test_meets_slo") and test["outcome"] == "passed"
    (run,) = test["runs"]
    assert run["counts"] == {
        "issued": 40,
        "completed": 40,
        "failed": 0,
        "incomplete": 0,
        "cancelled": 0,
        "connection_retries": 0,
        "invalid": 0,
        "blank": 0,
    }
    assert run["load"] == {"pattern": "concurrency", "concurrency": 8, "seed": 3}
    assert run["workload"]["name"] == "synthetic" and run["workload"]["requests"] == 40
    metrics = run["metrics"]
    for name in ("ttft", "tpot", "itl", "e2e", "schedule_lag"):
        assert set(metrics[name]) >= {"p50", "p90", "p95", "p99", "p99.9", "mean", "max", "count"}
    assert metrics["ttft"]["count"] == 40 and metrics["itl"]["count"] == 40 * 3
    assert metrics["ttft"]["p50"] >= 20  # the fixed profile's TTFT is 20 ms
    for name in ("request_throughput", "output_throughput", "error_rate", "goodput"):
        assert isinstance(metrics[name], float)
    assert metrics["error_rate"] == 0.0 and metrics["goodput"] == 1.0
    assert [s["verdict"] for s in test["slos"]] == ["pass", "pass", "pass"]
    assert set(test["slos"][0]) >= {"expr", "observed", "target", "verdict"}
    assert report["session"]["exitstatus"] == 0


def test_junit_carries_each_slo_as_properties(pytester: pytest.Pytester) -> None:
    """xunit2 (the default) allows properties on the suite only; xunit1 also per testcase."""
    pytester.makepyfile(FAILING)
    pytester.runpytest("--junitxml=junit2.xml")
    root = ET.parse(pytester.path / "junit2.xml").getroot()
    case = root.find(".//testcase")
    assert case is not None and case.find("failure") is not None
    assert case.find("properties") is None
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    prefix = "test_junit_carries_each_slo_as_properties.py::test_impossible::"
    assert props[prefix + "llm_slo[ttft.p50 < 1us][run0].verdict"] == "fail"
    assert props[prefix + "llm_slo[error_rate < 1%][run0].verdict"] == "pass"
    assert props[prefix + "llm_slo[ttft.p50 < 1us][run0].observed"].endswith(" ms")

    pytester.runpytest("--junitxml=junit1.xml", "-o", "junit_family=xunit1")
    case = ET.parse(pytester.path / "junit1.xml").getroot().find(".//testcase")
    assert case is not None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["llm_slo[ttft.p50 < 1us][run0].verdict"] == "fail"


def test_server_errors_count_as_failed_requests(pytester: pytest.Pytester) -> None:
    from pytest_llmperf.sim import start_sim_process

    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=20)
        @pytest.mark.llm_slo("error_rate < 1%")
        async def test_errors(llm_loadgen):
            result = await llm_loadgen.run()
            assert result.counts["failed"] == 20
            assert result.errors == {"truncated_stream": 20}
        """
    )
    # every stream cut after its first token: the preflight's probe (which reads only the
    # first event) passes, the run's requests fail (a 503 on every request, the probe's
    # included, now stops the session at preflight: tests/hardening/test_metadata_deadlines.py)
    sim = start_sim_process("fixed", overrides={"cut_rate": 1.0})
    try:
        result = pytester.runpytest(f"--llm-endpoint={sim.url}", "--llm-json=r.json")
    finally:
        sim.stop()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*error_rate < 1%*100.00%*FAIL*"])
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert test["runs"][0]["counts"]["failed"] == 20


def test_dead_endpoint_ends_the_session_with_one_message(pytester: pytest.Pytester) -> None:
    import socket

    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_workload("synthetic", requests=5)
        async def test_a(llm_loadgen):
            await llm_loadgen.run()

        @pytest.mark.llm_workload("synthetic", requests=5)
        async def test_b(llm_loadgen):
            await llm_loadgen.run()
        """
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = pytester.runpytest(f"--llm-endpoint=http://127.0.0.1:{port}", "--llm-model=m")
    assert result.ret != pytest.ExitCode.OK
    text = result.stdout.str() + result.stderr.str()
    assert text.count(f"127.0.0.1:{port}") >= 1
    assert "Traceback" not in text


def test_completions_api(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--llm-api=completions", "--llm-json=r.json")
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["endpoint"]["api"] == "completions"


def test_too_few_samples_is_inconclusive_not_pass(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=30)
        @pytest.mark.llm_load("concurrency", concurrency=8)
        @pytest.mark.llm_slo("ttft.p99 < 10s")
        async def test_small(llm_loadgen):
            await llm_loadgen.run()
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    # 30 samples bound p99 from below only: at 99% an upper bound needs 459 (1 - 0.99**n)
    result.stdout.fnmatch_lines(
        [
            "*SLO inconclusive*",
            "*0.99 interval of p99 [[]*, ∞] holds the target; about 459 samples would decide it*",
        ]
    )
    relaxed = pytester.runpytest("--llm-inconclusive=warn")
    relaxed.assert_outcomes(passed=1, warnings=1)
    skipped = pytester.runpytest("--llm-inconclusive=skip")
    skipped.assert_outcomes(skipped=1)


def test_slo_without_a_run_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_slo("ttft.p50 < 1s")
        async def test_forgot(llm_loadgen):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*llm_slo declared but no gated run measured anything: llm_loadgen.run() was never*"]
    )


def test_several_runs_per_test_each_judged(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=20)
        @pytest.mark.llm_load("concurrency", concurrency=2)
        @pytest.mark.llm_slo("error_rate < 1%")
        async def test_sweep(llm_loadgen):
            for c in (1, 4):
                await llm_loadgen.run(concurrency=c)
            probe = await llm_loadgen.run(concurrency=8, gate=False)
            assert len(llm_loadgen.results) == 3 and not probe.gated
        """
    )
    result = pytester.runpytest("--llm-json=r.json")
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "r.json").read_text())
    (test,) = report["tests"]
    assert [r["load"]["concurrency"] for r in test["runs"]] == [1, 4, 8]
    assert [s["run"] for s in test["slos"]] == ["run0(concurrency=1)", "run1(concurrency=4)"]
