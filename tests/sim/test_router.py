"""The embedded router: which replica serves each request, over real sockets too.

The router's choice is a pure function of the arrival order and each request's
conversation key (router.py), checked first on its own; then on the simulator
serving ``replicas: 2`` over loopback: ``x-replica-id`` on every answer, round
robin alternating, a conversation pinned by each of the keys routers pin on, and
``/metrics`` the sum over the replicas.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from pytest_llmperf.sim import ProfileError, SimServer, load_profile, run_virtual
from pytest_llmperf.sim.router import (
    DYNAMO_PARENT_HEADER,
    DYNAMO_SESSION_HEADER,
    SGLANG_ROUTING_HEADER,
    Router,
    RoutingPolicy,
    conversation_key,
)

MODEL = "sim-llama-3.1-8b"


# -- the router on its own -----------------------------------------------------------------


def test_round_robin_alternates_whatever_the_request_carries() -> None:
    router = Router(3, "round_robin", "X-Session-ID")
    picks = [router.route({"X-Session-ID": "a"}, {}) for _ in range(7)]
    assert picks == [0, 1, 2, 0, 1, 2, 0]
    assert router.routed == [3, 2, 2]


def test_session_routing_pins_each_conversation_and_deals_new_ones_in_turn() -> None:
    router = Router(2, RoutingPolicy.SESSION, "X-Session-ID")
    sequence = ["a", "b", "a", "c", None, "b", "a", None, "c"]
    picks = [router.route({"X-Session-ID": k} if k else {}, {}) for k in sequence]
    # a -> 0, b -> 1, c -> 0 (dealt in turn), unkeyed requests take the next turn too
    assert picks == [0, 1, 0, 0, 1, 1, 0, 0, 0]
    pinned = {k: {p for k2, p in zip(sequence, picks, strict=True) if k2 == k} for k in "abc"}
    assert pinned == {"a": {0}, "b": {1}, "c": {0}}


def test_the_conversation_key_is_read_in_the_routers_order() -> None:
    body = {"nvext": {"session_control": {"session_id": "from-body"}}}
    every = {
        DYNAMO_PARENT_HEADER: "parent",
        DYNAMO_SESSION_HEADER: "dynamo",
        SGLANG_ROUTING_HEADER: "sglang",
        "X-Conv": "own",
    }
    assert conversation_key(every, body, "X-Conv") == "\x01group:parent"
    del every[DYNAMO_PARENT_HEADER]
    assert conversation_key(every, body, "X-Conv") == "dynamo"
    del every[DYNAMO_SESSION_HEADER]
    assert conversation_key(every, body, "X-Conv") == "from-body"
    assert conversation_key(every, {}, "X-Conv") == "sglang"
    del every[SGLANG_ROUTING_HEADER]
    assert conversation_key(every, {}, "X-Conv") == "own"
    assert conversation_key(every, {}, "") is None  # no configured header
    # a malformed nvext is no key (and no error: the engine ignores the field)
    for bad in ({"nvext": "x"}, {"nvext": {"session_control": {"session_id": 7}}}, []):
        assert conversation_key({}, bad, "X-Conv") is None


def test_dynamo_subagents_of_one_parent_share_a_replica_apart_from_the_parent() -> None:
    """As Dynamo binds them: a call carrying a parent id binds under that parent's group
    (the siblings together), the parent keeps its own binding."""
    router = Router(2, "session")

    def call(session: str, parent: str | None = None) -> int:
        headers = {DYNAMO_SESSION_HEADER: session}
        if parent is not None:
            headers[DYNAMO_PARENT_HEADER] = parent
        return router.route(headers, {})

    root = call("conv-1")
    children = [call(f"conv-1/agent-{k}", "conv-1") for k in range(3)]
    assert root == 0 and children == [1, 1, 1]
    assert call("conv-1") == root and call("conv-1/agent-0", "conv-1") == 1
    assert conversation_key({DYNAMO_PARENT_HEADER: "p"}, {}, "") != conversation_key(
        {DYNAMO_SESSION_HEADER: "p"}, {}, ""
    )


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"replicas": "0"}, ["replicas", "0", "at least 1"]),
        ({"router": "random"}, ["router", "random", "round_robin"]),
        ({"router_header": "X Session"}, ["router_header", "X Session", "header name"]),
    ],
)
def test_router_profile_keys_are_checked(overrides: dict[str, str], words: list[str]) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile("tiny", **overrides)
    for word in ["tiny", *words]:
        assert word in str(info.value)


def test_a_virtual_run_refuses_disaggregated_pools_and_fixed_replicas() -> None:
    with pytest.raises(ValueError, match="prefill_replicas=1, decode_replicas=1"):
        run_virtual("tiny", rate=1, duration=1, prefill_replicas=1, decode_replicas=1)
    with pytest.raises(ValueError, match="kind=fixed with replicas=2"):
        run_virtual("fixed", rate=1, duration=1, replicas=2)


# -- served ----------------------------------------------------------------------------------


async def chat(
    client: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None, **extra: Any
) -> tuple[str | None, dict[str, Any]]:
    """One streamed chat request: its ``x-replica-id`` and its usage."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "the same long question " * 40}],
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }
    usage: dict[str, Any] = {}
    async with client.stream(
        "POST", url + "/v1/chat/completions", json=body, headers=headers
    ) as resp:
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            if line.startswith("data: {"):
                usage = json.loads(line[6:]).get("usage") or usage
        return resp.headers.get("x-replica-id"), usage


