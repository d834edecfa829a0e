"""Tool calls: requests offer functions, the model calls one, and every call's arguments
are checked against that function's parameters.

``tools="sample"`` is a built-in set of three small functions; ``tool_choice`` names the
one to call (``"required"``: any of them, ``"auto"``: the model may answer in text).
Argument deltas are token events, as text is; ``valid_rate`` is the share of completed
requests whose calls parsed and met their schemas (docs/tool-calls.md).
"""

import pytest


@pytest.mark.llm_workload(
    "synthetic",
    input_tokens=(64, 256),
    output_tokens=96,
    requests=60,
    tools="sample",
    tool_choice="get_weather",
)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("valid_rate >= 100%", "ttft.p90 < 300ms", "error_rate < 1%")
async def test_named_tool_calls_are_valid(llm_loadgen):
    await llm_loadgen.run()


@pytest.mark.llm_workload(
    "synthetic",
    input_tokens=128,
    output_tokens=96,
    requests=60,
    tools="sample",
    tool_choice="auto",
)
@pytest.mark.llm_load("poisson", rate=40)
@pytest.mark.llm_slo("valid_rate >= 99%", "ttfo.p90 < 300ms")
async def test_auto_tool_choice(llm_loadgen):
    await llm_loadgen.run()
