"""The OTel sample and the synthetic ``agentic`` workload replayed against the simulator
(a real HTTP server on 127.0.0.1) through the load generator: every call of every thread
sent, each prompt counted by the server as recorded, subagents launched after and joined
before the calls they were recorded between. Timing precision is the load generator's
tests' business (tests/loadgen/); here only orders that hold on any machine are checked."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads.agentic.model import AgentConversation
from pytest_llmperf.workloads.agentic.otel import read_otel
from pytest_llmperf.workloads.agentic.samples import agentic_sample
from pytest_llmperf.workloads.agentic.synthetic import agentic_params, synthetic_conversations

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def sim() -> AsyncIterator[Endpoint]:
    async with SimServer("fixed", ttft_ms=5.0, itl_ms=1.0) as server:
        yield Endpoint(server.url + "/v1", timeouts=Timeouts.from_seconds(20))


async def run(endpoint: Endpoint, spec: RunSpec) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    await LoadRun(endpoint, spec, observers=[records.append]).execute()
    return [r for r in records if r.tracked]


def planned(convs: list[AgentConversation]) -> dict[tuple[int, str], list[int]]:
    """Each (conversation, thread path): its calls' recorded input tokens."""
    return {
        (i, path): [c.input_tokens for c in thread.calls]
        for i, conv in enumerate(convs)
        for path, thread in conv.root.walk()
    }


def sent(records: list[RequestRecord]) -> dict[tuple[int, str], list[RequestRecord]]:
    out: dict[tuple[int, str], list[RequestRecord]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r.turn):
        out[r.conversation, r.agent].append(r)
    return dict(out)


def check_exact(
    records: list[RequestRecord], convs: list[AgentConversation], *, whole: bool = True
) -> None:
    """Every call's prompt as the server counted it is the recorded one (conversation ``i``
    of the run is recorded conversation ``i % len(convs)``); ``whole``: and every call of
    every conversation was sent (else a conversation may have been cut by the budget)."""
    assert all(r.error is None and r.status == 200 for r in records)
    want = planned(convs)
    got = {k: [r.usage_prompt_tokens for r in v] for k, v in sent(records).items()}
    if whole:
        assert got == want
    for (i, path), counts in got.items():
        assert counts == want[i % len(convs), path][: len(counts)]
    assert all(r.input_requested == r.usage_prompt_tokens for r in records)


async def test_the_otel_sample_replays_every_call_with_its_recorded_prompt(
    sim: Endpoint,
) -> None:
    path = agentic_sample("otel")
    load: dict[str, Any] = {"path": str(path), "format": "otel", "time_scale": 0.2}
    spec = RunSpec("trace", {"path": str(path), "format": "otel"}, 0, LoadSpec.parse("trace", load))
    records = await run(sim, spec)
    convs = read_otel(path)
    assert len(records) == sum(c.calls() for c in convs) == 36
    check_exact(records, convs)
    # the parent's next call waits for the joined subagent launched beside the background
    # one (whether the background one outlasts it is a matter of the server's speed here:
    # tests/loadgen/test_agent_trees.py checks that nobody waits for it)
    got = sent(records)
    [(i, conv, spawn)] = [
        (i, c, s) for i, c in enumerate(convs) for s in c.root.spawns if not s.joined
    ]
    assert len(got[i, spawn.thread.agent_id]) == len(spawn.thread.calls)
    next_root_call = got[i, ""][spawn.after + 1]
    joined = next(s for s in conv.root.spawns if s.joined and s.after == spawn.after)
    assert max(r.t_end for r in got[i, joined.thread.agent_id]) <= next_root_call.t_send


async def test_the_synthetic_workload_replays_through_the_same_engine(sim: Endpoint) -> None:
    params: dict[str, Any] = {
        "conversations": 3,
        "turns": (3, 4),
        "subagents": {"spawns": 1, "width": 2, "turns": 2},
        "tool_time": 0.02,
        "system_prompt_tokens": 256,
        "context_growth": (20, 60),
        "output_tokens": (4, 8),
    }
    convs = synthetic_conversations(agentic_params(**params), 9)
    calls = sum(c.calls() for c in convs)
    spec = RunSpec(
        "agentic",
        params,
        9,
        LoadSpec.parse("concurrency", {"concurrency": 3}),
        requests=calls,
    )
    records = await run(sim, spec)
    assert len(records) == calls  # requests= counts calls
    # a slot that finished its tree starts the next (conversation 3: conversation 0 again),
    # so the budget may cut a tree short
    check_exact(records, convs, whole=False)
    assert {r.conversation for r in records} >= {0, 1, 2}
    # a subagent's first call goes after the root call it was launched after has ended
    got = sent(records)
    for i, conv in enumerate(convs):
        for spawn in conv.root.spawns:
            if (i, spawn.thread.agent_id) in got:
                first = got[i, spawn.thread.agent_id][0]
                assert first.t_send >= got[i, ""][spawn.after].t_end
