"""``ttft.p75 < 2s`` end to end (issue 16): accepted, judged, and in every report.

Real pytest sessions (pytester) against the embedded simulator's ``fixed``
profile (TTFT about 20 ms): a p75 target that holds passes, one that does not
fails with p75 in the failure table, a run too small for p75 is
inconclusive; the JSON report carries ``"p75"`` beside the standard
percentiles (per run and per stage) with the value the test itself read from
``result.metrics["ttft"].p(75)``, JUnit the verdict and observed value, and
the HTML report a p75 column.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

SUITE = """
import json
import pytest

{fast}@pytest.mark.llm_slo("ttft.p75 < 2s", "tpot.p80 < 2s", "error_rate < 1%")
async def test_p75(llm_loadgen):
    result = await llm_loadgen.run()
    ttft = result.metrics["ttft"]
    assert ttft.p(75) == ttft.stat("p75") and ttft.p(50) <= ttft.p(75) <= ttft.p(90)
    with open("seen.json", "w") as f:
        json.dump({{"ttft_p75": ttft.p(75), "tpot_p80": result.metrics["tpot"].stat("p80")}}, f)

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, seed=4)
@pytest.mark.llm_load("constant", stages=[{{"rate": 40, "duration": 1.5, "slo": "e2e.p75 < 5s"}}])
async def test_staged(llm_loadgen):
    await llm_loadgen.run()
"""

ONE_TEST = """
import pytest

{fast}@pytest.mark.llm_slo({slos})
async def test_one(llm_loadgen):
    await llm_loadgen.run()
"""


@pytest.fixture(scope="module")
def passing_session(
    tmp_path_factory: pytest.TempPathFactory, fast: str
) -> tuple[pytest.RunResult, SessionDir]:
    """One real session (a pytest subprocess) whose outputs the four tests below read:
    run once for the module, since each test only reads a different report of it."""
    path = tmp_path_factory.mktemp("p75_session")
    (path / "test_suite.py").write_text(SUITE.format(fast=fast.format(n=60)))
    (path / "rules.yaml").write_text("targets:\n  ttft: {p60: 2s}\n")  # session-wide
    (path / "pytest.ini").write_text("[pytest]\n")  # this folder is the rootdir
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--llm-json=r.json",
            "--llm-html=r.html",
            "--junitxml=j.xml",
            "--llm-ruleset=rules.yaml",
        ],
        cwd=path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    result = pytest.RunResult(
        done.returncode,
        done.stdout.splitlines(),
        done.stderr.splitlines(),
        time.monotonic() - start,
    )
    return result, SessionDir(path)


@dataclass(frozen=True)
class SessionDir:
    """Where the module's session ran (what the tests read as ``pytester.path``)."""

    path: Path


def test_a_p75_target_that_holds_passes(
    passing_session: tuple[pytest.RunResult, SessionDir],
) -> None:
    result, _ = passing_session
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*✓ ttft.p75 < 2s*observed*ms*", "*✓ tpot.p80 < 2s*observed*"])


def test_the_json_report_carries_requested_percentiles_beside_the_standard_ones(
    passing_session: tuple[pytest.RunResult, SessionDir],
) -> None:
    result, pytester = passing_session
    result.assert_outcomes(passed=2)
    report = json.loads((pytester.path / "r.json").read_text())
    tests = {t["nodeid"].split("::")[-1]: t for t in report["tests"]}
    (run,) = tests["test_p75"]["runs"]
    ttft, tpot = run["metrics"]["ttft"], run["metrics"]["tpot"]
    assert list(ttft)[:6] == ["p50", "p90", "p95", "p99", "p99.9", "p75"]
    assert ttft["p50"] <= ttft["p75"] <= ttft["p90"] and ttft["p75"] >= 20  # the fixed TTFT
    assert "p80" in tpot and "p75" not in tpot and "p75" not in run["metrics"]["e2e"]
    seen = json.loads((pytester.path / "seen.json").read_text())
    assert ttft["p75"] == round(seen["ttft_p75"], 4) and tpot["p80"] == round(seen["tpot_p80"], 4)
    verdict = next(v for v in tests["test_p75"]["slos"] if v["expr"] == "ttft.p75 < 2s")
    assert verdict["verdict"] == "pass" and verdict["observed"] == ttft["p75"]
    assert verdict["samples"] == 60
    (staged,) = tests["test_staged"]["runs"]
    (stage,) = staged["stages"]
    assert stage["metrics"]["e2e"]["p50"] <= stage["metrics"]["e2e"]["p75"]
    (stage_verdict,) = tests["test_staged"]["slos"]
    assert stage_verdict["stage"] == 0 and stage_verdict["verdict"] == "pass"
    assert stage_verdict["observed"] == stage["metrics"]["e2e"]["p75"]
    # the session ruleset's p60, judged on the merged runs and shown in the merged metrics
    (merged,) = report["session"]["merged"].values()
    (session_verdict,) = report["session"]["slos"]
    assert session_verdict["expr"] == "ttft.p60 < 2s" and session_verdict["verdict"] == "pass"
    assert session_verdict["observed"] == merged["metrics"]["ttft"]["p60"]
    assert "p75" not in merged["metrics"]["ttft"]  # a test's own statistic stays with its runs


