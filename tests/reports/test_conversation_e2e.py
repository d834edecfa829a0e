"""End to end: agent trees replayed on the simulator (a real HTTP server on 127.0.0.1)
by the load generator, and the run's ``conversations`` block in its JSON report entry.

The trees are written here (a root whose first call spawns two joined subagents, with
tool waits), so the expected structure is known; times are bounded generously (a busy
2-core machine), never measured to the millisecond."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from pytest_llmperf.client.affinity import Affinity
from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads.agent_script import AgentScript, Subagent
from pytest_llmperf.workloads.base import Sample, register_workload
from pytest_llmperf.workloads.conversations import TurnResult

pytestmark = pytest.mark.asyncio
MS = 1_000_000
TOOL_MS = 40  # the wait before each of the root's later calls, and each subagent's second


@dataclass(frozen=True)
class _Thread:
    """Thread ``agent_id`` of conversation ``index``: ``turns`` calls; the root spawns
    two joined subagents ("a", "b") after its first call."""

    index: int
    agent_id: str
    turns: int
    subagents: bool = True
    words: int = 0  # words of each call's new text (a long one fills prefix-cache blocks)
    tracks_turns: bool = True
    replies: bool = True
    first_turn: int = 0

    @property
    def conversation_id(self) -> str:
        return f"conv-{self.index}"

    def think_ns(self, k: int) -> int:
        return TOOL_MS * MS if k >= 1 else 0

    def spawns(self, k: int) -> Sequence[Subagent]:
        if self.agent_id or k != 0 or not self.subagents:
            return ()
        return tuple(
            Subagent(_Thread(self.index, name, 2, words=self.words), 0, True) for name in "ab"
        )

    def warmup_sample(self) -> Sample | None:
        return None

    def text(self, k: int) -> str:
        """Call ``k``'s new text: a line naming it, then ``words`` words of its own."""
        where = f"{self.conversation_id} {self.agent_id or 'root'} {k}"
        own = (f"w{self.index}{self.agent_id}{k}n{i}" for i in range(self.words))
        return " ".join((f"call {where}", *own))

    def turn(self, k: int, earlier: Sequence[TurnResult]) -> Sample:
        history: list[Mapping[str, str]] = []  # what the thread sent and got, quoted
        for j, result in enumerate(earlier):
            history += [
                {"role": "user", "content": self.text(j)},
                {"role": "assistant", "content": result.reply},
            ]
        return Sample(self.index, self.text(k), 8 + self.words, 4, tuple(history))


@dataclass(frozen=True)
class _Trees:
    conversations: int
    subagents: bool = True
    turns: int = 3
    words: int = 0

    @property
    def count(self) -> int:
        return self.conversations

    def conversation(self, index: int) -> AgentScript:
        return _Thread(index, "", self.turns, self.subagents, self.words)

    def start_ns(self, index: int, time_scale: float = 1.0) -> int:
        return round(index * 30 * MS * time_scale)

    def describe(self) -> dict[str, Any]:
        return {"conversations": self.conversations}


@dataclass(frozen=True)
class _TreeWorkload:
    agent_source: _Trees
    seed: int = 0
    name: str = "test-conversation-metrics"
    size: int | None = None

    def sample(self, index: int) -> Sample:
        return Sample(index, "unused", 8, 4)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


@register_workload("test-conversation-metrics")
def _workload(
    *, seed: int = 0, conversations: int = 4, subagents: bool = True, turns: int = 3, words: int = 0
) -> _TreeWorkload:
    return _TreeWorkload(_Trees(conversations, subagents, turns, words), seed)


@pytest_asyncio.fixture
async def sim() -> AsyncIterator[Endpoint]:
    async with SimServer("fixed", ttft_ms=20.0, itl_ms=2.0) as server:
        yield Endpoint(server.url + "/v1", timeouts=Timeouts.from_seconds(20))


