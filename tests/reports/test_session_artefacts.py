"""Whole sessions against the simulator: JSON contract, JUnit families, rulesets, baselines, xdist.

Each test drives a real pytest session (pytester) against a simulator
subprocess on 127.0.0.1 and reads the artefacts it wrote.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.sim import SimProcess, start_sim_process

SECRET = "sk-test-DO-NOT-LEAK-4242"

TESTS = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests={n}, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("ttft.p50 < 5s", "error_rate < 1%")
async def test_meets(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests={n}, seed=2)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("ttft.p50 < 1us")
async def test_misses(llm_loadgen):
    await llm_loadgen.run()
"""

CONTRACT_METRIC_STATS = {"p50", "p90", "p95", "p99", "p99.9", "mean", "max", "count"}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    process = start_sim_process("fixed", overrides={"ttft_ms": 20, "itl_ms": 2})
    yield process
    process.stop()


# The baseline pair: TTFT 20 ms against 60 ms, the same token gaps. Gaps of 10 ms, not 2:
# on a busy machine the client reads 2 ms gaps late and in lumps, so their p50 swings from
# 0.05 to 2 ms between sessions (a "+3660%" change), which no relative allowance can judge.
@pytest.fixture(scope="module")
def steady_sim() -> Iterator[SimProcess]:
    process = start_sim_process("fixed", overrides={"ttft_ms": 20, "itl_ms": 10})
    yield process
    process.stop()


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[SimProcess]:
    process = start_sim_process("fixed", overrides={"ttft_ms": 60, "itl_ms": 10})
    yield process
    process.stop()


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_json_contract_html_junit_and_no_key_anywhere(
    pytester: pytest.Pytester, sim: SimProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    pytester.makepyfile(TESTS.format(n=60))
    result = pytester.runpytest(
        f"--llm-endpoint={sim.url}",
        "--llm-json=out/r.json",
        "--llm-html=out/r.html",
        "--llm-baseline-save=out/base.json",
        "--junitxml=out/j.xml",
    )
    result.assert_outcomes(passed=1, failed=1)
    out = pytester.path / "out"
    texts = {p.name: p.read_text() for p in out.iterdir()}
    assert set(texts) == {"r.json", "r.html", "base.json", "j.xml"}
    for name, text in {
        **texts,
        "stdout": result.stdout.str(),
        "stderr": result.stderr.str(),
    }.items():
        assert SECRET not in text, name

    report = read_json(out / "r.json")
    assert set(report) >= {"endpoint", "tests", "session"}
    assert report["endpoint"]["model"] and report["endpoint"]["api_key"] == "set"
    assert report["endpoint"]["server_version"]  # the simulator answers GET /version
    outcomes = {t["nodeid"].split("::")[1]: t for t in report["tests"]}
    assert outcomes["test_meets"]["outcome"] == "passed"
    assert outcomes["test_misses"]["outcome"] == "failed"
    for test in report["tests"]:
        assert set(test) >= {"nodeid", "outcome", "runs", "slos"}
        for slo in test["slos"]:
            assert set(slo) >= {"expr", "observed", "target", "verdict"}
            assert slo["verdict"] in ("pass", "fail", "inconclusive")
        (run,) = test["runs"]
        assert set(run) >= {"load", "workload", "counts", "metrics", "minimum_report"}
        assert set(run["counts"]) >= {"issued", "completed", "failed"}
        m = run["metrics"]
        for name in ("ttft", "tpot", "itl", "e2e", "schedule_lag"):
            assert set(m[name]) >= CONTRACT_METRIC_STATS, name
        for name in ("request_throughput", "output_throughput", "error_rate", "goodput"):
            assert isinstance(m[name], float), name
        # units: latencies in ms (the profile's TTFT is 20 ms), rates as fractions
        assert 20 <= m["ttft"]["p50"] < 1000
        assert 0.0 <= m["error_rate"] <= 1.0 and 0.0 <= m["goodput"] <= 1.0
        assert "=== LLM Benchmark Report (Minimum) ===" in run["minimum_report"]
    session = report["session"]
    assert session["exitstatus"] == 1
    (group,) = session["groups"]
    assert group["runs"] == 2 and group["counts"]["issued"] == 120
    assert report["units"]["latency"] == "ms"

    html = texts["r.html"]
    assert client_plots(html) == 2 * 13 and "test_misses" in html

    baseline = read_json(out / "base.json")
    assert set(baseline["tests"]) == {t["nodeid"] for t in report["tests"]}


def _children(element: ET.Element) -> set[str]:
    return {child.tag for child in element}


@pytest.mark.parametrize("family", ["xunit2", "xunit1"])
def test_junit_properties_are_schema_valid_for_the_family(
    pytester: pytest.Pytester, sim: SimProcess, family: str
) -> None:
    pytester.makepyfile(TESTS.format(n=40))
    pytester.makefile(".yaml", rules="targets:\n  error_rate: 1%\n")
    pytester.runpytest(
        f"--llm-endpoint={sim.url}",
        "--junitxml=j.xml",
        "--llm-ruleset=rules.yaml",
        "-o",
        f"junit_family={family}",
    )
    root = ET.parse(pytester.path / "j.xml").getroot()
    (suite,) = root.iter("testsuite")
    cases = list(suite.iter("testcase"))
    assert len(cases) == 2
    suite_props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    # session-wide ruleset verdicts are suite properties in both families
    assert any(k.startswith("llm_session[error_rate < 1%]") for k in suite_props)
    misses = next(c for c in cases if c.get("name") == "test_misses")
    assert misses.find("failure") is not None
    if family == "xunit2":
        # junit-10.xsd: a testcase holds only skipped/error/failure/system-out/system-err(/rerun*)
        allowed = {"skipped", "error", "failure", "system-out", "system-err"}
        for case in cases:
            assert _children(case) <= allowed, _children(case)
        props = {k.split("::", 2)[-1]: v for k, v in suite_props.items() if "::test_misses::" in k}
    else:
        props = {p.get("name"): p.get("value") for p in misses.iter("property")}
    assert props["llm_slo[ttft.p50 < 1us][run0].verdict"] == "fail"
    assert props["llm_slo[ttft.p50 < 1us][run0].observed"].endswith(" ms")
    assert props["llm_slo[ttft.p50 < 1us][run0].target"] == "0.001 ms"
    assert props["llm_slo[ttft.p50 < 1us][run0].samples"] == "40"


SESSION_ONLY = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=50, seed={seed})
@pytest.mark.llm_load("concurrency", concurrency=8)
async def test_load_{seed}(llm_loadgen):
    await llm_loadgen.run()