def test_junit_carries_the_p75_verdict_and_observed_value(
    passing_session: tuple[pytest.RunResult, SessionDir],
) -> None:
    _, pytester = passing_session
    root = ET.parse(pytester.path / "j.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    name = "test_suite.py::test_p75::llm_slo[ttft.p75 < 2s][run0]"
    observed = json.loads((pytester.path / "r.json").read_text())["tests"][0]["runs"][0]
    assert props[f"{name}.verdict"] == "pass" and props[f"{name}.samples"] == "60"
    value = props[f"{name}.observed"]
    assert value.endswith(" ms")
    assert float(value.split()[0]) == pytest.approx(observed["metrics"]["ttft"]["p75"], rel=1e-2)
    assert props[f"{name}.target"] == "2000.0 ms"


def test_the_html_report_shows_a_p75_column(
    passing_session: tuple[pytest.RunResult, SessionDir],
) -> None:
    _, pytester = passing_session
    html = (pytester.path / "r.html").read_text()
    header = re.search(r"<tr><th>metric \(ms\)</th>(.*?)</tr>", html)
    assert header is not None
    columns = re.findall(r"<th>(.*?)</th>", header.group(1))
    # ttft's p75 and tpot's p80 (each empty in the other's row), among the standard ones
    assert columns[:7] == ["p50", "p75", "p80", "p90", "p95", "p99", "p99.9"]
    assert columns[7:] == ["mean", "min", "max", "count"]
    assert "ttft.p75 &lt; 2s" in html


def test_a_violated_p75_target_fails_with_p75_in_the_table(
    pytester: pytest.Pytester, fast: str
) -> None:
    slos = '"ttft.p75 < 5ms", "ttft.p50 < 2s"'
    pytester.makepyfile(ONE_TEST.format(fast=fast.format(n=60), slos=slos))
    result = pytester.runpytest("-p", "no:cacheprovider")
    out = result.stdout.str()
    assert (
        result.ret == pytest.ExitCode.TESTS_FAILED
        and "SLO violated: ttft.p75 < 5ms, observed" in out
    ), out
    # the failure table's p75 row: observed, its 99% interval, target, verdict
    row = re.search(
        r"^ttft\.p75 < 5ms +run0 +([\d.]+) ms +\[([\d.]+) ms, [\d.]+ ms\] at 99%"
        r" +< 5\.0+ ms +✗ FAIL$",
        out,
        re.M,
    )
    assert row is not None, out
    assert float(row[1]) >= 20  # the fixed profile's TTFT: p75 was judged, not a stand-in
    assert float(row[2]) >= 5  # the lower bound is over the target: a fail at 99%
    assert re.search(r"^ttft\.p50 < 2s +run0 .*✓ PASS$", out, re.M), out


def test_a_run_too_small_for_p99_is_inconclusive(pytester: pytest.Pytester, fast: str) -> None:
    """30 samples all under 2 s decide p75 (0.75**30 < 1%) but not p99 (0.99**30 > 1%)."""
    slos = '"ttft.p99 < 2s", "ttft.p75 < 2s"'
    pytester.makepyfile(ONE_TEST.format(fast=fast.format(n=30), slos=slos))
    result = pytester.runpytest("-p", "no:cacheprovider", "--llm-json=r.json")
    report = json.loads((pytester.path / "r.json").read_text())
    verdicts = {v["expr"]: v for v in report["tests"][0]["slos"]}
    assert verdicts["ttft.p75 < 2s"]["verdict"] == "pass"
    small = verdicts["ttft.p99 < 2s"]
    assert small["verdict"] == "inconclusive" and small["observed"] is not None
    assert small["interval"][1] is None and small["confidence"] == 0.99
    assert small["reason"].endswith(
        "about 459 samples would decide it (if the distribution stays as observed), run has 30"
    )
    result.assert_outcomes(failed=1)  # --llm-inconclusive=fail, the default