@pytest.mark.asyncio
async def test_served_round_robin_alternates_and_names_the_replica() -> None:
    async with (
        SimServer("llama-3.1-8b-h100", replicas=2, speedup=20) as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        answers = [await chat(client, sim.url, {"X-Session-ID": "a"}) for _ in range(4)]
        # a non-streamed answer, an error and an embedding are routed and named too
        full = await client.post(
            sim.url + "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
        )
        error = await client.post(sim.url + "/v1/chat/completions", json={"model": "nope"})
        embedded = await client.post(
            sim.url + "/v1/embeddings", json={"model": MODEL, "input": "hi"}
        )
        metrics = (await client.get(sim.url + "/metrics")).text
    assert [replica for replica, _ in answers] == ["0", "1", "0", "1"]
    # the same prompt: each replica computes it once, then hits its own copy
    assert [usage["prompt_tokens_details"]["cached_tokens"] > 0 for _, usage in answers] == [
        False,
        False,
        True,
        True,
    ]
    assert [r.headers.get("x-replica-id") for r in (full, error, embedded)] == ["0", "1", "0"]
    assert (full.status_code, error.status_code, embedded.status_code) == (200, 404, 200)
    assert 'llmperf_sim_replica_requests_total{replica="0"} 4.0' in metrics
    assert 'llmperf_sim_replica_requests_total{replica="1"} 3.0' in metrics


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("header", "value", "extra"),
    [
        ("X-Session-ID", "conv-1", {}),
        (DYNAMO_SESSION_HEADER, "conv-1", {}),
        (SGLANG_ROUTING_HEADER, "conv-1", {}),
        (None, None, {"nvext": {"session_control": {"session_id": "conv-1"}}}),
    ],
)
async def test_served_session_routing_pins_a_conversation(
    header: str | None, value: str | None, extra: dict[str, Any]
) -> None:
    pinned = {header: value} if header and value else {}
    async with (
        SimServer("llama-3.1-8b-h100", replicas=2, router="session", speedup=20) as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        seen = []
        for k in range(6):  # the conversation's turns between requests of no conversation
            seen.append(await chat(client, sim.url, pinned, **extra))
            seen.append(await chat(client, sim.url, {}, max_tokens=2 + k))
        metrics = (await client.get(sim.url + "/metrics")).text
    conversation, others = seen[0::2], seen[1::2]
    assert {replica for replica, _ in conversation} == {"0"}
    assert [replica for replica, _ in others] == ["1", "0", "1", "0", "1", "0"]
    # after its first turn the conversation always finds its prompt on its replica
    assert all(u["prompt_tokens_details"]["cached_tokens"] > 0 for _, u in conversation[1:])
    # /metrics: vLLM's names are the sum over the replicas, each replica's beside them
    values = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line and not line.startswith("#")
    }
    hits = [values[f'llmperf_sim_replica_prefix_cache_hits_total{{replica="{i}"}}'] for i in (0, 1)]
    total = values[f'vllm:prefix_cache_hits_total{{engine="0",model_name="{MODEL}"}}']
    assert total == sum(hits) > 0
    served = sum(v for k, v in values.items() if k.startswith("vllm:request_success_total{"))
    assert served == 12


@pytest.mark.asyncio
async def test_fixed_latency_replicas_are_routed_too() -> None:
    async with (
        SimServer("fixed", replicas=3, ttft_ms=1, itl_ms=1) as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        body = {"model": "sim-fixed", "messages": [{"role": "user", "content": "hi"}]}
        answers = [await client.post(sim.url + "/v1/chat/completions", json=body) for _ in range(4)]
    assert [r.headers.get("x-replica-id") for r in answers] == ["0", "1", "2", "0"]
    assert all(r.json()["usage"]["completion_tokens"] > 0 for r in answers)


@pytest.mark.asyncio
async def test_one_replica_answers_as_before_without_a_replica_header() -> None:
    async with (
        SimServer("llama-3.1-8b-h100", speedup=20) as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        replica, usage = await chat(client, sim.url, {"X-Session-ID": "a"})
        metrics = (await client.get(sim.url + "/metrics")).text
    assert replica is None and usage["completion_tokens"] == 3
    assert "llmperf_sim_replica" not in metrics


@pytest.mark.asyncio
async def test_reset_prefix_cache_resets_every_replica() -> None:
    async with (
        SimServer("llama-3.1-8b-h100", replicas=2, speedup=20) as sim,
        httpx.AsyncClient(timeout=30) as client,
    ):
        for _ in range(2):  # the prompt cached on both replicas
            await chat(client, sim.url)
        reset = (await client.post(sim.url + "/reset_prefix_cache")).json()
        after = [await chat(client, sim.url) for _ in range(2)]
    assert reset == {"success": True}
    assert [usage["prompt_tokens_details"]["cached_tokens"] for _, usage in after] == [0, 0]
