"""Every API a model server exposes, gated like chat: Responses, Anthropic Messages,
embeddings, and images in the prompt.

``@pytest.mark.llm_endpoint(api=...)`` drives the session's endpoint through another
API for one test (``--llm-api`` sets it for the whole session). Token-stream metrics
mean the same on every streaming API (docs/measurement.md, "Token events"); an
embeddings answer streams no tokens, so its tests judge ``e2e`` and throughputs (a
``ttft`` SLO there is a usage error at collection).
"""

import pytest


@pytest.mark.llm_endpoint(api="responses")
@pytest.mark.llm_workload("synthetic", input_tokens=(64, 256), output_tokens=64, requests=60)
@pytest.mark.llm_load("poisson", rate=40)
@pytest.mark.llm_slo("ttft.p90 < 250ms", "itl.p90 < 30ms", "error_rate < 1%")
async def test_responses_api_latency(llm_loadgen):
    result = await llm_loadgen.run()
    # output tokens from response.completed's usage: what was asked, every request
    assert result.token_lengths["output_server_mean"] == 64


@pytest.mark.llm_endpoint(api="messages")
@pytest.mark.llm_workload("synthetic", input_tokens=(64, 256), output_tokens=64, requests=64)
@pytest.mark.llm_load("concurrency", concurrency=16)
@pytest.mark.llm_slo("ttft.p90 < 250ms", "tpot.p90 < 30ms", "error_rate < 1%")
async def test_anthropic_messages_api_latency(llm_loadgen):
    await llm_loadgen.run()


@pytest.mark.llm_endpoint(api="embeddings")
@pytest.mark.llm_workload("synthetic", input_tokens=128, inputs_per_request=8, requests=50)
@pytest.mark.llm_load("poisson", rate=25)
@pytest.mark.llm_slo("e2e.p90 < 250ms", "input_throughput > 10000 tok/s", "error_rate < 1%")
async def test_embeddings_latency_and_throughput(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.accumulator.embedding_inputs == 8 * result.counts["completed"]


@pytest.mark.llm_workload(
    "synthetic",
    input_tokens=128,
    output_tokens=32,
    requests=50,
    images=2,
    image_size=(256, 256),
    image_format="jpeg",
)
@pytest.mark.llm_load("poisson", rate=25)  # the client draws and encodes 50 images a second
@pytest.mark.llm_slo("ttft.p90 < 500ms", "error_rate < 1%")
async def test_chat_with_two_images_per_prompt(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.accumulator.images == 2 * result.counts["issued"]
