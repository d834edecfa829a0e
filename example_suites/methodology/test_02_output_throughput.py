"""Draft test "Output Token Throughput": maximum sustainable rate under latency SLOs.

Binary search over Poisson rates (probes are reported, not gated); the rate
found is then run once more as a gated run, so this test's SLOs are judged
at the maximum sustainable load and the report shows the throughput there. Each probe
sends 24 requests: its p50s are decided from a few; for p99 SLOs raise ``requests``.
"""

import pytest


@pytest.mark.llm_workload(
    "synthetic-uniform", input_tokens=(64, 256), output_tokens=(64, 128), requests=24
)
@pytest.mark.llm_load("poisson", rate=10)
@pytest.mark.llm_slo("ttft.p50 < 40ms", "tpot.p50 < 20ms", "error_rate < 1%")
async def test_max_sustainable_rate(llm_loadgen):
    # Search with a margin under the gate (30 vs 40 ms): a rate found exactly at
    # the boundary passes a re-run only half the time.
    search = await llm_loadgen.max_rate(
        low=25, high=80, tolerance=0.4, slos=["ttft.p50 < 30ms", "tpot.p50 < 20ms"], confirm=True
    )
    assert search.best is not None, "even the lowest rate misses the SLOs"
    at_max = search.confirmed
    llm_loadgen.attach(
        {
            "title": f"Throughput at the maximum sustainable load ({search.best:.1f} req/s)",
            "kind": "table",
            "columns": ["metric", "value"],
            "rows": [
                ["sustainable load req/s", round(search.best, 2)],
                ["output throughput tok/s", round(at_max.metrics["output_throughput"], 1)],
                ["request throughput req/s", round(at_max.metrics["request_throughput"], 2)],
                ["input throughput tok/s", round(at_max.metrics["input_throughput"], 1)],
            ],
        }
    )
