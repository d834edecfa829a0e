"""Energy per output token and GPU memory as SLOs, beside latency.

A kernel, quantisation or batching change can leave latency alone and change the
joules each token costs or the memory the server holds. ``energy_per_output_token_j``
is the GPUs' energy over the run (their energy counters' differences, summed over the
GPUs) divided by the output tokens the server counted over it; ``gpu.memory_used_mb.max``
the most memory any one GPU used; ``gpu.power_w.mean`` the GPUs' draw together
(docs/gpu.md)::

    pytest example_suites/gpu --llm-summary=full

prints one ``gpu [run]:`` line per run (GPUs, power, energy, J/token, memory) and each
SLO's verdict; the JSON report has every GPU's own figures under ``runs[].gpu``.
Batching is what makes a token cheap: the second test runs the same requests one at a
time and asks that they cost more per token than at concurrency 8.
"""

import pytest

WORKLOAD = pytest.mark.llm_workload(
    "synthetic", input_tokens=128, output_tokens=32, requests=48, seed=11
)


@WORKLOAD
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo(
    "energy_per_output_token_j < 2J",  # two H100s' draw over ~8 sequences' tokens
    "gpu.memory_used_mb.max < 75GB",  # per GPU: weights, runtime and the KV cache in use
    "gpu.power_w.mean < 1.4kW",  # both GPUs together, under their 2 x 700 W limit
    "error_rate < 1%",
)
async def test_energy_per_token_and_memory(llm_loadgen):
    result = await llm_loadgen.run()
    gpu = result.gpu
    assert gpu is not None and len(gpu.devices) == 2  # the page's two GPUs, each its own
    assert all(d.energy_from == "counter" for d in gpu.devices)  # DCGM's mJ counter


@WORKLOAD
@pytest.mark.llm_load("concurrency", concurrency=8)
async def test_batching_makes_a_token_cheaper(llm_loadgen):
    batched = await llm_loadgen.run(label="batched")
    alone = await llm_loadgen.run(concurrency=1, requests=6, label="alone")
    assert batched.gpu is not None and alone.gpu is not None
    assert alone.gpu.energy_per_output_token_j > 2 * batched.gpu.energy_per_output_token_j
