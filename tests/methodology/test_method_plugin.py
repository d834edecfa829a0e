"""The methodology through the plugin: one fixture call, ungated probes, tables in the JSON."""

from __future__ import annotations

import json

import pytest

SUITE = """
import pytest
from pytest_llmperf.analysis import collect, ttft_by_input_length

@pytest.mark.llm_workload(
    "synthetic-skewed",
    input_tokens={"cap": 300},
    output_tokens={"floor": 4, "cap": 8},
    requests=20,
)
@pytest.mark.llm_load("constant", rate=50)
@pytest.mark.llm_slo("ttft.p50 < 5s")
async def test_methodology(llm_loadgen):
    curve = await llm_loadgen.sweep(rates=[20, 40])
    assert len(curve.points) == 2
    with collect(llm_loadgen) as requests:
        await llm_loadgen.run()
    llm_loadgen.attach(ttft_by_input_length(requests.rows))
"""


def test_sweep_and_analysis_reach_the_json_report(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("--llm-json=report.json")
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "report.json").read_text())
    (test,) = report["tests"]
    runs = test["runs"]
    assert [r["gated"] for r in runs] == [False, False, True]
    assert runs[0]["label"] == "sweep rate=20"
    assert runs[2]["workload"]["name"] == "synthetic-skewed"
    assert runs[2]["workload"]["seed"] == 0 and "tokenizer" in runs[2]["workload"]
    kinds = [a["kind"] for a in test["analyses"]]
    assert kinds == ["curve", "table"]
    by_length = test["analyses"][1]
    assert sum(row[1] for row in by_length["rows"]) == 20
    assert [s["run"] for s in test["slos"]] == [runs[2]["label"]]
