"""Draft test "Prefix Cache Effectiveness": the same requests with the cache off and on.

Two simulators that differ only in ``enable_prefix_caching``; the
shared-prefix (code-completion) workload: 80% of requests start with one of
a few long prefixes chosen by a Zipf law. The same requests in the same
order run 3 times against each, interleaved. Reported: TTFT P50/P95/P99
with the cache disabled, cold (first run) and warm (later runs), the TTFT
reduction and its significance, and the share of prompt tokens the server
served from its cache (``usage.prompt_tokens_details.cached_tokens``).
"""

import pytest

from pytest_llmperf.analysis import compare_table, prefix_cache_effectiveness
from pytest_llmperf.methodology import run_configurations


@pytest.mark.llm_workload(
    "shared-prefix",
    n_prefixes=4,
    prefix_tokens=(768, 1024),
    suffix_tokens=(32, 96),
    output_tokens={"cap": 32},
    requests=32,  # per run: a p50 of 32 keeps the three runs a side apart
    seed=7,
)
@pytest.mark.llm_load("concurrency", concurrency=2)
async def test_prefix_cache_on_off(llm_loadgen, sim_url):
    runs = await run_configurations(
        llm_loadgen,
        {
            "cache disabled": sim_url("tiny", enable_prefix_caching=False),
            "cache enabled": sim_url("tiny", enable_prefix_caching=True),
        },
        repetitions=3,
    )
    table = prefix_cache_effectiveness(runs, disabled="cache disabled", enabled="cache enabled")
    llm_loadgen.attach(table)
    llm_loadgen.attach(compare_table(runs, ("ttft.p50", "ttft.p90", "output_throughput")))
    assert table["ttft_reduction"] > 0.2
    assert table["significant"]
    assert table["cached_share_warm"] > 0.3
