"""The request paths a workload's samples take: served model, output contract.

``structured=``, ``tools=``, ``tool_choice=``, ``adapters=`` and ``greedy=``
mean the same on every chat-like workload, so no workload implements them:
:func:`~pytest_llmperf.workloads.base.build_workload` builds the workload from
its own parameters and wraps it in :class:`RequestPathsWorkload`, which sets
each sample's ``model`` (drawn by the adapter mix) and ``contract``. The
prompts, lengths and order stay exactly the inner workload's, so a run with
``greedy=True`` sends the same prompts as one without.

Samples a workload builds outside ``sample()`` get the same treatment: the
turns of a multi-turn conversation (``conversation`` with ``conversations=True``,
a trace whose rows carry ``session_id``) come from its conversation source, which
the wrapper wraps too. A conversation draws its model once, at its index (a
trace conversation's turns keep their rows' sample indices): a conversation stays
on one adapter, as a user of an adapter-served application would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_llmperf.workloads.adapters import AdapterMix, parse_adapters
from pytest_llmperf.workloads.agent_script import AgentScript, AgentSource, Subagent, agents_of
from pytest_llmperf.workloads.base import Sample, Workload, register_request_paths
from pytest_llmperf.workloads.conversations import (
    ConversationScript,
    ConversationSource,
    TurnResult,
    conversations_of,
)
from pytest_llmperf.workloads.output_contract import OutputContract, parse_output_contract

__all__ = [
    "DressedAgentScript",
    "DressedAgents",
    "DressedConversations",
    "DressedScript",
    "DressedSessions",
    "RequestPaths",
    "RequestPathsWorkload",
    "request_paths",
    "wrapper_for",
]

_OWN = frozenset({"inner", "paths", "source", "script", "draw_index"})


@dataclass(frozen=True, slots=True)
class RequestPaths:
    """The served model and output contract every sample of a workload gets."""

    seed: int  # the workload's: adapter draws
    contract: OutputContract | None = None
    mix: AdapterMix | None = None

    def dress(self, sample: Sample, draw_index: int | None = None) -> Sample:
        """``sample`` with its model (drawn at ``draw_index``, default its own index) and
        contract."""
        index = sample.index if draw_index is None else draw_index
        model = self.mix.draw(self.seed, index) if self.mix is not None else None
        return replace(sample, model=model, contract=self.contract)

    def describe(self) -> dict[str, Any]:
        """The report's entries: only the parameters given."""
        out = self.contract.describe() if self.contract is not None else {}
        if self.mix is not None:
            out["adapters"] = self.mix.describe()
        return out


def request_paths(workload: str, seed: int, params: Mapping[str, Any]) -> RequestPaths | None:
    """``structured=, tools=, tool_choice=, adapters=, greedy=`` of workload ``workload``
    (those given in ``params``), checked; None when they ask for nothing."""
    contract = parse_output_contract(
        workload=workload,
        seed=seed,
        structured=params.get("structured"),
        tools=params.get("tools"),
        tool_choice=params.get("tool_choice"),
        greedy=params.get("greedy", False),
    )
    mix = parse_adapters(workload, params.get("adapters"))
    if contract is None and mix is None:
        return None
    return RequestPaths(seed=seed, contract=contract, mix=mix)


@register_request_paths
def wrapper_for(
    workload: str, seed: int, params: Mapping[str, Any]
) -> Callable[[Workload], Workload] | None:
    """The wrapping :func:`~.base.build_workload` applies (None: nothing asked), checked now."""
    paths = request_paths(workload, seed, params)
    if paths is None:
        return None
    return lambda inner: RequestPathsWorkload(inner, paths)


def _forward(obj: Any, inner_attr: str, name: str) -> Any:
    if name.startswith("__") or name in _OWN:  # copy/pickle probes, half-built objects
        raise AttributeError(name)
    return getattr(object.__getattribute__(obj, inner_attr), name)


