"""Chat latency under open-loop Poisson load.

Requests arrive at a planned average rate whether or not earlier ones have
finished (as real users do), and every latency is counted from the planned
send time, so server queueing shows up in TTFT instead of being hidden.
"""

import pytest


# 80 requests: a p90 is decided from 44 samples when every one is well under the target
# (example_suites/README.md); the draft's uniform input lengths, shorter outputs
@pytest.mark.llm_workload("synthetic-uniform", output_tokens=(32, 128), requests=80, seed=42)
@pytest.mark.llm_load("poisson", rate=40)
@pytest.mark.llm_slo("ttft.p90 < 250ms", "tpot.p90 < 30ms", "error_rate < 1%")
async def test_chat_latency_at_40_rps(llm_loadgen):
    result = await llm_loadgen.run()
    # Ordinary assertions sit beside the SLOs: here, every request was answered.
    assert result.counts["completed"] == result.counts["issued"]


@pytest.mark.llm_workload("synthetic", input_tokens=(64, 128), output_tokens=32, requests=60)
@pytest.mark.llm_load("constant", rate=40)
@pytest.mark.llm_slo("ttft.p50 < 100ms", "e2e.p90 < 1s", "goodput >= 95%")
async def test_short_prompts_at_a_constant_rate(llm_loadgen):
    # goodput = share of requests that met every per-request limit above (TTFT, E2E)
    await llm_loadgen.run()
