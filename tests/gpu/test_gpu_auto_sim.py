"""``--llm-server-metrics=auto`` (the default) against the simulator reads the GPU page the
simulator lists beside its own ``/metrics`` (a profile with ``gpus:``), and reports one
server with its GPUs: ``runs[].gpu``, no ``runs[].fleet``; a profile without GPUs is read
as one page, as before. (A real server is never asked for a listing under ``auto``: only
a page of the simulator's family is, server_metrics/fleet_source.py.)"""

from __future__ import annotations

import json

import pytest

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=32, output_tokens=8, requests=8, seed=3)
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_run(llm_loadgen):
    await llm_loadgen.run()
"""


@pytest.mark.parametrize("profile", ["sim:gpu-2", "sim:fixed"])
def test_auto_reads_the_simulators_gpu_page(pytester: pytest.Pytester, profile: str) -> None:
    pytester.makepyfile(test_auto_gpu_suite=SUITE)
    result = pytester.runpytest(f"--llm-endpoint={profile}", "--llm-gpu=off", "--llm-json=o.json")
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "o.json").read_text())
    run = report["tests"][0]["runs"][0]
    assert "fleet" not in run  # one server, not a fleet
    assert run["server_metrics"]["family"] == "sim"
    if profile == "sim:gpu-2":
        assert "and its GPU pages: gpu dcgm (dcgm)" in json.dumps(report)  # the source's words
        assert [d["source"] for d in run["gpu"]["devices"]] == ["dcgm", "dcgm"]
        assert run["gpu"]["energy_per_output_token_j"] > 0
    else:
        assert "gpu" not in run
