"""Replaying production traffic: a Mooncake trace on its own timestamps.

Each row of the trace is sent at its own time (relative to the first row,
times ``time_scale``) with a prompt of its input length and ``max_tokens``
of its output length; rows that share ``hash_ids`` share identical prompt
blocks, so a server's prefix cache hits as it did in production.
``traces/mooncake_sample.jsonl`` is a small synthetic trace written for this
project (200 requests over 10 s). BurstGPT, Azure and plain JSONL traces
replay the same way; see docs/traces.md.
"""

from pathlib import Path

import pytest

TRACE = Path(__file__).parent / "traces" / "mooncake_sample.jsonl"


@pytest.mark.llm_load("trace", path=str(TRACE), format="mooncake", limit=50)
@pytest.mark.llm_slo("ttft.p90 < 500ms", "e2e.p50 < 3s", "error_rate < 1%")
async def test_replay_the_first_50_rows(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.counts["issued"] == 50  # each row on the trace's own schedule (2.4 s)


@pytest.mark.llm_load("trace", path=str(TRACE), format="mooncake", time_scale=0.25)
@pytest.mark.llm_slo("ttft.p50 < 500ms", "error_rate < 1%")
async def test_the_whole_trace_at_four_times_its_speed(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.counts["issued"] == 200  # every row, 10 s of traffic in 2.5 s
