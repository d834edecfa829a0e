"""A closed loop: a fixed number of users, each sending again when answered.

Closed-loop latency is counted from the actual send; the throughput the
server reaches at that concurrency is a result, not an input.
"""

import pytest


@pytest.mark.llm_workload("synthetic-uniform", output_tokens=(16, 64), requests=64, seed=7)
@pytest.mark.llm_load("concurrency", concurrency=16)
@pytest.mark.llm_slo("tpot.p90 < 30ms", "e2e.p90 < 5s", "error_rate < 1%")
async def test_sixteen_concurrent_users(llm_loadgen):
    result = await llm_loadgen.run()
    ttft = result.metrics["ttft"]
    # LatencyHistogram: p(), mean, max in milliseconds; count of successful requests
    assert ttft.count == result.counts["completed"] == result.counts["issued"]
    assert ttft.p(50) <= ttft.p(90) <= ttft.max
    assert result.metrics["request_throughput"] > 1.0
