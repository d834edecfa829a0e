"""Issue 27, stopping when decided (simulator): a run far from its target with
``until="decided"`` ends after a small share of its declared 2,000 requests, says why,
and drains what it issued; a run gating an SLO with no always-valid verdict (a mean)
runs to its declared size; ``--llm-until-decided`` does it for every test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_llmperf.sim import SimProcess, start_sim_process

SUITE = """
import pytest

@pytest.mark.llm_slo("{slo}")
@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=2, requests={requests})
@pytest.mark.llm_load("poisson", rate=400{until})
async def test_run(llm_loadgen):
    await llm_loadgen.run()
"""


def run(
    pytester: pytest.Pytester, tmp_path: Path, *args: str, passed: int = 1, **fmt: object
) -> dict:
    pytester.makepyfile(test_run=SUITE.format(**fmt))
    report = tmp_path / "r.json"
    result = pytester.runpytest("--llm-endpoint=sim:fixed", f"--llm-json={report}", *args)
    result.assert_outcomes(passed=passed, failed=1 - passed)
    test: dict = json.loads(report.read_text())["tests"][0]
    for got in test["runs"]:  # the terminal says when a run stopped early, and why
        said = f"{got['label']}: stopped early: {got.get('stop_detail')}"
        assert (said in result.stdout.str()) == (got["stop_reason"] == "decided"), said
    return test


def test_a_run_far_from_its_target_stops_once_decided(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    test = run(pytester, tmp_path, slo="ttft.p90 < 200ms", requests=2000, until=', until="decided"')
    got = test["runs"][0]
    assert got["stop_reason"] == "decided"
    assert "every SLO decided after" in got["stop_detail"]
    assert got["load"]["until"] == "decided"
    counts = got["counts"]
    assert 20 <= counts["issued"] <= 1000, counts  # a share of 2,000 (looks every 0.25 s)
    assert counts["completed"] == counts["issued"]  # drained
    (slo,) = test["slos"]
    assert slo["verdict"] == "pass" and slo["samples"] == counts["completed"]


def test_an_slo_without_an_always_valid_verdict_runs_to_the_end(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    test = run(pytester, tmp_path, "--llm-until-decided", slo="ttft.mean < 200ms",
               requests=300, until="")  # fmt: skip
    got = test["runs"][0]
    assert got["stop_reason"] == "completed" and got["counts"]["issued"] == 300
    assert got["load"]["until"] == "decided"


def test_the_session_option_stops_every_gated_run(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    test = run(pytester, tmp_path, "--llm-until-decided", passed=0, slo="ttft.p50 < 5ms",
               requests=2000, until="")  # fmt: skip
    got = test["runs"][0]
    assert got["stop_reason"] == "decided" and got["counts"]["issued"] < 400
    assert test["slos"][0]["verdict"] == "fail"


@pytest.fixture
def half_stalled() -> Iterator[SimProcess]:
    """A server whose every other request (seeded) waits 300 ms before its first token:
    TTFT is about 20 ms or about 320 ms, each half the time, so the true p50 is anywhere
    between, and a p50 target there is as near its percentile as a target gets."""
    process = start_sim_process("fixed", overrides={"stall_first_prob": 0.5, "stall_first_ms": 300})
    try:
        yield process
    finally:
        process.stop()


def test_a_run_near_its_target_runs_to_the_end(
    pytester: pytest.Pytester, tmp_path: Path, half_stalled: SimProcess
) -> None:
    test = run(pytester, tmp_path, f"--llm-endpoint={half_stalled.url}", "--llm-inconclusive=warn",
               slo="ttft.p50 < 150ms", requests=2000, until=', until="decided"')  # fmt: skip
    got = test["runs"][0]
    assert got["stop_reason"] == "completed", got.get("stop_detail")
    assert got["counts"]["issued"] == 2000
    (slo,) = test["slos"]
    # 2,000 samples split about evenly either side of the target decide nothing
    assert slo["verdict"] == "inconclusive", slo


def test_a_stop_waits_for_the_rulesets_minimum_samples(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("min_samples: 600\ntargets:\n  ttft: {p90: 200ms}\n")
    test = run(pytester, tmp_path, slo=f'ttft.p90 < 300ms", ruleset="{rules}', requests=2000,
               until=', until="decided"')  # fmt: skip
    got = test["runs"][0]
    assert got["stop_reason"] == "decided", got
    assert 600 <= got["counts"]["completed"] < 2000, got["counts"]
    assert all(slo["verdict"] == "pass" for slo in test["slos"]), test["slos"]
