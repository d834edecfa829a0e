"""LoRA adapters behind one base model: requests spread over adapters by weight, results
and verdicts per adapter.

``adapters={"sim-lora-1": 1 / 3, "sim-lora-2": 1 / 3}`` sends a third of the requests to
each adapter (its name as the request's ``model``) and the rest to the base model, drawn from
the workload's seed. ``runs[].by_model`` breaks the run down per model, and
``llm_slo(..., per_model=True)`` judges those SLOs on each model as well as on the whole
run (docs/adapters.md). The simulator charges an adapter's decode overhead and its load
time when it is swapped into one of its ``max_loras`` slots.
"""

import pytest


@pytest.mark.llm_workload(
    "synthetic",
    input_tokens=(64, 256),
    output_tokens=32,
    requests=180,  # about 60 a model: each model's p90 needs its own 44 samples
    adapters={"sim-lora-1": 1 / 3, "sim-lora-2": 1 / 3},
)
@pytest.mark.llm_load("poisson", rate=60)
@pytest.mark.llm_slo("ttft.p90 < 400ms", "tpot.p90 < 40ms", per_model=True)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_every_adapter_meets_its_slos(llm_loadgen):
    result = await llm_loadgen.run()
    by_model = result.by_model
    assert set(by_model) == {"sim-lora-1", "sim-lora-2", result.endpoint["model"]}
