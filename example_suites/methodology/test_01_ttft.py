"""Draft test "Time to First Token": TTFT distribution and TTFT by input length.

Workload synthetic-skewed (log-normal lengths, capped below the tiny
profile's 2048-token context), Poisson arrivals. The report gets the draft's
results table (P50-P99.9, mean, min, max, sample count) and the TTFT-by-input-
length table. SLOs are on p50/p90: 80 requests is enough samples for those
(the draft's P99 needs >= 1000, P99.9 >= 10000; raise ``requests`` for them).
"""

import pytest

from pytest_llmperf.analysis import collect, latency_results, ttft_by_input_length


@pytest.mark.llm_workload(
    "synthetic-skewed", input_tokens={"cap": 1500}, output_tokens={"cap": 64}, requests=80, seed=42
)
@pytest.mark.llm_load("poisson", rate=20)
@pytest.mark.llm_slo("ttft.p50 < 100ms", "ttft.p90 < 300ms", "error_rate < 1%")
async def test_ttft_distribution(llm_loadgen):
    with collect(llm_loadgen) as requests:
        result = await llm_loadgen.run()
    llm_loadgen.attach(latency_results(result, ("ttft",)))
    by_length = ttft_by_input_length(requests.rows)
    llm_loadgen.attach(by_length)
    # Longer prompts take longer to prefill: the shortest bucket is the fastest.
    filled = [row for row in by_length["rows"] if row[1] >= 10]
    assert filled[0][2] <= filled[-1][2]
