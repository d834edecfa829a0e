"""Draft test "Inter-Token Latency Distribution": pooled ITL, per-request jitter, pauses.

Every request generates >= 50 tokens (ignore_eos with max_tokens); 60
requests give >= 3000 ITL samples. The table holds ITL percentiles, mean and
standard deviation, P50/P95/P99 of per-request jitter and maximum pause,
and the P99/P50 tail ratio.
"""

import pytest

from pytest_llmperf.analysis import collect, itl_distribution


@pytest.mark.llm_workload(
    "synthetic-uniform", input_tokens=(128, 256), output_tokens=(50, 80), requests=60
)
@pytest.mark.llm_load("constant", rate=30)
@pytest.mark.llm_slo("itl.p50 < 20ms", "tpot.p90 < 30ms")
async def test_itl_distribution(llm_loadgen):
    with collect(llm_loadgen) as requests:
        result = await llm_loadgen.run()
    table = itl_distribution(requests.rows, result)
    llm_loadgen.attach(table)
    assert table["samples"] >= 60 * 49  # one gap per token after the first
    assert table["p99_p50_ratio"] >= 1.0