@dataclass(frozen=True, slots=True)
class RequestPathsWorkload:
    """A workload whose samples carry ``paths``' model and contract; all else is ``inner``'s.

    ``sample(i)`` is ``inner.sample(i)`` with ``model`` = the adapter drawn for
    ``(seed, i)`` (None without adapters) and ``contract``; ``describe()`` adds
    the parameters given; ``conversation_source`` is the inner workload's
    conversations with every turn dressed; any other attribute is the inner workload's.
    """

    inner: Workload
    paths: RequestPaths

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def seed(self) -> int:
        return self.inner.seed

    @property
    def size(self) -> int | None:
        return self.inner.size

    @property
    def contract(self) -> OutputContract | None:
        return self.paths.contract

    @property
    def mix(self) -> AdapterMix | None:
        return self.paths.mix

    def sample(self, index: int) -> Sample:
        return self.paths.dress(self.inner.sample(index))

    def describe(self) -> dict[str, Any]:
        out = {**self.inner.describe(), **self.paths.describe()}
        contract = self.paths.contract
        control = out.get("output_control")
        if contract is not None and contract.checks_output and isinstance(control, str):
            # a checked output goes out without ignore_eos (the client drops it: a server
            # made to decode past the end of the JSON goes on unconstrained)
            out["output_control"] = control.replace(" + ignore_eos", "")
        return out

    @property
    def conversation_source(self) -> ConversationSource | None:
        """The inner workload's conversations (its own, or a trace's), their turns dressed."""
        source = conversations_of(self.inner)
        return None if source is None else DressedConversations(source, self.paths)

    @property
    def session_source(self) -> ConversationSource | None:
        """:attr:`conversation_source` by its name before issue 38 (kept for one release)."""
        return self.conversation_source

    @property
    def agent_source(self) -> AgentSource | None:
        """The inner workload's agentic conversations, every call of every thread dressed."""
        source = agents_of(self.inner)
        return None if source is None else DressedAgents(source, self.paths)

    def __getattr__(self, name: str) -> Any:
        return _forward(self, "inner", name)


@dataclass(frozen=True, slots=True)
class DressedConversations:
    """A :class:`ConversationSource` whose conversations' turns carry ``paths``' model and
    contract."""

    source: ConversationSource
    paths: RequestPaths

    @property
    def count(self) -> int:
        return self.source.count

    @property
    def timed(self) -> bool:
        return self.source.timed

    def conversation(self, index: int) -> ConversationScript:
        return DressedScript(self.source.conversation(index), self.paths)

    session = conversation  # the old spelling, kept for one release

    def place(self, sample_index: int) -> tuple[int, int]:
        return self.source.place(sample_index)

    def describe(self) -> dict[str, Any]:
        return self.source.describe()

    def __getattr__(self, name: str) -> Any:
        return _forward(self, "source", name)


@dataclass(frozen=True, slots=True)
class DressedScript:
    """A :class:`ConversationScript` whose every turn is dressed, the model drawn once for the
    conversation (at its index)."""

    script: ConversationScript
    paths: RequestPaths

    @property
    def index(self) -> int:
        return self.script.index

    @property
    def conversation_id(self) -> str:
        return self.script.conversation_id

    @property
    def session_id(self) -> str:
        """:attr:`conversation_id` by its name before issue 38 (kept for one release)."""
        return self.conversation_id

    @property
    def turns(self) -> int:
        return self.script.turns

    @property
    def tracks_turns(self) -> bool:
        return self.script.tracks_turns

    @property
    def replies(self) -> bool:
        return self.script.replies

    def think_ns(self, k: int) -> int:
        return self.script.think_ns(k)

    def turn(self, k: int, earlier: Sequence[TurnResult]) -> Sample:
        return self.paths.dress(self.script.turn(k, earlier), draw_index=self.script.index)

    def __getattr__(self, name: str) -> Any:
        return _forward(self, "script", name)


@dataclass(frozen=True, slots=True)
class DressedAgents:
    """An :class:`AgentSource` whose threads' calls carry ``paths``' model and contract."""

    source: AgentSource
    paths: RequestPaths

    @property
    def count(self) -> int:
        return self.source.count

    def conversation(self, index: int) -> AgentScript:
        return DressedAgentScript(self.source.conversation(index), self.paths)

    def start_ns(self, index: int, time_scale: float = 1.0) -> int:
        return self.source.start_ns(index, time_scale)

    def describe(self) -> dict[str, Any]:
        return self.source.describe()

    def __getattr__(self, name: str) -> Any:
        return _forward(self, "source", name)


@dataclass(frozen=True, slots=True)
class DressedAgentScript(DressedScript):
    """An :class:`AgentScript` whose calls, warm-up and subagents (recursively) are dressed:
    one draw for the whole tree (the root's index), so a conversation keeps one adapter and
    its prefix stays in one adapter's cache."""

    script: AgentScript
    draw_index: int | None = None

    @property
    def agent_id(self) -> str:
        return self.script.agent_id

    @property
    def first_turn(self) -> int:
        return self.script.first_turn

    def _draw(self) -> int:
        return self.script.index if self.draw_index is None else self.draw_index

    def turn(self, k: int, earlier: Sequence[TurnResult]) -> Sample:
        return self.paths.dress(self.script.turn(k, earlier), draw_index=self._draw())

    def warmup_sample(self) -> Sample | None:
        sample = self.script.warmup_sample()
        return None if sample is None else self.paths.dress(sample, draw_index=self._draw())

    def spawns(self, k: int) -> Sequence[Subagent]:
        return tuple(
            Subagent(
                DressedAgentScript(child.script, self.paths, self._draw()),
                child.offset_ns,
                child.joined,
            )
            for child in self.script.spawns(k)
        )


# The name before issue 38 (docs/conversations.md, "Old spellings"), kept for one release.
DressedSessions = DressedConversations
