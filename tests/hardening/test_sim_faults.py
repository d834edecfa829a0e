"""The simulator's seeded fault injection end to end: each injected fault is a categorised failure.

Unlike the odd servers (one fault each), the simulator mixes faults into a
real load the way a stressed server does; the same seed gives the same
faults on the same requests, so the counts below are exact, not statistical.
"""

from __future__ import annotations

import pytest

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.loadgen.run import run_load
from pytest_llmperf.sim import start_sim_process
from pytest_llmperf.specs.run import RunSpec

FAULTS = {
    "error_rate": 0.15,
    "error_codes": "429,500,503",
    "retry_after_s": 2,
    "cut_rate": 0.1,
    "malformed_rate": 0.01,
    "stall_mid_prob": 0.05,
    "stall_mid_ms": 3000,
    "multi_token_rate": 0.3,
    "multi_token_max": 4,
    "keepalive_rate": 0.2,
}


async def _run(url: str) -> dict:
    endpoint = Endpoint.from_env(url, api_key_env=None, timeouts=Timeouts.parse("10,stall=1"))
    spec = RunSpec.from_markers(
        ("synthetic",),
        {"requests": 200, "input_tokens": 8, "output_tokens": 16, "seed": 3},
        ("concurrency",),
        {"concurrency": 32},
    )
    result = await run_load(endpoint, spec)
    return result.to_dict()


@pytest.mark.asyncio
async def test_injected_faults_are_categorised_and_replay_exactly():
    runs = []
    for _ in range(2):
        sim = start_sim_process("fixed", overrides=FAULTS, seed=7)
        try:
            runs.append(await _run(sim.url))
        finally:
            sim.stop()
    first, second = runs
    errors = first["errors"]
    assert set(errors) <= {
        "rate_limited",
        "http_error",
        "truncated_stream",
        "protocol_error",
        "stall_timeout",
    }, errors
    assert errors.get("rate_limited", 0) > 0 and errors.get("http_error", 0) > 0
    assert errors.get("truncated_stream", 0) > 0 and errors.get("stall_timeout", 0) > 0
    counts = first["counts"]
    assert counts["issued"] == 200 == counts["completed"] + counts["failed"]
    assert counts["failed"] == sum(errors.values())
    assert first["metrics"]["error_rate"] == pytest.approx(counts["failed"] / 200)
    # Multi-token chunks and keep-alive comments are not faults: the rest completed.
    assert counts["completed"] > 100
    # Same seed, same faults on the same requests.
    assert second["errors"] == errors
