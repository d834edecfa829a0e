"""Disaggregated prefill/decode: the request's path through both pools, and its TTFT.

``sim:disaggregated-1p1d``: a prompt runs on the prefill engine ``p0``, its blocks
move to the decode engine ``d0`` (100 us a block), which finds them in its cache and
decodes. Each engine's page says its part: the prefill page its queue and prefill
time, the decode page the transfer (``vllm:nixl_xfer_time_seconds``), its own queue
and (tiny) prefill, and the answer's TTFT; the parts add up to the TTFT, by their
exact means and within the buckets' bounds.
"""

from __future__ import annotations

import math

import httpx
import pytest

from pytest_llmperf.server_metrics.exposition import HistogramSeries, Scrape, parse_scrape
from pytest_llmperf.sim import ProfileError, SimServer, load_profile

PROMPT_WORDS = 1000
SLACK_S = 0.020  # the hand-overs between the parts (a loop pass each) on a busy machine


def prompt(k: int) -> str:
    return " ".join(f"w{k}x{i}" for i in range(PROMPT_WORDS))


async def chat(client: httpx.AsyncClient, url: str, content: str) -> httpx.Response:
    body = {
        "model": "sim-llama-3.1-8b-pd",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    resp = await client.post(url + "/v1/chat/completions", json=body)
    assert resp.status_code == 200
    return resp


async def pages(client: httpx.AsyncClient, url: str) -> dict[str, Scrape]:
    listing = (await client.get(url + "/llmperf/fleet")).json()
    out = {}
    for page in listing["pages"]:
        scrape = parse_scrape((await client.get(url + page["metrics"])).text, 0)
        assert isinstance(scrape, Scrape)
        out[page["name"]] = scrape
    return out


def hist(page: Scrape, name: str) -> HistogramSeries:
    found = page.histogram(name)
    assert found is not None and found.count > 0, name
    return found


def mean(h: HistogramSeries) -> float:
    return h.sum / h.count


def median_bounds(h: HistogramSeries) -> tuple[float, float]:
    """The bucket the median (nearest rank) falls in: (lower, upper) bound, seconds."""
    rank = math.ceil(0.5 * h.count)
    lower = 0.0
    for bound, cum in zip(h.bounds, h.cumulative, strict=True):
        if cum >= rank:
            return lower, bound
        lower = bound
    raise AssertionError("no bucket holds the median")


@pytest.mark.asyncio
async def test_transfer_queue_and_engine_times_add_up_to_the_ttft() -> None:
    n = 6
    async with (
        SimServer("disaggregated-1p1d") as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        answers = [await chat(client, sim.url, prompt(k)) for k in range(n)]
        by_name = await pages(client, sim.url)
    assert [(r.headers["x-replica-id"], r.headers["x-prefill-replica-id"]) for r in answers] == [
        ("d0", "p0")
    ] * n
    p0, d0 = by_name["p0"], by_name["d0"]
    # each engine counts the request: the prefill engine its one token, the decode the rest
    assert p0.counter("vllm:request_success") == n == d0.counter("vllm:request_success")
    assert p0.counter("vllm:generation_tokens") == n
    assert d0.counter("vllm:generation_tokens") == 3 * n
    # the decode engine found the moved blocks: all but the last partial block hit
    prompt_tokens = d0.counter("vllm:prompt_tokens")
    assert prompt_tokens is not None and prompt_tokens >= n * PROMPT_WORDS
    hits = d0.counter("vllm:prefix_cache_hits")
    assert hits is not None and prompt_tokens - 16 * n <= hits < prompt_tokens
    assert p0.counter("vllm:prefix_cache_hits") == 0  # distinct prompts: nothing reused
    # the prefill page has no answer histograms: the decode side streams the answer
    assert (p0.histogram("vllm:time_to_first_token_seconds") or hist(p0, "x")).count == 0
    transfer = hist(d0, "vllm:nixl_xfer_time_seconds")
    assert transfer.count == n
    blocks = hits // 16 // n  # per request: what the transfer moved
    assert blocks * 100e-6 <= mean(transfer) < blocks * 100e-6 + SLACK_S
    parts = [
        hist(p0, "vllm:request_queue_time_seconds"),
        hist(p0, "vllm:request_prefill_time_seconds"),
        transfer,
        hist(d0, "vllm:request_queue_time_seconds"),
        hist(d0, "vllm:request_prefill_time_seconds"),
    ]
    ttft = hist(d0, "vllm:time_to_first_token_seconds")
    # the decode engine's own prefill is a step over the last partial block, the prefill
    # engine's the whole prompt: beta0 + 20 us a token
    assert mean(parts[4]) < 0.5 * mean(parts[1])
    # by the exact means: the parts, then at most the API overhead of both engines
    # (alpha0 + alpha1 x prompt, each) and the hand-overs between them
    overhead = 2 * (300e-6 + 0.5e-6 * prompt_tokens / n)
    total = sum(mean(h) for h in parts)
    assert total <= mean(ttft) <= total + overhead + SLACK_S, (total, mean(ttft))
    # within the buckets' bounds: the medians' buckets agree
    lows, highs = zip(*(median_bounds(h) for h in parts), strict=True)
    ttft_lo, ttft_hi = median_bounds(ttft)
    assert sum(lows) <= ttft_hi
    assert ttft_lo <= sum(highs) + overhead + SLACK_S


@pytest.mark.asyncio
async def test_blocks_the_decode_engine_holds_do_not_move_again() -> None:
    async with (
        SimServer("disaggregated-1p1d", speedup=10) as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        first = await chat(client, sim.url, prompt(0))
        again = await chat(client, sim.url, prompt(0))
        by_name = await pages(client, sim.url)
    assert '"cached_tokens":0' in first.text.replace(" ", "")
    assert '"cached_tokens":0' not in again.text.replace(" ", "")  # the prefill engine's hit
    assert hist(by_name["d0"], "vllm:nixl_xfer_time_seconds").count == 1


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"prefill_replicas": 1}, ["decode_replicas", "both"]),
        ({"decode_replicas": 2}, ["prefill_replicas", "both"]),
        ({"prefill_replicas": 1, "decode_replicas": 1, "replicas": 2}, ["replicas", "leave"]),
        ({"prefill_replicas": 1, "decode_replicas": 1, "kind": "fixed"}, ["kind: engine"]),
        (
            {"prefill_replicas": 1, "decode_replicas": 1, "enable_prefix_caching": False},
            ["enable_prefix_caching"],
        ),
        ({"prefill_replicas": -1}, ["prefill_replicas", "negative"]),
    ],
)
def test_disaggregated_keys_are_checked(overrides: dict[str, object], words: list[str]) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile("llama-3.1-8b-h100", **overrides)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_a_slow_engine_of_a_disaggregated_fleet_is_named_in_page_order() -> None:
    assert load_profile("disaggregated-2p2d", slow_replica=3, slow_factor=2).slow_replica == 3
    with pytest.raises(ProfileError, match="below 4"):
        load_profile("disaggregated-2p2d", slow_replica=4, slow_factor=2)
