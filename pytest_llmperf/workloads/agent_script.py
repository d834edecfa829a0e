"""Agentic conversations: what an agent-shaped workload gives the load generator.

An agent's conversation (the field says "session"; here the pytest session is the
only session) is a *tree* of conversations: a root agent whose calls each quote the
previous prompt, the server's reply and a tool result, separated by the time the
tool took, and which, after some call, launches subagents that run in parallel
(each itself a conversation, possibly with subagents of its own) and are joined
before the parent's next call. The load generator
(:mod:`pytest_llmperf.loadgen.issue.agents`) depends only on the protocols here;
the workloads that make them are in :mod:`pytest_llmperf.workloads.agentic`
(trace formats ``weka``, ``agentic``, ``otel``, and the synthetic ``agentic``
workload).

The timing rules (docs/agentic.md, "When each call goes"):

- turn ``k + 1`` of a thread becomes ready at ``end(k) + think_ns(k + 1)``, where
  ``end(k)`` is the later of turn ``k``'s last byte and the end of every *joined*
  subagent launched after turn ``k`` (the tool wait is counted from the join);
- the subagents of :meth:`AgentScript.spawns` ``(k)`` are launched at the end of
  turn ``k`` plus their own ``offset_ns`` (recorded, time-scaled); a subagent
  whose ``joined`` is False runs in the background: nobody waits for it;
- a conversation ends after its root's last turn and every subagent, or at a turn
  that failed or was cancelled (later turns would quote a reply that never came;
  a failed subagent call ends that subagent only, and its parent resumes at the join).

``first_turn`` (``start="mid"``): the root thread is tracked from that turn on; the
turns before it are not sent, and :meth:`AgentScript.warmup_sample` is the one
untracked request (``max_tokens`` 1) that fills the server's prefix cache with the
context turn ``first_turn`` builds on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pytest_llmperf.workloads.base import Sample
from pytest_llmperf.workloads.conversations import ConversationScript, TurnResult

__all__ = ["AgentScript", "AgentSource", "Subagent", "agents_of"]


@dataclass(frozen=True, slots=True)
class Subagent:
    """A subagent launched ``offset_ns`` after its parent's turn ended (see
    :meth:`AgentScript.spawns`); ``joined``: the parent's next turn waits for it."""

    script: AgentScript
    offset_ns: int = 0
    joined: bool = True


@runtime_checkable
class AgentScript(ConversationScript, Protocol):
    """One agent's thread of calls (a :class:`ConversationScript`) and the subagents it
    launches.

    ``agent_id`` names the thread within its conversation: ``""`` for the root,
    ``"<parent's agent_id>/<id>"`` for a subagent (the trace's own id where it has
    one), so records can be grouped per thread. ``conversation_id`` is the whole
    tree's (every thread of a conversation carries the root's: a router pins the
    tree on one replica). ``think_ns(k)`` is the tool (or user) wait before turn
    ``k``; ``turn(k, earlier)`` gets this thread's earlier results only, one per turn
    (``earlier[j]`` is turn ``j``'s; a turn before ``first_turn`` was never sent: its
    entry is an empty result, reply ``""`` and zero tokens).
    """

    @property
    def agent_id(self) -> str: ...

    @property
    def first_turn(self) -> int: ...

    def spawns(self, k: int) -> Sequence[Subagent]:
        """The subagents launched when turn ``k`` has ended (``()`` for none)."""
        ...

    def warmup_sample(self) -> Sample | None:
        """With ``first_turn > 0``: one request that puts the context of turn
        ``first_turn`` in the server's cache (untracked); else None."""
        ...

    def turn(self, k: int, earlier: Sequence[TurnResult]) -> Sample: ...


@runtime_checkable
class AgentSource(Protocol):
    """A workload's agentic conversations, by index (``count`` distinct, then repeated).

    ``start_ns(i)`` is conversation ``i``'s planned start after the run's start for a
    ``trace`` load (time-scaled; the trace's own where it records one, else the
    workload's stagger); open and closed loops start conversations at their own
    arrivals and slots and ignore it.
    """

    @property
    def count(self) -> int: ...

    def conversation(self, index: int) -> AgentScript: ...

    def start_ns(self, index: int, time_scale: float = 1.0) -> int: ...

    def describe(self) -> dict[str, Any]: ...


def agents_of(workload: object) -> AgentSource | None:
    """``workload``'s agentic conversations (its ``agent_source`` attribute), or None."""
    source = getattr(workload, "agent_source", None)
    if source is None:
        return None
    if not isinstance(source, AgentSource):
        raise TypeError(f"{type(workload).__name__}.agent_source is not an AgentSource")
    return source
