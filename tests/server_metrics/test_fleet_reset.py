"""``--llm-reset-cache`` over a fleet: each engine's server reset, the router's never.

Two simulators with a prefix cache are two replicas' servers (both answer vLLM's
``POST /reset_prefix_cache``); a third server has no reset (404). Pages on the
endpoint's own origin are the endpoint (reset once); a router's page is not reset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from loopback import aiohttp_apps

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.server_metrics.cache_reset import forget_cache_resets, reset_prefix_cache
from pytest_llmperf.server_metrics.fleet import PageSpec
from pytest_llmperf.server_metrics.fleet_reset import fleet_servers, reset_fleet
from pytest_llmperf.server_metrics.fleet_source import FleetPage, FleetSource
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.fleet_names import PageRole

REPLICA, ROUTER = PageRole.REPLICA, PageRole.ROUTER


@pytest.fixture
def gone() -> Iterator[str]:
    forget_cache_resets()
    with aiohttp_apps() as start:
        yield start(web.Application())
    forget_cache_resets()


def fleet(*pages: tuple[PageRole, str, str]) -> FleetSource:
    return FleetSource(tuple(FleetPage(PageSpec(r, n, u)) for r, n, u in pages))


def one(server: Endpoint) -> dict[str, Any]:
    return reset_prefix_cache(server).to_dict()


@pytest.mark.asyncio
async def test_each_engine_server_is_reset_once_and_the_router_never(gone: str) -> None:
    async with (
        SimServer("llama-3.1-8b-h100", speedup=20) as a,
        SimServer("llama-3.1-8b-h100", speedup=20) as b,
    ):
        target = Endpoint(a.url + "/v1", api_key="sk-secret")
        source = fleet(
            (ROUTER, "r", f"{gone}/router/metrics"),
            (REPLICA, "a", f"{a.url}/metrics"),
            (REPLICA, "a0", f"{a.url}/replicas/0/metrics"),  # the endpoint's own server
            (REPLICA, "b", f"{b.url}/metrics"),
            (REPLICA, "g", f"{gone}/metrics"),
        )
        servers = fleet_servers(target, source)
        assert [s.base_url for s in servers] == [a.url + "/v1", b.url + "/v1", gone + "/v1"]
        assert servers[0] is target and servers[1].api_key is None  # no key off its origin
        record = await asyncio.to_thread(reset_fleet, target, source, one)
        urls = [a.url, b.url, gone]
    assert record["done"] is False  # the third server has no reset
    assert [s["server"] for s in record["servers"]] == urls
    assert [s["done"] for s in record["servers"]] == [True, True, False]
    assert record["why"].startswith(f"{gone}: ")
    assert record["how"] == "POST /reset_prefix_cache"
    assert record["prefix_cache"] is True


@pytest.mark.asyncio
async def test_a_fleet_on_one_server_is_reset_as_that_server() -> None:
    forget_cache_resets()
    async with SimServer("replicas-2-round-robin", speedup=20) as sim:
        target = Endpoint(sim.url + "/v1")
        source = fleet(
            (REPLICA, "0", f"{sim.url}/replicas/0/metrics"),
            (REPLICA, "1", f"{sim.url}/replicas/1/metrics"),
        )
        record = await asyncio.to_thread(reset_fleet, target, source, one)
    forget_cache_resets()
    assert record == {
        "done": True,
        "how": "POST /reset_prefix_cache",
        "why": None,
        "prefix_cache": True,
    }  # one server: its own record, today's shape
