"""Synthetic agentic conversations: ``llm_workload("agentic", turns=..., subagents=...)``.

A suite with no trace still wants the traffic a coding agent makes: a root agent
whose every call quotes its previous prompt, the server's reply and a tool result,
a tool wait between calls, and now and then a fan-out of subagents that share the
root's system prompt. This module *generates* such conversations as
:class:`~.model.AgentConversation` values, seeded, so they replay through the
same scripts as a recorded trace (:mod:`.scripts`): one replay engine for both.

The shape (docs/agentic.md, "Synthetic agents"):

- every thread's first prompt is the conversation's system prompt
  (``system_prompt_tokens``, the same KV blocks in every thread of the conversation,
  and in every conversation with ``shared_system_prompt=True``) plus a task drawn
  from ``context_growth``; call ``k + 1``'s prompt is call ``k``'s prompt, its
  output and ``context_growth`` new tokens (the tool result);
- ``tool_time`` is the wait before every call but a thread's first;
- ``subagents``: at ``spawns`` of the root's calls (never its last) ``width``
  subagents are launched together, each ``turns`` calls long; a ``background``
  share of them is not waited for.

Hash ids follow the growth block-exactly: call ``k + 1`` keeps call ``k``'s full
blocks and gets new ids for the rest. The recorded times (``t_ns``) are a nominal
timeline (:func:`nominal_api_ns`: a server prefilling at 50k tok/s and decoding at
100 tok/s); the replay paces by the waits, not by them. Tool waits are drawn to the
millisecond, so every time is a whole number of milliseconds (the sample traces
written from these conversations read back exactly in every format).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.agentic.model import (
    AgentCall,
    AgentConversation,
    AgentSpawn,
    AgentThread,
)
from pytest_llmperf.workloads.conversations import ThinkTime, think_time
from pytest_llmperf.workloads.params import TokenRange, fraction, positive_int, token_range

__all__ = [
    "AgenticParams",
    "SubagentParams",
    "agentic_params",
    "nominal_api_ns",
    "synthetic_conversations",
]

WORKLOAD = "agentic"
SUBAGENT_KEYS = ("spawns", "width", "turns", "background")
DEFAULT_TOOL_TIME = ThinkTime("exponential", 0.2)


def _usage(message: str) -> LlmPerfUsageError:
    return LlmPerfUsageError(f"workload {WORKLOAD!r}: {message}")


@dataclass(frozen=True, slots=True)
class SubagentParams:
    """``subagents=``: fan-outs per root thread, subagents per fan-out, calls per
    subagent, and the share of subagents nobody waits for."""

    spawns: TokenRange = (0, 0)
    width: TokenRange = (1, 1)
    turns: TokenRange = (2, 4)
    background: float = 0.0

    def describe(self) -> dict[str, Any]:
        return {
            "spawns": list(self.spawns),
            "width": list(self.width),
            "turns": list(self.turns),
            "background": self.background,
        }


DEFAULT_SUBAGENTS = SubagentParams(spawns=(1, 1), width=(2, 2))


@dataclass(frozen=True, slots=True)
class AgenticParams:
    """The synthetic agentic workload's parameters, checked (see the module docstring)."""

    conversations: int = 4
    turns: TokenRange = (4, 8)
    subagents: SubagentParams = DEFAULT_SUBAGENTS
    tool_time: ThinkTime = DEFAULT_TOOL_TIME
    context_growth: TokenRange = (100, 400)
    system_prompt_tokens: int = 1024
    shared_system_prompt: bool = False
    output_tokens: TokenRange = (16, 64)
    max_input_tokens: int | None = None
    stagger_s: float = 0.5
    block_size: int = 64

    def describe(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "turns": list(self.turns),
            "subagents": self.subagents.describe(),
            "tool_time": self.tool_time.describe(),
            "context_growth": list(self.context_growth),
            "system_prompt_tokens": self.system_prompt_tokens,
            "shared_system_prompt": self.shared_system_prompt,
            "output_tokens": list(self.output_tokens),
            "max_input_tokens": self.max_input_tokens,
            "stagger": self.stagger_s,
            "block_size": self.block_size,
        }


def _range(name: str, value: Any, *, minimum: int = 1) -> TokenRange:
    try:
        low, high = token_range(name, value) if minimum >= 1 else _zero_range(name, value)
    except LlmPerfUsageError as exc:
        raise _usage(str(exc)) from None
    return (low, high)