"""


def test_session_ruleset_sets_exit_status_and_prints_one_line_per_target(
    pytester: pytest.Pytester, sim: SimProcess
) -> None:
    pytester.makepyfile(test_one=SESSION_ONLY.format(seed=1), test_two=SESSION_ONLY.format(seed=2))
    pytester.makefile(
        ".yaml",
        rules="""
name: team-slos
targets:
  ttft: {p50: 5s, p90: 1us}
  error_rate: 1%
""",
        big="name: big\nmin_samples: 100000\ntargets:\n  ttft: {p50: 5s}\n",
    )
    result = pytester.runpytest(f"--llm-endpoint={sim.url}", "--llm-ruleset=rules.yaml")
    result.assert_outcomes(passed=2)  # the tests pass; the session-wide targets fail
    assert result.ret == 1
    out = result.stdout.str()
    key = next(line for line in out.splitlines() if "run(s)" in line)
    assert "2 run(s)" in key and "100/100 ok" in key  # both tests merged into one group
    result.stdout.fnmatch_lines(
        [
            "*✓ ttft.p50 < 5s: observed * ms, interval [[]* ms, * ms] at 99%, "
            "target 5000.0 ms, n=100",
            "*✗ ttft.p90 < 1us: observed * ms, interval [[]* ms, * ms] at 99%, "
            "target 0.001 ms, n=100",
            "*✓ error_rate < 1%: observed 0.00%, target 1.00%, n=100",
        ]
    )
    # too few samples for the ruleset: inconclusive, which fails by default and not with warn
    strict = pytester.runpytest(f"--llm-endpoint={sim.url}", "--llm-ruleset=big.yaml")
    assert strict.ret == 1
    strict.stdout.fnmatch_lines(["*? ttft.p50 < 5s*needs >= 100000 samples, run has 100*"])
    relaxed = pytester.runpytest(
        f"--llm-endpoint={sim.url}", "--llm-ruleset=big.yaml", "--llm-inconclusive=warn"
    )
    assert relaxed.ret == 0


def test_per_test_ruleset_brings_its_minimums(pytester: pytest.Pytester, sim: SimProcess) -> None:
    pytester.makefile(".yaml", rules="min_duration: 1h\ntargets:\n  ttft: {p50: 5s}\n")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=30)
        @pytest.mark.llm_load("concurrency", concurrency=8)
        @pytest.mark.llm_slo("e2e.p50 < 5s", ruleset="rules.yaml")
        async def test_short(llm_loadgen):
            await llm_loadgen.run()
        """
    )
    result = pytester.runpytest(f"--llm-endpoint={sim.url}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*SLO inconclusive*", "*ttft.p50 < 5s*needs >= 3600 s measured*"])
    assert "e2e.p50 < 5s [run0]: observed" in result.stdout.str()  # its own SLO has no minimum


