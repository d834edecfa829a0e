"""Draft test "Long Context Scaling": TTFT against context length, with a fitted exponent.

The long-context workload (document + ~100-token question) at each target
length in ascending order, low closed-loop concurrency, fixed output. The
curve shows TTFT mean/P95 per length; the title gives the fitted exponent
k (TTFT ~ length^k) with its R², and the cost per input token of a linear fit.
The tiny profile's context window is 2048 tokens; a real server would use the
draft's 8K-128K lengths.
"""

import pytest

from pytest_llmperf.analysis import collect, context_scaling

LENGTHS = [256, 512, 1024, 1536, 2000]


@pytest.mark.llm_workload("long-context", context_tokens=LENGTHS, output_tokens=16, requests=8)
@pytest.mark.llm_load("concurrency", concurrency=1)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_long_context_scaling(llm_loadgen):
    with collect(llm_loadgen) as requests:
        for length in LENGTHS:
            await llm_loadgen.run(workload_params={"context_tokens": length})
    table = context_scaling(requests.rows)
    llm_loadgen.attach(table)
    assert 0.3 < table["exponent"] < 2.5
    assert table["linear_r_squared"] > 0.8