def _zero_range(name: str, value: Any) -> TokenRange:
    """:func:`token_range` that also takes 0 (``spawns=0``: no subagents)."""
    if value == 0 and not isinstance(value, bool):
        return (0, 0)
    if isinstance(value, (tuple, list)) and len(value) == 2 and value[0] == 0:
        return (0, token_range(f"{name}[1]", value[1])[1])
    return token_range(name, value)


def _subagents(value: Any) -> SubagentParams:
    if value is None or (value == 0 and not isinstance(value, bool)):
        return SubagentParams()
    if isinstance(value, int) and not isinstance(value, bool):
        return SubagentParams(spawns=_range("subagents", value), width=(2, 2))
    if not isinstance(value, Mapping):
        raise _usage(
            "subagents must be 0, a number of fan-outs per conversation, or a dict with "
            f"{', '.join(repr(k) for k in SUBAGENT_KEYS)}; got {value!r}"
        )
    extra = sorted(set(map(str, value)) - set(SUBAGENT_KEYS))
    if extra:
        raise _usage(
            f"subagents does not take {', '.join(repr(k) for k in extra)}; it takes "
            f"{', '.join(repr(k) for k in SUBAGENT_KEYS)} (got {dict(value)!r})"
        )
    default = DEFAULT_SUBAGENTS
    return SubagentParams(
        spawns=_range("subagents['spawns']", value.get("spawns", 1), minimum=0),
        width=_range("subagents['width']", value.get("width", default.width)),
        turns=_range("subagents['turns']", value.get("turns", default.turns)),
        background=_fraction("subagents['background']", value.get("background", 0.0)),
    )


def _fraction(name: str, value: Any) -> float:
    try:
        return fraction(name, value)
    except LlmPerfUsageError as exc:
        raise _usage(str(exc)) from None


def _positive(name: str, value: Any, *, minimum: int = 1) -> int:
    try:
        return positive_int(name, value, minimum=minimum)
    except LlmPerfUsageError as exc:
        raise _usage(str(exc)) from None


def _tool_time(value: Any) -> ThinkTime:
    """``tool_time=``: seconds, or a ``{"distribution": ...}`` dict as ``think_time=`` takes."""
    try:
        return think_time(value)
    except LlmPerfUsageError as exc:
        raise _usage(str(exc).replace("think_time", "tool_time")) from None


def agentic_params(
    *,
    conversations: Any = 4,
    turns: Any = (4, 8),
    subagents: Any = None,
    tool_time: Any = None,
    context_growth: Any = (100, 400),
    system_prompt_tokens: Any = 1024,
    shared_system_prompt: Any = False,
    output_tokens: Any = (16, 64),
    max_input_tokens: Any = None,
    stagger: Any = 0.5,
    block_size: Any = 64,
) -> AgenticParams:
    """The parameters checked; a bad one is a usage error naming the workload and it.

    ``subagents=None`` and ``tool_time=None`` are the defaults (one fan-out of two
    subagents per conversation; exponential tool waits, mean 0.2 s).
    """
    if not isinstance(shared_system_prompt, bool):
        raise _usage(f"shared_system_prompt must be True or False, got {shared_system_prompt!r}")
    if (
        isinstance(stagger, bool)
        or not isinstance(stagger, (int, float))
        or not 0 <= stagger < float("inf")
    ):
        raise _usage(f"stagger must be a number of seconds >= 0, got {stagger!r}")
    return AgenticParams(
        conversations=_positive("conversations", conversations),
        turns=_range("turns", turns),
        subagents=DEFAULT_SUBAGENTS if subagents is None else _subagents(subagents),
        tool_time=DEFAULT_TOOL_TIME if tool_time is None else _tool_time(tool_time),
        context_growth=_range("context_growth", context_growth),
        system_prompt_tokens=_positive("system_prompt_tokens", system_prompt_tokens, minimum=0),
        shared_system_prompt=shared_system_prompt,
        output_tokens=_range("output_tokens", output_tokens),
        max_input_tokens=(
            None if max_input_tokens is None else _positive("max_input_tokens", max_input_tokens)
        ),
        stagger_s=float(stagger),
        block_size=_positive("block_size", block_size),
    )


def nominal_api_ns(input_tokens: int, output_tokens: int) -> int:
    """How long a call takes on the nominal timeline: 20 ms, 20 us per prompt token,
    10 ms per output token, to the millisecond (the recorded ``api_ns`` of the
    project's sample traces)."""
    return round(20_000_000 + 20_000 * input_tokens + 10_000_000 * output_tokens, -6)


