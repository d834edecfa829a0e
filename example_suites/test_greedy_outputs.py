"""The outputs themselves: greedy decoding makes them a fingerprint of the numerics.

``greedy=True`` sends temperature 0, top_p 1 and a fixed seed, and keeps each sample's
output as a digest. ``output_consistency`` sends the run's prompts once more alone, after
the loaded run, and is the share of outputs that agree (batch invariance); with a
baseline (``--llm-baseline-compare``), history or reference endpoint, ``output_match`` is
the share equal to the other side's for the same prompt, and the report names the token
position where each mismatch parts (docs/greedy-outputs.md).
"""

import pytest


# The alone pass sends each sample once more, one at a time: 12 samples keep it short.
@pytest.mark.llm_workload(
    "synthetic", input_tokens=(32, 128), output_tokens=24, requests=12, greedy=True
)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("output_consistency >= 100%", "error_rate < 1%")
async def test_outputs_under_load_equal_outputs_alone(llm_loadgen):
    await llm_loadgen.run()
