"""An agentic conversation as recorded: the one shape every input format is read into.

Each reader (:mod:`.weka`, :mod:`.jsonl`, :mod:`.otel`) and the synthetic
generator (:mod:`.synthetic`) produce :class:`AgentConversation` values; the
scripts the load generator runs (:mod:`.scripts`) are built from them alone, so a
new format is one reader. Times are integer nanoseconds from the conversation's
start (the recording's own clock, before any ``time_scale``).

What a recorded wait means (docs/agentic.md, "When each call goes"): the wait
before call ``k + 1`` of a thread is the time the agent spent outside the model
(a tool, or the user) after call ``k`` ended — ``think_ns`` where the format
records it, else ``t(k + 1) - (t(k) + api(k))``; after subagents that call ``k``
launched and the thread joined, it counts from the latest joined subagent's end.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["AgentCall", "AgentConversation", "AgentSpawn", "AgentThread"]


@dataclass(frozen=True, slots=True)
class AgentCall:
    """One model call: its recorded send time and sizes.

    ``input_tokens`` is the prompt as the recording's server counted it (the replay
    makes the server count the same); ``hash_ids`` name its KV-cache blocks of
    ``block_size`` tokens (equal ids, equal text); ``api_ns`` is how long the call
    took when recorded (None: not recorded); ``wait_ns`` is the wait before it
    (tool or think time) as the reader derived it (0 for a thread's first call).
    ``where`` names the call in error messages and reports (``"trace.json
    requests[4]"``).
    """

    t_ns: int
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    api_ns: int | None = None
    wait_ns: int = 0
    streaming: bool = True
    model: str = ""
    where: str = ""


@dataclass(frozen=True, slots=True)
class AgentSpawn:
    """A subagent: launched ``offset_ns`` after call ``after`` of its parent ended.

    ``joined``: the parent's next call waits for the subagent (False: it runs in
    the background, as Weka's ``status: "async_launched"``).
    """

    after: int
    offset_ns: int
    thread: AgentThread
    joined: bool = True


@dataclass(frozen=True, slots=True)
class AgentThread:
    """One agent's calls in order, and the subagents it launches.

    ``agent_id`` is the thread's own id (``""`` for the root; a subagent's id as
    the trace names it, e.g. ``"agent_001"``).
    """

    agent_id: str
    calls: tuple[AgentCall, ...]
    spawns: tuple[AgentSpawn, ...] = ()

    def spawned_after(self, k: int) -> tuple[AgentSpawn, ...]:
        return tuple(s for s in self.spawns if s.after == k)

    def walk(self, path: str = "") -> Iterator[tuple[str, AgentThread]]:
        """This thread and every subagent below it, depth first, with their paths."""
        yield path, self
        for spawn in self.spawns:
            child = f"{path}/{spawn.thread.agent_id}" if path else spawn.thread.agent_id
            yield from spawn.thread.walk(child)


@dataclass(frozen=True, slots=True)
class AgentConversation:
    """A recorded conversation: its root thread and when it started.

    ``start_ns`` is its start after the first conversation of the input (0 where
    the format records none: a Weka file is one conversation with no wall-clock
    start). ``block_size`` is the tokens per hash id; ``shared_hashes``: equal
    hash ids in different conversations are the same block (Weka's
    ``hash_id_scope: "global"``) rather than each conversation's own.
    """

    conversation_id: str
    root: AgentThread
    start_ns: int = 0
    block_size: int = 64
    shared_hashes: bool = False
    source: str = ""
    dropped_spawns: int = 0  # subagents the reader could not place (no parent call before)
    notes: tuple[str, ...] = field(default=())

    def calls(self) -> int:
        return sum(len(thread.calls) for _, thread in self.root.walk())
