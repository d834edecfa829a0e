"""Affinity end to end against the simulator's router (the Llama 8B profile at 20x speed,
two replicas, ``router=session``):
the requests carry Dynamo's headers (``--llm-affinity=dynamo``), the simulator's router
pins on them, and the client reads the replica of each answer (``x-replica-id``).

With the headers, each conversation's root calls all reach one replica and find more
of their prompts cached; without them the router deals calls round robin and one
conversation's calls cross both replicas.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from pytest_llmperf.client.affinity import Affinity
from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.run import RunSpec

pytestmark = pytest.mark.asyncio

ROOT_IN = (64, 160, 256, 352)  # each root call: the last prompt, its reply, new text


def conversation(name: str) -> dict[str, Any]:
    """Four growing root calls (each one's blocks the last one's plus its own), a
    two-call subagent after the second."""
    requests: list[dict[str, Any]] = []
    for k, n_in in enumerate(ROOT_IN):
        blocks = list(range(1, n_in // 16 + 1))
        requests.append({"type": "s", "t": 0.1 * k, "in": n_in, "out": 4, "hash_ids": blocks})
        if k == 1:
            calls = [{"type": "s", "t": 0.15, "in": 48, "out": 4}] * 2
            requests.append(
                {"type": "subagent", "t": 0.15, "agent_id": "explore", "requests": calls}
            )
    return {"id": name, "block_size": 16, "requests": requests}


@pytest_asyncio.fixture
async def two_replicas() -> AsyncIterator[str]:
    async with SimServer("llama-3.1-8b-h100", replicas=2, router="session", speedup=20) as sim:
        yield sim.url + "/v1"


async def _replay(url: str, tmp_path: Path, names: tuple[str, ...], affinity: str) -> list:
    trace = tmp_path / "trace"
    trace.mkdir()
    for name in names:
        (trace / f"{name}.json").write_text(json.dumps(conversation(name)))
    spec = RunSpec.from_markers((), {}, ("trace",), {"path": str(trace), "format": "weka"})
    endpoint = Endpoint(url, timeouts=Timeouts.from_seconds(20), affinity=Affinity.parse(affinity))
    records: list[RequestRecord] = []
    result = await LoadRun(endpoint, spec, observers=[records.append]).execute()
    assert result.counts["completed"] == len(names) * 6 == len(records), result.counts
    return records


def _roots(records: list[RequestRecord]) -> dict[int, list[RequestRecord]]:
    roots: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r.turn):
        if r.agent == "":
            roots[r.conversation].append(r)
    return dict(roots)


async def test_dynamo_headers_keep_each_root_on_one_replica(
    two_replicas: str, tmp_path: Path
) -> None:
    records = await _replay(two_replicas, tmp_path, ("conv-a", "conv-b"), "dynamo")
    assert {r.replica for r in records} <= {"0", "1"} and all(r.replica for r in records)
    for conversation, calls in _roots(records).items():
        assert len({r.replica for r in calls}) == 1, (conversation, [r.replica for r in calls])
        cached = [r.usage_cached_tokens or 0 for r in calls]
        # every later call finds its predecessor's prompt cached on its replica
        assert all(cached[k] >= ROOT_IN[k - 1] - 16 for k in range(1, len(calls))), cached


async def test_without_affinity_one_conversation_crosses_both_replicas(
    two_replicas: str, tmp_path: Path
) -> None:
    records = await _replay(two_replicas, tmp_path, ("conv-a",), "")
    assert {r.replica for r in records} == {"0", "1"}  # read from every answer
    (calls,) = _roots(records).values()
    assert len({r.replica for r in calls}) == 2, [r.replica for r in calls]
