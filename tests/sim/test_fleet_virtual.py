"""Virtual time over several replicas: the router and N engines on one event queue.

The same seed gives the same run; the replicas' requests add up to the run's; each
policy routes as in real time (round robin evenly, least loaded to the idle, prefix
aware to the cached prefix); one engine keeps its own loop's output exactly; the
slow replica slows exactly its spread share of requests.
"""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.sim import run_virtual
from pytest_llmperf.sim.slow import slowed_count

KW = dict(
    load="poisson",
    rate=40,
    duration=8,
    input_tokens=(200, 600),
    output_tokens=(10, 40),
    shared_prefix=128,
    seed=3,
)


@pytest.mark.parametrize("router", ["round_robin", "least_loaded", "prefix_aware", "session"])
def test_a_fleet_run_is_deterministic_and_its_replicas_add_up(router: str) -> None:
    a = run_virtual("replicas-4-least-loaded", router=router, **KW).to_dict()
    b = run_virtual("replicas-4-least-loaded", router=router, **KW).to_dict()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    counts = a["counts"]
    assert counts["completed"] == counts["issued"] > 250
    assert sum(r["requests"] for r in a["replicas"]) == counts["issued"]
    assert a["router"] == router
    assert a["engine"]["steps"] == sum(r["steps"] for r in a["replicas"])
    requests = [r["requests"] for r in a["replicas"]]
    if router in ("round_robin", "session"):  # no conversation key: dealt in turn
        assert max(requests) - min(requests) <= 1
    elif router == "least_loaded":
        assert min(requests) > 0.15 * counts["issued"]
    else:  # one shared prefix: every prompt finds it longest on the replica that has it
        assert requests == [counts["issued"], 0, 0, 0]


def test_one_engine_keeps_its_own_loop_and_output() -> None:
    one = run_virtual("llama-3.1-8b-h100", **KW).to_dict()
    assert "replicas" not in one and "router" not in one
    # the same engine behind a one-replica router (the slow fault on, slowing nothing)
    routed = run_virtual(
        "llama-3.1-8b-h100", slow_replica=0, slow_factor=2, slow_share=0, **KW
    ).to_dict()
    assert routed["metrics"] == one["metrics"] and routed["counts"] == one["counts"]


def test_a_slow_replica_slows_its_share_of_requests_in_virtual_time() -> None:
    run = run_virtual(
        "replicas-4-slow-one",
        load="concurrency",
        concurrency=4,
        duration=4,
        input_tokens=100,
        output_tokens=2,
        seed=1,
    )
    slow_engine = run.engines[3]
    served = run.routed[3]
    slowed = [r for r in run.requests if r.slow]
    assert len(slowed) == slowed_count(served, 0.04) >= 1
    ttfts = sorted(r.first_token_time - r.arrival for r in run.requests)
    # a slowed request's first step is 40 x a normal one; nobody else waits behind it
    assert all(r.first_token_time - r.arrival > 0.3 for r in slowed)
    assert ttfts[-len(slowed) - 1] < 0.05
    assert slow_engine.slow_factor == 40.0


def test_a_virtual_fleet_needs_engine_replicas() -> None:
    with pytest.raises(ValueError, match="disaggregated pools and fixed-latency replicas"):
        run_virtual("disaggregated-1p1d", rate=1, duration=1)
