"""A hand-written agentic workload for the load generator's tests: the protocols of
:mod:`pytest_llmperf.workloads.agent_script`, implemented in a few lines, so the
issuer is tested on trees whose every wait, spawn and join the test chose.

``Thread`` describes one thread (its turns, the wait before each, the subagents each
turn spawns, the turns that fail: their request names a model the simulator does not
serve, so it answers 404); ``TreeSource`` is a list of root threads (and their
starts); the workload ``test-agent-trees`` carries a source (``source=``) as its
``agent_source``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.workloads.agent_script import AgentScript, Subagent
from pytest_llmperf.workloads.base import Sample, register_workload
from pytest_llmperf.workloads.conversations import TurnResult

MS = 1_000_000
NO_SUCH_MODEL = "no-such-model"  # a call that fails: the simulator answers 404


@dataclass(frozen=True)
class Spawn:
    """A subagent ``thread`` launched ``offset_ms`` after turn ``after`` of its parent."""

    after: int
    thread: Thread
    offset_ms: float = 0.0
    joined: bool = True


@dataclass(frozen=True)
class Thread:
    """One thread: ``turns`` calls, ``waits_ms[k - 1]`` before call ``k``, its spawns,
    the turns whose call fails, the first turn sent (``first_turn``: mid start)."""

    name: str
    turns: int
    waits_ms: Sequence[float] = ()
    spawns: Sequence[Spawn] = ()
    fail: frozenset[int] = frozenset()
    first_turn: int = 0
    max_tokens: int = 4


@dataclass(frozen=True)
class Script:
    """:class:`Thread` ``thread`` as the :class:`AgentScript` of conversation ``index``."""

    thread: Thread
    index: int
    conversation_id: str
    agent_id: str = ""
    tracks_turns: bool = True
    replies: bool = True

    @property
    def turns(self) -> int:
        return self.thread.turns

    @property
    def first_turn(self) -> int:
        return self.thread.first_turn

    def think_ns(self, k: int) -> int:
        waits = self.thread.waits_ms
        return round(waits[k - 1] * MS) if 1 <= k <= len(waits) else 0

    def spawns(self, k: int) -> Sequence[Subagent]:
        out = []
        for spawn in self.thread.spawns:
            if spawn.after == k:
                path = (
                    f"{self.agent_id}/{spawn.thread.name}" if self.agent_id else spawn.thread.name
                )
                child = Script(spawn.thread, self.index, self.conversation_id, path)
                out.append(Subagent(child, round(spawn.offset_ms * MS), spawn.joined))
        return tuple(out)

    def warmup_sample(self) -> Sample | None:
        if not self.thread.first_turn:
            return None
        return Sample(self.index, f"warm {self.conversation_id}", 4, 1)

    def turn(self, k: int, earlier: Sequence[TurnResult]) -> Sample:
        where = f"{self.conversation_id}:{self.agent_id or 'root'}:{k}"
        history: list[Mapping[str, str]] = []
        for j, result in enumerate(earlier):
            history += [
                {"role": "user", "content": f"q{j}"},
                {"role": "assistant", "content": result.reply},
            ]
        model = NO_SUCH_MODEL if k in self.thread.fail else None
        return Sample(
            self.index, f"call {where}", 4, self.thread.max_tokens, tuple(history), model=model
        )


@dataclass(frozen=True)
class TreeSource:
    """Conversations ``i``: root ``roots[i % len(roots)]``, starting ``starts_ms[i]`` ms in."""

    roots: Sequence[Thread]
    starts_ms: Sequence[float] = ()
    conversations: int | None = None

    @property
    def count(self) -> int:
        return self.conversations or len(self.roots)

    def conversation(self, index: int) -> AgentScript:
        root = self.roots[index % len(self.roots)]
        return Script(root, index, f"conv-{index}")

    def start_ns(self, index: int, time_scale: float = 1.0) -> int:
        start = self.starts_ms[index] if index < len(self.starts_ms) else 0.0
        return round(start * MS * time_scale)

    def describe(self) -> dict[str, Any]:
        return {"conversations": self.count}


@dataclass(frozen=True)
class TreeWorkload:
    """The workload of a :class:`TreeSource` (its samples are the trees' calls)."""

    agent_source: TreeSource
    seed: int = 0
    name: str = "test-agent-trees"
    size: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    def sample(self, index: int) -> Sample:
        return Sample(index, "unused", 4, 4)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


@register_workload("test-agent-trees")
def _tree_workload(*, seed: int = 0, source: TreeSource) -> TreeWorkload:
    return TreeWorkload(source, seed)
