"""A reasoning model: time to first token vs time to first output.

A reasoning model streams its thinking (``reasoning_content`` deltas) before
the answer. ``ttft`` is when the server started generating, reasoning
included; ``ttfo`` is when the user sees the first answer text (or tool
call). Gate on both: a pull request that makes the model think longer moves
``ttfo`` and leaves ``ttft`` alone. On a model that does not reason the two
are equal. This test measures the simulator's reasoning profile (the
``llm_endpoint`` marker chooses a test's own endpoint; ``--llm-endpoint=URL``
on the command line measures that server instead).
"""

import pytest


@pytest.mark.llm_endpoint("sim:strict-reasoning")
@pytest.mark.llm_workload("synthetic", input_tokens=(64, 256), output_tokens=64, requests=60)
@pytest.mark.llm_load("poisson", rate=40)
@pytest.mark.llm_slo("ttft.p90 < 250ms", "ttfo.p90 < 1.5s", "error_rate < 1%")
async def test_time_to_first_output(llm_loadgen):
    result = await llm_loadgen.run()
    # Every generated token is one streamed event (empty deltas included), so there is one
    # inter-token gap per token after the first, as the server's usage counts them.
    assert result.token_lengths["output_events_mean"] <= result.token_lengths["output_server_mean"]
