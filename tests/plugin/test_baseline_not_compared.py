"""A baseline that judged nothing is not a pass; one that names the same experiment is judged.

Issue 36's case, as written: a baseline saved on the embedded simulator
(``--llm-endpoint=sim``) and compared against the same simulator started by hand
with its time to first token doubled. It used to be ``inconclusive: workload
differs`` (the tokenizer's two descriptions of one tokenizer) and a pass; now the
runs are compared, and the doubling is a regression. A run that really measured
another experiment, or a test the baseline does not have, is inconclusive, which
follows ``--llm-inconclusive`` (and the ``llm_inconclusive`` marker): it fails by
default, naming every differing field with both values. Real simulator sessions
throughout.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_llmperf.sim.process import SimProcess, start_sim_process

SUITE = """
import os
import pytest

@pytest.mark.llm_workload(
    "synthetic", input_tokens=int(os.environ.get("IN_TOKENS", "32")), output_tokens=4,
    requests=120, seed=1,
)
@pytest.mark.llm_load("concurrency", concurrency=12)
async def test_ttft(llm_loadgen):
    await llm_loadgen.run()
"""
# 12 in flight: the fixed profile's latencies do not depend on the load, so a session's 120
# requests take 10 rounds of its 35 ms, not 30 (the doubled TTFT is 20 ms a request beyond)


@pytest.fixture(scope="module")
def doubled_sim() -> Iterator[SimProcess]:
    """The issue's command: ``python -m pytest_llmperf.sim --set ttft_ms=40``."""
    with start_sim_process("fixed", overrides={"ttft_ms": 40}) as sim:
        yield sim


def _report(pytester: pytest.Pytester, name: str = "r.json") -> dict[str, Any]:
    report: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return report


def _save(pytester: pytest.Pytester, *args: str) -> None:
    pytester.makepyfile(test_suite=SUITE)
    saved = pytester.runpytest("--llm-endpoint=sim", "--llm-baseline-save=b.json", *args)
    saved.assert_outcomes(passed=1)


def test_the_embedded_simulators_baseline_judges_the_same_simulator_by_url(
    pytester: pytest.Pytester, doubled_sim: SimProcess
) -> None:
    _save(pytester)
    again = pytester.runpytest(
        f"--llm-endpoint={doubled_sim.url}", "--llm-baseline-compare=b.json", "--llm-json=r.json"
    )
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(
        ["*FAILED test_suite.py::test_ttft - Failed: Regressed against baseline b.json*"]
    )
    checks = _report(pytester)["tests"][0]["baseline"]
    assert all(c["name"] != "*.*" for c in checks), checks  # compared, not "workload differs"
    ttft = {c["name"]: c for c in checks if c["metric"] == "ttft"}
    assert ttft["ttft.p50"]["verdict"] == "regressed", ttft
    assert ttft["ttft.p50"]["change"] > 0.5 and ttft["ttft.p50"]["differs"] == []


def test_another_experiment_is_not_compared_and_fails_naming_each_field(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _save(pytester)
    monkeypatch.setenv("IN_TOKENS", "16")
    again = pytester.runpytest(
        "--llm-endpoint=sim", "--llm-baseline-compare=b.json", "--llm-json=r.json"
    )
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(
        [
            "baseline not compared in test_suite.py::test_ttft: [[]run0[]] not comparable: "
            "workload.input_tokens: [[]32, 32[]] -> [[]16, 16[]] (baseline -> now)",
            "*--llm-inconclusive=warn|skip to relax*",
            "*FAILED test_suite.py::test_ttft - Failed: baseline not compared in*",
        ]
    )
    (check,) = _report(pytester)["tests"][0]["baseline"]
    assert check["verdict"] == "inconclusive" and check["comparable"] is False
    assert check["differs"] == ["workload.input_tokens: [32, 32] -> [16, 16]"]
    assert _report(pytester)["tests"][0]["outcome"] == "failed"

    warned = pytester.runpytest(
        "--llm-endpoint=sim", "--llm-baseline-compare=b.json", "--llm-inconclusive=warn"
    )
    warned.assert_outcomes(passed=1, warnings=1)
    warned.stdout.fnmatch_lines(
        ["*LlmPerfInconclusiveWarning: baseline not compared in test_suite.py::test_ttft*"]
    )


def test_the_llm_inconclusive_marker_decides_for_its_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _save(pytester)
    monkeypatch.setenv("IN_TOKENS", "16")
    pytester.makepyfile(
        test_suite=SUITE.replace("async def", '@pytest.mark.llm_inconclusive("skip")\nasync def')
    )
    skipped = pytester.runpytest("--llm-endpoint=sim", "--llm-baseline-compare=b.json", "-rs")
    skipped.assert_outcomes(skipped=1)
    skipped.stdout.fnmatch_lines(["*baseline not compared*workload.input_tokens*"])


def test_a_test_missing_from_the_baseline_fails_by_default_and_passes_with_warn(
    pytester: pytest.Pytester,
) -> None:
    _save(pytester)
    pytester.makepyfile(test_new=SUITE.replace("test_ttft", "test_new"))
    missing = pytester.runpytest(
        "test_new.py", "--llm-endpoint=sim", "--llm-baseline-compare=b.json"
    )
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(
        [
            "baseline not compared in test_new.py::test_new: [[]run0[]] no baseline for "
            "test_new.py::test_new [[]run0[]] in b.json",
            "*FAILED test_new.py::test_new - Failed: baseline not compared in*",
        ]
    )
    warned = pytester.runpytest(
        "test_new.py",
        "--llm-endpoint=sim",
        "--llm-baseline-compare=b.json",
        "--llm-inconclusive=warn",
    )
    warned.assert_outcomes(passed=1, warnings=1)
    warned.stdout.fnmatch_lines(["*LlmPerfInconclusiveWarning: baseline not compared*"])
