"""Draft test "Concurrent Request Capacity": the most concurrent requests meeting the criteria.

Closed loop; concurrency doubles from 8 until the success criteria fail
(completion >= 99% as error_rate < 1%, TTFT below its threshold), then
bisects. Fixed output length so every request lasts about as long.
"""

import pytest


@pytest.mark.llm_workload("synthetic", input_tokens=128, output_tokens=32, requests=24)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 100ms", "error_rate < 1%")
async def test_max_concurrency(llm_loadgen):
    # Search with a margin under the gate (60 vs 100 ms): a level found exactly at
    # the boundary passes a re-run only half the time. The tiny profile's KV cache
    # makes a cliff here: ~60 ms at 22 concurrent requests, 80-100 ms at 23 once
    # preemption starts, so a narrower margin let 23 through the search now and then.
    search = await llm_loadgen.max_concurrency(
        initial=8, maximum=128, slos=["ttft.p50 < 60ms", "error_rate < 1%"], confirm=True
    )
    assert search.best is not None and search.best >= 4
