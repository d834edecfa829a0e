"""Throughput floors: what the server must sustain, measured at saturation."""

import pytest


@pytest.mark.llm_workload("synthetic", input_tokens=256, output_tokens=64, requests=128)
@pytest.mark.llm_load("max-throughput", concurrency=64)
@pytest.mark.llm_slo(
    "output_throughput > 1500 tok/s", "request_throughput > 20 req/s", "error_rate < 1%"
)
async def test_output_throughput_floor(llm_loadgen):
    await llm_loadgen.run()


@pytest.mark.llm_workload("synthetic", input_tokens=128, output_tokens=16, requests=24)
@pytest.mark.llm_load("concurrency", concurrency=1)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_throughput_grows_with_concurrency(llm_loadgen):
    # Several runs in one test: each is reported, and each is judged on the SLOs.
    throughput = []
    for concurrency in (2, 8, 32):
        result = await llm_loadgen.run(concurrency=concurrency)
        throughput.append(result.metrics["output_throughput"])
    assert throughput[0] < throughput[1] < throughput[2], throughput
