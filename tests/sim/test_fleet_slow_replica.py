"""The slow-replica fault: which requests it slows, and the numbers a fleet SLO test needs.

``sim:replicas-4-slow-one``: four replicas behind ``least_loaded``; replica 3 runs
one request in 25 (``slow_share: 0.04``, evenly spread: its 13th, 38th, ...) with
every step 40 times as long. A client at concurrency 4 sending 100 short requests
(the same prompt of ~100 tokens, 2 output tokens) sees, per ``x-replica-id``:
replica 3 serves some 13 to 25 of them, and its p99 TTFT (its largest) is the
slowed request's, about 40 × 6.7 ms = 270 ms (its prompt is cached on the replica
by then: the first step computes the last partial block), while the fleet's p99
(rank 99 of 100: the second largest) is a normal request's, 10 to 60 ms:
``replica.ttft.p99 < 150ms`` fails naming replica 3 while ``ttft.p99 < 150ms``
passes. ``least_loaded`` keeps the slowed request alone on its replica (a busy
replica gets no second request while another is idle), so exactly one request is
slow.
"""

from __future__ import annotations

import asyncio
import json
import math
import time

import httpx
import pytest

from pytest_llmperf.sim import ProfileError, SimServer, load_profile
from pytest_llmperf.sim.slow import SlowRequests, slowed_count

X_MS = 150.0  # the SLO's bound: between a normal TTFT (~10 ms) and the slowed one (~340 ms)


def test_slowed_requests_are_evenly_spread_over_the_replicas_arrivals() -> None:
    draws = SlowRequests(40.0, 0.04)
    slowed = [k for k in range(100) if draws.next()]
    assert slowed == [12, 37, 62, 87]
    assert [slowed_count(n, 0.04) for n in (12, 13, 25, 37, 38)] == [0, 1, 1, 1, 2]
    every = SlowRequests(4.0, 1.0)
    assert all(every.next() for _ in range(10))
    none = SlowRequests(4.0, 0.0)
    assert not any(none.next() for _ in range(10))


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"slow_replica": 4}, ["slow_replica", "below 4"]),
        ({"slow_replica": -2}, ["slow_replica"]),
        ({"slow_factor": 0.5}, ["slow_factor", "at least 1"]),
        ({"slow_share": 1.5}, ["slow_share", "probability"]),
    ],
)
def test_slow_replica_keys_are_checked(overrides: dict[str, object], words: list[str]) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile("replicas-4-slow-one", **overrides)
    assert all(w in str(info.value) for w in words), str(info.value)


def _content(line: str) -> str:
    """A chunk's text (the opening chunk carries the role only)."""
    choices = json.loads(line[len("data: ") :]).get("choices") or [{}]
    return choices[0].get("delta", {}).get("content") or ""


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


async def ttft_by_replica(url: str, model: str, n: int, concurrency: int) -> dict[str, list[float]]:
    """Client-side TTFT (ms) of ``n`` streamed requests, grouped by ``x-replica-id``."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "tell me about the fleet " * 20}],
        "max_tokens": 2,
        "stream": True,
    }
    queue = list(range(n))
    seen: dict[str, list[float]] = {}

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            queue.pop()
            start = time.monotonic_ns()
            first = 0
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    if not first and line.startswith("data: {") and _content(line):
                        first = time.monotonic_ns()
            seen.setdefault(r.headers["x-replica-id"], []).append((first - start) / 1e6)

    async with httpx.AsyncClient(timeout=30) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return seen


@pytest.mark.asyncio
async def test_one_slow_replica_fails_its_own_p99_while_the_fleets_passes() -> None:
    async with SimServer("replicas-4-slow-one") as sim:
        seen = await ttft_by_replica(sim.url, sim.profile.model, 100, 4)
    assert sorted(seen) == ["0", "1", "2", "3"]
    assert sum(len(v) for v in seen.values()) == 100
    slow = seen["3"]
    # its 13th request is the slowed one; it served at least that many
    assert 13 <= len(slow) < 38, {k: len(v) for k, v in seen.items()}
    over = {name: [t for t in ttfts if t >= X_MS] for name, ttfts in seen.items()}
    assert len(over["3"]) == 1 and not over["0"] and not over["1"] and not over["2"], over
    every = [t for ttfts in seen.values() for t in ttfts]
    failing = [name for name, ttfts in sorted(seen.items()) if nearest_rank(ttfts, 99) >= X_MS]
    assert failing == ["3"]  # replica.ttft.p99 < 150ms fails, naming replica 3 alone
    assert nearest_rank(every, 99) < X_MS  # ttft.p99 < 150ms over the fleet passes
    assert nearest_rank(slow, 99) > 250.0  # the slowed request: ~40 x its normal first step
