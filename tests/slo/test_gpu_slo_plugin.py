"""GPU SLOs through the plugin against the embedded simulator with ``--llm-gpu=off``: the
marker's and a ruleset's GPU targets are parsed at collection, judged inconclusive saying
no GPU was read (the test follows --llm-inconclusive), and a bad one is a usage error
naming the SLO and the GPU names."""

from __future__ import annotations

import json

import pytest

SUITE = """
import pytest


@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=8, seed=3)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("energy_per_output_token_j < 0.5J", "ttft.max < 60s")
async def test_energy(llm_loadgen):
    await llm_loadgen.run()
"""


def test_a_gpu_slo_without_a_gpu_read_is_inconclusive_saying_why(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_gpu_energy_gate=SUITE)
    result = pytester.runpytest("--llm-gpu=off", "--llm-json=out.json")
    result.assert_outcomes(failed=1)  # --llm-inconclusive=fail, the default
    report = json.loads((pytester.path / "out.json").read_text())
    verdicts = {v["expr"]: v for v in report["tests"][0]["slos"]}
    energy = verdicts["energy_per_output_token_j < 0.5J"]
    assert (energy["verdict"], energy["observed"], energy["unit"]) == ("inconclusive", None, "J")
    assert "no GPU read for this run (--llm-gpu=off" in energy["reason"]
    assert verdicts["ttft.max < 60s"]["verdict"] == "pass"
    assert "gpu" not in report["tests"][0]["runs"][0]
    result.stdout.fnmatch_lines(["*energy_per_output_token_j < 0.5J*no GPU read*"])


def test_a_bad_gpu_slo_is_a_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_gpu_energy_gate=SUITE.replace("< 0.5J", "< 0.5W"))
    result = pytester.runpytest("--llm-gpu=off")
    assert result.ret != 0
    result.stderr.fnmatch_lines(
        [
            "*test_gpu_energy_gate.py::test_energy: "
            "SLO 'energy_per_output_token_j < 0.5W': bad unit 'W'*"
        ]
    )
