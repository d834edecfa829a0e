"""Draft "Warm-up Procedures": warm up, then verify that probe latency has settled.

Probe latency before warm-up, a warm-up run with the test's workload, then
fixed-size probe requests one at a time until consecutive probes agree
within 10%. All of it is reported (ungated); the measured run comes after.
"""

import pytest


@pytest.mark.llm_workload(
    "synthetic-uniform", input_tokens=(128, 256), output_tokens=(32, 64), requests=40
)
@pytest.mark.llm_load("constant", rate=30)
@pytest.mark.llm_slo("ttft.p50 < 100ms", "error_rate < 1%")
async def test_warm_then_measure(llm_loadgen):
    report = await llm_loadgen.warm_up(requests=16, probes=5)
    assert report.stable, f"probe latency did not settle: {report.probes_ms}"
    await llm_loadgen.run()
