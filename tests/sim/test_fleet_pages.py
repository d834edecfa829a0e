"""Each engine's own ``/metrics`` page and the listing of them, over loopback.

The pages are read as the plugin reads any page (``parse_scrape``): every counter
and histogram bucket of the replicas' pages sums to the simulator's own
``/metrics``; each page is one process to the one-process rule and two pages are
two; the listing names the pages as the answers' ``x-replica-id`` names the replicas.
"""

from __future__ import annotations

import httpx
import pytest

from pytest_llmperf.server_metrics.deltas import not_one_process
from pytest_llmperf.server_metrics.exposition import Scrape, parse_scrape
from pytest_llmperf.sim import SimServer

COUNTERS = (
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:request_success",
    "vllm:num_preemptions",
)
HISTOGRAMS = (
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
)


async def scrape(client: httpx.AsyncClient, url: str) -> Scrape:
    resp = await client.get(url)
    assert resp.status_code == 200, (url, resp.status_code)
    page = parse_scrape(resp.text, 0)
    assert isinstance(page, Scrape), page
    return page


async def traffic(client: httpx.AsyncClient, url: str, model: str, n: int) -> list[str]:
    """``n`` requests of several kinds (streamed, whole, an embedding); their replicas."""
    names = []
    for k in range(n):
        body = {
            "model": model,
            "messages": [{"role": "user", "content": f"question {k % 3} " * (20 + k)}],
            "max_tokens": 2 + k % 4,
            "stream": k % 2 == 0,
        }
        resp = await client.post(url + "/v1/chat/completions", json=body)
        assert resp.status_code == 200
        names.append(resp.headers["x-replica-id"])
    embedded = await client.post(url + "/v1/embeddings", json={"model": model, "input": "hi"})
    names.append(embedded.headers["x-replica-id"])
    return names


@pytest.mark.asyncio
async def test_the_replicas_pages_sum_to_the_whole_page_and_are_processes_of_their_own() -> None:
    async with (
        SimServer("replicas-4-least-loaded", router="round_robin", speedup=20) as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        model = sim.profile.model
        served = await traffic(client, sim.url, model, 10)
        listing = (await client.get(sim.url + "/llmperf/fleet")).json()
        pages = [await scrape(client, sim.url + p["metrics"]) for p in listing["pages"]]
        again = await scrape(client, sim.url + listing["pages"][1]["metrics"])
        whole = await scrape(client, sim.url + "/metrics")
        missing = await client.get(sim.url + "/replicas/9/metrics")
    assert listing == {
        "router": "round_robin",
        "pages": [
            {"role": "replica", "name": str(i), "metrics": f"/replicas/{i}/metrics"}
            for i in range(4)
        ],
    }
    assert served == [str(k % 4) for k in range(11)]  # the names the pages go by
    for name in COUNTERS:
        each = [p.counter(name) for p in pages]
        assert sum(v or 0.0 for v in each) == whole.counter(name), name
    # each replica counts the requests it answered (the embedding: replica 2's)
    assert [p.counter("vllm:request_success") for p in pages] == [3.0, 3.0, 3.0, 2.0]
    for name in HISTOGRAMS:
        hists = [p.histogram(name) for p in pages]
        total = whole.histogram(name)
        assert total is not None and all(h is not None for h in hists), name
        assert [sum(c) for c in zip(*(h.cumulative for h in hists if h), strict=True)] == list(
            total.cumulative
        ), name
        assert sum(h.count for h in hists if h) == total.count
    assert sum(p.gauge("vllm:num_requests_running") or 0.0 for p in pages) == 0.0
    # one page is one process; two pages, or a page and the whole, are not
    assert not_one_process([pages[1], again]) is None
    assert not_one_process([pages[0], pages[1]]) is not None
    assert not_one_process([whole, pages[0]]) is not None
    assert len({p.process_start for p in [*pages, whole]}) == 5
    assert missing.status_code == 404


@pytest.mark.asyncio
async def test_one_engine_lists_its_only_page_at_metrics() -> None:
    async with (
        SimServer("llama-3.1-8b-h100", speedup=20) as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        listing = (await client.get(sim.url + "/llmperf/fleet")).json()
        page = await client.get(sim.url + "/replicas/0/metrics")
    assert listing["pages"] == [{"role": "replica", "name": "0", "metrics": "/metrics"}]
    assert page.status_code == 404  # its page is /metrics, as before


@pytest.mark.asyncio
async def test_a_disaggregated_listing_names_the_pools() -> None:
    async with (
        SimServer("disaggregated-2p2d", speedup=20) as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        listing = (await client.get(sim.url + "/llmperf/fleet")).json()
        info = [
            (await client.get(sim.url + p["metrics"])).text.split("llmperf_sim_info{")[1]
            for p in listing["pages"]
        ]
    assert listing == {
        "router": "least_loaded",
        "pages": [
            {"role": "prefill", "name": "p0", "metrics": "/replicas/p0/metrics"},
            {"role": "prefill", "name": "p1", "metrics": "/replicas/p1/metrics"},
            {"role": "decode", "name": "d0", "metrics": "/replicas/d0/metrics"},
            {"role": "decode", "name": "d1", "metrics": "/replicas/d1/metrics"},
        ],
    }
    assert [line.split("}")[0].split(",")[-2:] for line in info] == [
        ['role="prefill"', 'name="p0"'],
        ['role="prefill"', 'name="p1"'],
        ['role="decode"', 'name="d0"'],
        ['role="decode"', 'name="d1"'],
    ]
