"""The simulator as a fleet, read as one: ``discover`` asks its listing, each engine's page
is sampled on its own, and the fleet adds up.

Two replicas dealt round robin: each page counts its half, the whole counts every
request once. One prefill and one decode engine: the decode pool reports the KV
transfer in vLLM's NIXL histogram (``server.kv_transfer``), and the whole counts each
request once though both pools served it.
"""

from __future__ import annotations

import asyncio

import pytest

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.server_metrics.fleet_source import FleetSource, resolve_metrics
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.fleet_names import PageRole
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

REQUESTS = 8


async def run_fleet(profile: str) -> tuple[FleetSource, RunResult]:
    async with SimServer(profile, speedup=20) as sim:
        endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(10))
        source, _ = await asyncio.to_thread(resolve_metrics, endpoint, "discover,0.2")
        assert isinstance(source, FleetSource)
        load = LoadSpec.parse("concurrency", {"concurrency": 2})
        spec = RunSpec("synthetic", {"input_tokens": 256, "output_tokens": 8}, 0, load, REQUESTS)
        return source, await LoadRun(endpoint, spec, server_metrics=source).execute()


@pytest.mark.asyncio
async def test_two_replicas_each_count_their_share_and_the_whole_counts_every_request() -> None:
    source, result = await run_fleet("replicas-2-round-robin")
    assert source.discovered is not None and source.discovered.startswith("sim router (round")
    assert [(p.spec.role, p.spec.name) for p in source.pages] == [
        (PageRole.REPLICA, "0"),
        (PageRole.REPLICA, "1"),
    ]
    assert result.counts["completed"] == REQUESTS
    fleet = result.fleet
    assert fleet is not None and fleet.whole is not None
    assert all(p.metrics.missing is None for p in fleet.pages)  # one process each
    assert fleet.requests == {"0": REQUESTS / 2, "1": REQUESTS / 2}
    whole = fleet.whole
    assert whole.metrics["server.requests"] == {"value": REQUESTS}
    assert whole.metrics["server.ttft"]["count"] == REQUESTS
    assert whole.metrics["server.prompt_tokens"]["value"] == sum(
        p.metrics.metrics["server.prompt_tokens"]["value"] for p in fleet.pages
    )


@pytest.mark.asyncio
async def test_a_disaggregated_fleet_reports_its_kv_transfer_and_counts_a_request_once() -> None:
    source, result = await run_fleet("disaggregated-1p1d")
    assert [(p.spec.role, p.spec.name) for p in source.pages] == [
        (PageRole.PREFILL, "p0"),
        (PageRole.DECODE, "d0"),
    ]
    fleet = result.fleet
    assert fleet is not None and fleet.whole is not None
    assert set(fleet.roles) == {"prefill", "decode"}
    transfer = fleet.roles["decode"].metrics["server.kv_transfer"]
    assert transfer["count"] == REQUESTS and transfer["mean"] > 0
    assert "server.kv_transfer" not in fleet.roles["prefill"].metrics
    whole = fleet.whole
    assert whole.metrics["server.kv_transfer"] == transfer
    assert whole.metrics["server.requests"] == {"value": REQUESTS}  # not 2 × (both pools)
    assert fleet.requests == {"p0": REQUESTS, "d0": REQUESTS}
    # the client's TTFT holds the prefill, the transfer and the decode engine's first step
    ttft = result.server_metrics
    assert ttft is not None and ttft.metrics["server.ttft"]["count"] == REQUESTS
    prefill = fleet.roles["prefill"].metrics["server.prefill_time"]["mean"]
    assert whole.metrics["server.ttft"]["mean"] >= prefill + transfer["mean"]
