"""Draft test "Memory Pressure Behavior": completion and preemption under oversubscription.

The tiny profile's KV cache holds 2048 tokens; requests of ~400 input and
~125 output tokens fit about 3 at a time. Closed loop at 100%, 200% and 400%
of a capacity of 3; preemptions are read
from the server's Prometheus ``vllm:num_preemptions_total`` before and after
each level. The draft's "fraction preempted" is reported as preemption
events per request (an upper bound: a request can be preempted twice).
"""

import pytest

from pytest_llmperf.analysis import memory_pressure


@pytest.mark.llm_workload(
    "synthetic", input_tokens=(300, 500), output_tokens=(100, 150), requests=12
)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_memory_pressure(llm_loadgen):
    levels = await memory_pressure(llm_loadgen, capacity=3, levels=(1.0, 2.0, 4.0))
    if levels[0].counters is None:
        pytest.skip("the endpoint exposes no Prometheus /metrics: preemptions unknown")
    assert levels[0].preemptions == 0  # within capacity: nothing is preempted
    assert levels[-1].preemptions > 0
    assert all(level.result.counts["failed"] == 0 for level in levels)
    await llm_loadgen.run()  # the gated run: the capacity level itself must not fail requests
