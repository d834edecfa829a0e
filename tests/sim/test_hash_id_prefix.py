"""Prompts built from trace hash ids hit the simulator's prefix cache block-exact.

A trace row names its prompt's KV blocks by ``hash_ids`` (workloads/traces/prompts.py:
equal ids, equal text); the simulator hashes its own blocks of the prompt's tokens
(kv_cache.py). Two prompts sharing their first ``k`` trace blocks of 64 tokens share
exactly ``k * 64`` leading tokens, so the second one's ``cached_tokens`` (the usage
the simulator reports per request) is ``k * 64`` rounded down to the simulator's
block size: not a block more (distinct ids must not share text), not a block less
(a shift at a block boundary would lose the whole chain after it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads.corpus import default_corpus
from pytest_llmperf.workloads.tokenizer import ApproximateTokenizer
from pytest_llmperf.workloads.traces.prompts import BlockPrompts

pytestmark = pytest.mark.asyncio

TRACE_BLOCK = 64
PROFILE = "llama-3.1-8b-h100"
MODEL = "sim-llama-3.1-8b"


def expected_hit(shared_blocks: int, prompt_tokens: int, sim_block: int) -> int:
    """``shared_blocks`` trace blocks, rounded down to whole simulator blocks, and never
    the whole prompt (its last token is always computed, as in vLLM)."""
    shared = min(shared_blocks * TRACE_BLOCK, prompt_tokens - 1)
    return shared // sim_block * sim_block


async def cached_of(client: httpx.AsyncClient, url: str, prompt: str) -> tuple[int, int]:
    """(prompt_tokens, cached_tokens) of one streamed chat request, from its usage chunk."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    usage: dict[str, Any] = {}
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
    return usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]


@pytest.mark.parametrize("sim_block", [16, 48])
@pytest.mark.parametrize("shared", [0, 1, 3])
async def test_shared_trace_blocks_hit_block_exact(shared: int, sim_block: int) -> None:
    prompts = BlockPrompts(ApproximateTokenizer(), default_corpus(), seed=7, block_size=64)
    first_ids = [1, 2, 3, 4, 5]
    second_ids = first_ids[:shared] + [100 + k for k in range(5 - shared)]
    n = 5 * TRACE_BLOCK + 10  # every block whole, then the row's own filler
    first, counted_first = prompts.prompt(first_ids, n, "row-a")
    second, counted_second = prompts.prompt(second_ids, n, "row-b")
    assert counted_first == counted_second == n
    async with (
        SimServer(PROFILE, block_size=sim_block, speedup=20) as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        tokens, cached = await cached_of(client, sim.url, first)
        assert (tokens, cached) == (n, 0)
        tokens, cached = await cached_of(client, sim.url, second)
    assert tokens == n
    assert cached == expected_hit(shared, n, sim_block)


# -- through the trace workload (the load generator's own prompts) -----------------------

ROWS = [  # (hash ids, extra tokens past the blocks, blocks shared with an earlier row)
    ([1, 2, 3, 4], 20, 0),
    ([1, 2, 3, 4, 5, 6], 20, 4),
    ([1, 2, 7], 20, 2),
    ([8, 9], 20, 0),
    ([1, 2, 3, 4, 5, 6, 10], 20, 6),
    ([8, 9, 11], 0, 2),  # ends on a block boundary
]


def mooncake(path: Path, gap_ms: int) -> str:
    with path.open("w") as f:
        for k, (ids, extra, _shared) in enumerate(ROWS):
            row = {
                "timestamp": k * gap_ms,
                "input_length": len(ids) * TRACE_BLOCK + extra,
                "output_length": 4,
                "hash_ids": ids,
            }
            f.write(json.dumps(row) + "\n")
    return str(path)


@pytest.mark.parametrize("sim_block", [16, 48])
async def test_a_mooncake_trace_hits_its_shared_blocks(tmp_path: Path, sim_block: int) -> None:
    """Each row's cached tokens are its blocks shared with the rows before it (sent one
    at a time, 250 ms apart: each row's blocks are in the cache when the next arrives)."""
    path = mooncake(tmp_path / "t.jsonl", gap_ms=250)
    spec = RunSpec.from_markers(
        ("trace",), {"block_size": TRACE_BLOCK}, ("trace",), {"path": path, "format": "mooncake"}
    )
    async with SimServer(PROFILE, block_size=sim_block, speedup=20) as sim:
        records: list[RequestRecord] = []
        endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(30))
        result = await LoadRun(endpoint, spec, observers=[records.append]).execute()
    assert result.counts["completed"] == len(ROWS)
    by_length = {r.usage_prompt_tokens: r for r in records}
    for ids, extra, shared in ROWS:
        n = len(ids) * TRACE_BLOCK + extra
        record = by_length[n]  # every row's prompt is exactly its length (server-counted)
        assert record.usage_cached_tokens == expected_hit(shared, n, sim_block), (ids, record)