class _Blocks:
    """Hash ids for growing prompts: a prompt keeps the full blocks of the prompt it
    extends and gets fresh ids for the rest (the last, partial block included)."""

    def __init__(self, counter: Iterator[int], block_size: int) -> None:
        self._next = counter
        self.block_size = block_size

    def extend(self, kept: tuple[int, ...], kept_tokens: int, total: int) -> tuple[int, ...]:
        full = min(len(kept), kept_tokens // self.block_size)
        fresh = -(-total // self.block_size) - full
        return (*kept[:full], *(next(self._next) for _ in range(fresh)))


@dataclass
class _Gen:
    """One conversation's draws (``rng``) and block ids."""

    params: AgenticParams
    rng: random.Random
    blocks: _Blocks
    system: tuple[int, ...]
    where: str
    cut: int = 0

    def draw(self, bounds: TokenRange) -> int:
        return self.rng.randint(*bounds)

    def thread(self, agent_id: str, calls: int, start_ns: int, *, root: bool) -> AgentThread:
        p = self.params
        out: list[AgentCall] = []
        spawns: list[AgentSpawn] = []
        fanouts: set[int] = set()
        if root and calls > 1:
            count = min(self.draw(p.subagents.spawns), calls - 1)
            fanouts = set(self.rng.sample(range(calls - 1), count))
        size = p.system_prompt_tokens
        hashes = self.system
        t_ns, wait_ns, ready_ns = start_ns, 0, start_ns
        for k in range(calls):
            grown = size + (out[-1].output_tokens if out else 0) + self.draw(p.context_growth)
            if p.max_input_tokens is not None and grown > p.max_input_tokens:
                self.cut += calls - k
                break
            hashes = self.blocks.extend(hashes, size, grown)
            output = self.draw(p.output_tokens)
            if k:
                wait_ns = round(p.tool_time.draw_ns(self.rng), -6)  # to the millisecond
                t_ns = ready_ns + wait_ns
            call = AgentCall(
                t_ns=t_ns,
                input_tokens=grown,
                output_tokens=output,
                hash_ids=hashes,
                api_ns=nominal_api_ns(grown, output),
                wait_ns=wait_ns,
                model="",
                where=f"{self.where} {agent_id or 'root'} call {k}",
            )
            out.append(call)
            size = grown
            ready_ns = t_ns + (call.api_ns or 0)
            if k in fanouts:
                joined_end = ready_ns
                for j in range(self.draw(p.subagents.width)):
                    child_id = f"sub{k}-{j}"
                    child = self.thread(
                        child_id, self.draw(p.subagents.turns), ready_ns, root=False
                    )
                    joined = self.rng.random() >= p.subagents.background
                    spawns.append(AgentSpawn(after=k, offset_ns=0, thread=child, joined=joined))
                    if joined and child.calls:
                        last = child.calls[-1]
                        joined_end = max(joined_end, last.t_ns + (last.api_ns or 0))
                ready_ns = joined_end
        return AgentThread(agent_id=agent_id, calls=tuple(out), spawns=tuple(spawns))


def synthetic_conversations(params: AgenticParams, seed: int) -> list[AgentConversation]:
    """``params.conversations`` conversations, a pure function of ``(params, seed)``.

    Hash ids are unique across the list (one counter), so equal ids are equal blocks
    in every conversation; only ``shared_system_prompt=True`` makes conversations
    share any (their system prompt's full blocks).
    """
    counter = itertools.count()
    blocks = _Blocks(counter, params.block_size)
    n_system = params.system_prompt_tokens // params.block_size
    common = tuple(next(counter) for _ in range(n_system)) if params.shared_system_prompt else ()
    result = []
    for i in range(params.conversations):
        system = common or tuple(next(counter) for _ in range(n_system))
        gen = _Gen(
            params,
            random.Random(f"{seed}:agentic:{i}"),
            blocks,
            system,
            where=f"workload 'agentic' conversation {i}",
        )
        root = gen.thread("", gen.draw(params.turns), 0, root=True)
        notes = (f"{gen.cut} calls cut by max_input_tokens={params.max_input_tokens}",)
        result.append(
            AgentConversation(
                conversation_id=f"agentic-{seed}-{i}",
                root=root,
                start_ns=round(i * params.stagger_s * 1000) * 1_000_000,
                block_size=params.block_size,
                shared_hashes=params.shared_system_prompt,
                source=f"synthetic (seed {seed})",
                notes=notes if gen.cut else (),
            )
        )
    return result
