"""Affinity through the load generator: a Weka trace's agent trees replayed against a
router-like server (:mod:`router_server`), every call pinned by the issuer.

With ``token:`` the router's token from a tree's first response goes back on every
later call of that tree, subagents included, so each conversation stays on the
replica its first call reached; without it the same router spreads them. The Dynamo
headers name each thread and its parent as the trace's tree has them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from router_server import RouterServer

from pytest_llmperf.client.affinity import Affinity
from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.specs.run import RunSpec

pytestmark = pytest.mark.asyncio


def _call(t: float, n_in: int) -> dict[str, Any]:
    return {"type": "s", "t": t, "in": n_in, "out": 4, "api_time": 0.02}


def conversation(name: str) -> dict[str, Any]:
    """Two root calls around a subagent of two calls (joined), then a last root call."""
    return {
        "id": name,
        "block_size": 16,
        "requests": [
            _call(0.0, 40),
            _call(0.05, 60),
            {
                "type": "subagent",
                "t": 0.1,
                "agent_id": "explore",
                "requests": [_call(0.1, 30), _call(0.15, 50)],
            },
            _call(0.25, 90),
        ],
    }


async def _replay(tmp_path: Path, srv: RouterServer, affinity: str) -> list[RequestRecord]:
    trace = tmp_path / "trace"
    trace.mkdir()
    for name in ("conv-a", "conv-b"):
        (trace / f"{name}.json").write_text(json.dumps(conversation(name)))
    spec = RunSpec.from_markers(
        (), {}, ("trace",), {"path": str(trace), "format": "weka", "time_scale": 0.5}
    )
    endpoint = Endpoint.from_env(
        srv.url,
        api_key_env=None,
        model="m",
        timeouts=Timeouts.from_seconds(20),
        affinity=Affinity.parse(affinity),
    )
    records: list[RequestRecord] = []
    result = await LoadRun(endpoint, spec, observers=[records.append]).execute()
    assert result.counts["completed"] == 2 * 5 == len(records), result.counts
    return records


def _replicas(records: list[RequestRecord]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = defaultdict(set)
    for r in records:
        out[r.conversation].add(r.replica)
    return dict(out)


async def test_the_token_keeps_each_agent_tree_on_one_replica(tmp_path: Path) -> None:
    async with RouterServer(replicas=3, token_header="x-route-token") as srv:
        records = await _replay(tmp_path, srv, "token:x-route-token,dynamo")
    replicas = _replicas(records)
    assert sorted(len(r) for r in replicas.values()) == [1, 1], replicas
    assert len(srv.tokens) == 2  # one token per conversation: every later call sent it back
    # every call after a tree's first carried its token (the first: none yet)
    carried = [h.get("x-route-token") for h, _ in srv.seen]
    assert carried.count(None) == 2 and set(carried) - {None} == set(srv.tokens), carried
    # the Dynamo headers: the thread and, on the subagent's calls, its parent
    threads = {(h["x-dynamo-session-id"], h.get("x-dynamo-parent-session-id")) for h, _ in srv.seen}
    ids = {h["x-dynamo-session-id"] for h, _ in srv.seen if "x-dynamo-parent-session-id" not in h}
    assert len(ids) == 2, threads  # the two roots, by their conversations' ids
    for root in ids:
        assert (f"{root}/explore", root) in threads, threads


async def test_without_affinity_the_same_router_spreads_the_trees(tmp_path: Path) -> None:
    async with RouterServer(replicas=3, token_header="x-route-token") as srv:
        records = await _replay(tmp_path, srv, "")
    replicas = _replicas(records)
    assert any(len(r) > 1 for r in replicas.values()), replicas
    assert all("x-route-token" not in h and "x-dynamo-session-id" not in h for h, _ in srv.seen)