BASELINE_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=120, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=8)
async def test_chat(llm_loadgen):
    await llm_loadgen.run()
"""


def test_baseline_regression_fails_the_test_and_faster_is_reported(
    pytester: pytest.Pytester, steady_sim: SimProcess, slow_sim: SimProcess
) -> None:
    pytester.makepyfile(BASELINE_TEST)
    fast_base, slow_base = pytester.path / "fast.json", pytester.path / "slow.json"
    sim = steady_sim
    pytester.runpytest(f"--llm-endpoint={sim.url}", f"--llm-baseline-save={fast_base}")
    pytester.runpytest(f"--llm-endpoint={slow_sim.url}", f"--llm-baseline-save={slow_base}")
    assert fast_base.is_file() and slow_base.is_file()

    # the token gaps jitter with the machine's load (a late read shortens the next gap) and
    # are the same on both servers; the test is about TTFT: they get a 100% allowance
    steady = "--llm-baseline-threshold=itl=100%,tpot=100%,10%"
    regressed = pytester.runpytest(
        f"--llm-endpoint={slow_sim.url}", f"--llm-baseline-compare={fast_base}", steady
    )
    regressed.assert_outcomes(failed=1)
    regressed.stdout.fnmatch_lines(
        [
            f"*Regressed against baseline {fast_base}*",
            "*statistic*baseline*current*change*allowed*p*verdict*",
            "*ttft.p50*run0*ms*ms*+*%*+10%*REGRESSED*",
            "*ttft.p99*run0*ms*ms*+*%*+10%*REGRESSED*",
            "*test: percentiles: one-sided exceedance test over the order statistics*",
        ]
    )
    # p99 of 120 samples a side is judged by its order statistics (issue 36: it used to be
    # inconclusive under a 1,000-sample minimum): TTFT tripled, and p99 says so too

    improved = pytester.runpytest(
        f"--llm-endpoint={sim.url}", f"--llm-baseline-compare={slow_base}", steady
    )
    improved.assert_outcomes(passed=1)
    improved.stdout.fnmatch_lines(["*↑ baseline ttft.p50 ?run0?: improved*"])

    loose = pytester.runpytest(
        f"--llm-endpoint={slow_sim.url}",
        f"--llm-baseline-compare={fast_base}",
        "--llm-baseline-threshold=ttft=500%,e2e=500%,100%",
    )
    loose.assert_outcomes(passed=1)


def test_missing_baseline_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(BASELINE_TEST)
    result = pytester.runpytest("--llm-baseline-compare=nope.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*nope.json*baseline file not found*"])


XDIST = """
import pytest

@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=30)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 5s")
async def test_part(llm_loadgen, seed):
    await llm_loadgen.run(seed=seed)
"""


def test_xdist_controller_merges_what_the_workers_measured(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(XDIST)
    pytester.makefile(".yaml", rules="targets:\n  error_rate: 1%\n")
    result = pytester.runpytest_subprocess(
        "-n",
        "2",
        "-p",
        "xdist",
        "--llm-json=r.json",
        "--llm-html=r.html",
        "--llm-baseline-save=b.json",
        "--llm-ruleset=rules.yaml",
    )
    result.assert_outcomes(passed=4)
    report = read_json(pytester.path / "r.json")
    tests = report["tests"]
    assert len(tests) == 4
    runs = [t["runs"][0] for t in tests]
    # every worker ran its own simulator: still one group, keyed by the profile
    (group,) = report["session"]["groups"]
    assert group["key"].startswith("sim:fixed ") and group["runs"] == 4
    merged = group["metrics"]["ttft"]
    assert merged["count"] == sum(r["metrics"]["ttft"]["count"] for r in runs) == 120
    assert merged["max"] == max(r["metrics"]["ttft"]["max"] for r in runs)
    assert merged["min"] == min(r["metrics"]["ttft"]["min"] for r in runs)
    assert group["counts"]["issued"] == sum(r["counts"]["issued"] for r in runs)
    assert [v["verdict"] for v in report["session"]["slos"]] == ["pass"]
    assert len(read_json(pytester.path / "b.json")["tests"]) == 4
    html = (pytester.path / "r.html").read_text()
    assert client_plots(html) == 4 * 13
    result.stdout.fnmatch_lines(["*✓ error_rate < 1%: observed 0.00%, target 1.00%, n=120*"])


def client_plots(html: str) -> int:
    """The client-side plots of a report (each run's server plots counted apart)."""
    server = sum(html.count(f'data-kind="{kind}"') for kind in ("ttft-split", "server-timeline"))
    return html.count('<svg class="plot"') - server