async def test_an_agentic_replay_reports_its_conversations(sim: Endpoint) -> None:
    load = LoadSpec.parse("trace", {"path": "agents.json", "format": "weka"})
    spec = RunSpec("test-conversation-metrics", {"conversations": 4}, 0, load, requests=None)
    records: list[RequestRecord] = []
    result = await LoadRun(sim, spec, observers=[records.append]).execute()
    entry = json.loads(json.dumps(result.to_dict()))
    assert entry["counts"]["completed"] == 4 * (3 + 2 + 2) == len(records)
    block = entry["conversations"]
    assert (block["count"], block["failed"], block["calls"]) == (4, 0, 28)
    assert block["threads"] == {"max": 3, "p50": 3, "mean": 3.0}
    assert block["affinity"]["same_replica_rate"] is None  # the simulator says no replica
    # worked out from the records: first plan to last byte, the union of the calls'
    # [t_send, t_end] (the root's two 40 ms waits after the join have nothing in flight;
    # the subagents' own waits may overlap each other's calls on a slow machine), and the
    # most calls in flight (the two subagents at most: the root waits for them)
    spans, busies, most = [], [], []
    for c in range(4):
        calls = sorted((r.t_send, r.t_end, r.t_sched) for r in records if r.conversation == c)
        spans.append((max(e for _, e, _ in calls) - min(p for *_, p in calls)) / MS)
        union, (start, end) = 0, calls[0][:2]
        for s, e, _ in calls[1:]:
            if s > end:
                union, start, end = union + end - start, s, e
            else:
                end = max(end, e)
        busies.append((union + end - start) / MS)
        assert spans[-1] - busies[-1] >= 2 * TOOL_MS * 0.99
        edges = sorted([(e, -1) for _, e, _ in calls] + [(s, 1) for s, _, _ in calls])
        most.append(max(itertools.accumulate(step for _, step in edges)))
    assert 1 <= max(most) <= 2 and block["fan_out"]["max"] == max(most)
    span, busy = block["makespan"], block["makespan_excl_tools"]
    assert span["count"] == busy["count"] == 4
    for summary, values in ((span, spans), (busy, busies)):  # exact: min and max are kept
        assert summary["min"] == pytest.approx(min(values), abs=1e-3)
        assert summary["max"] == pytest.approx(max(values), abs=1e-3)
    bands = {row["turns"]: row["counts"]["completed"] for row in block["by_turn_band"]}
    assert bands == {"1": 12, "2-5": 16}  # first calls of 3 threads; the later ones
    assert entry["metrics"]["conversation.makespan"]["count"] == 4


@pytest.mark.parametrize(("router", "same"), [("session", 1.0), ("round_robin", 0.0)])
async def test_two_replicas_the_report_says_whether_calls_stayed_on_one(
    router: str, same: float
) -> None:
    """One conversation of sequential calls (no subagents), pinned by SGLang's routing key,
    on a two-replica simulator: the session router keeps every call on one replica, round
    robin alternates them (nothing else is in flight), and the block says which."""
    async with SimServer("fixed", ttft_ms=5.0, itl_ms=1.0, replicas=2, router=router) as server:
        endpoint = Endpoint(
            server.url + "/v1",
            timeouts=Timeouts.from_seconds(20),
            affinity=Affinity.parse("sglang"),
        )
        load = LoadSpec.parse("trace", {"path": "agents.json", "format": "weka"})
        params = {"conversations": 1, "subagents": False}
        spec = RunSpec("test-conversation-metrics", params, 0, load, requests=None)
        records: list[RequestRecord] = []
        result = await LoadRun(endpoint, spec, observers=[records.append]).execute()
    assert sorted({r.replica for r in records}) == (["0"] if same else ["0", "1"])
    affinity = json.loads(json.dumps(result.to_dict()))["conversations"]["affinity"]
    assert affinity["same_replica_rate"] == same and affinity["pairs"] == 2
    assert affinity["one_replica"] == (1 if same else 0)


async def one_conversation_on_two_replicas(router: str) -> dict[str, Any]:
    """One conversation of 8 sequential calls, 200 new words each, pinned by SGLang's
    routing key, on the ``tiny`` engine profile with two replicas: its JSON block."""
    sim = SimServer("tiny", replicas=2, router=router, num_blocks=4096, max_model_len=16384)
    async with sim as server:
        endpoint = Endpoint(
            server.url + "/v1",
            timeouts=Timeouts.from_seconds(30),
            affinity=Affinity.parse("sglang"),
        )
        load = LoadSpec.parse("trace", {"path": "agents.json", "format": "weka"})
        params = {"conversations": 1, "subagents": False, "turns": 8, "words": 200}
        spec = RunSpec("test-conversation-metrics", params, 0, load, requests=None)
        result = await LoadRun(endpoint, spec).execute()
    block: dict[str, Any] = json.loads(json.dumps(result.to_dict()))["conversations"]
    return block


async def test_the_cache_hit_by_turn_band_shows_what_affinity_buys() -> None:
    """Every call quotes the ones before it: on the replica that served them all but the
    new text is cached, so the hit rises with the turn; round robin alternates replicas,
    each holding only the call before last. Sequential calls: the same routing, hence
    the same hits, on any machine."""
    pinned = {
        row["turns"]: row
        for row in (await one_conversation_on_two_replicas("session"))["by_turn_band"]
    }
    dealt = {
        row["turns"]: row
        for row in (await one_conversation_on_two_replicas("round_robin"))["by_turn_band"]
    }
    assert list(pinned) == list(dealt) == ["1", "2-5", "6-10"]
    assert pinned["1"]["cache_hit_rate"] == dealt["1"]["cache_hit_rate"] == 0.0  # cold
    hit = {band: row["cache_hit_rate"] for band, row in pinned.items()}
    assert 0 < hit["2-5"] < hit["6-10"] < 1  # rising with the turn index
    for band in ("2-5", "6-10"):
        assert dealt[band]["cache_hit_rate"] < hit[band]
        assert dealt[band]["cache_reported"] == pinned[band]["cache_reported"] > 0
