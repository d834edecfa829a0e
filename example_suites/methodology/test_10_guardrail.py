"""Draft test "Guardrail Overhead": the same conversation workload with and without filters.

The "guardrail" configuration is a simulator with extra per-request
latency before the request is queued (an input filter: ``alpha0_us`` plus
``alpha1_us`` per prompt token) and per output token (an output filter:
``alpha2_us``). Three interleaved repetitions each; reported: TTFT and E2E
per configuration with confidence intervals, their overhead over the
baseline with its significance, and the throughput reduction.
"""

import pytest

from pytest_llmperf.analysis import guardrail_overhead
from pytest_llmperf.methodology import run_configurations


@pytest.mark.llm_workload("conversation", max_output_tokens=48, requests=16, seed=3)
@pytest.mark.llm_load("poisson", rate=40)
async def test_guardrail_overhead(llm_loadgen, sim_url):
    runs = await run_configurations(
        llm_loadgen,
        {
            "baseline": sim_url("tiny"),
            "input filter": sim_url("tiny", alpha0_us=15000, alpha1_us=20),
            "full filter": sim_url("tiny", alpha0_us=15000, alpha1_us=20, alpha2_us=1000),
        },
        repetitions=3,
    )
    table = guardrail_overhead(runs, baseline="baseline")
    llm_loadgen.attach(table)
    overhead = table["overhead"]
    assert overhead["input filter"]["ttft_p50_ms"] > 10
    assert table["differences"]["ttft.p50"]["input filter"]["significant"]
    assert overhead["full filter"]["e2e_p50_ms"] > 10
