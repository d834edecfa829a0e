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
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.agentic.model import (
    AgentCall,
    AgentConversation,
    AgentSpawn,
    AgentThread,
)
from pytest_llmperf.workloads.agentic.prompts import AgentPrompts
from pytest_llmperf.workloads.agentic.scripts import (
    REPLY_MODES,
    AgentSettings,
    PromptTally,
    RecordedAgents,
    ReplyMode,
)
from pytest_llmperf.workloads.agentic.synthetic_params import (
    WORKLOAD,
    AgenticParams,
    SubagentParams,
    agentic_params,
)
from pytest_llmperf.workloads.base import Sample, register_workload
from pytest_llmperf.workloads.conversations import conversation_header as parse_header
from pytest_llmperf.workloads.corpus import default_corpus
from pytest_llmperf.workloads.params import TokenRange, output_controls
from pytest_llmperf.workloads.tokenizer import Tokenizer, describe_tokenizer, resolve_tokenizer

__all__ = [
    "AgenticParams",
    "SubagentParams",
    "SyntheticAgentsWorkload",
    "agentic",
    "agentic_params",
    "nominal_api_ns",
    "synthetic_conversations",
]


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


# -- the workload --------------------------------------------------------------------


@dataclass(frozen=True)
class SyntheticAgentsWorkload:
    """``llm_workload("agentic", ...)``: generated conversations, replayed as a trace's.

    ``agent_source`` is the same :class:`~.scripts.RecordedAgents` a Weka trace
    gets, so the load generator cannot tell them apart; ``sample(i)`` is
    conversation ``i``'s first tracked call alone (what a preflight sends), as sample ``i``.
    """

    seed: int
    params: AgenticParams
    tokenizer: Tokenizer
    agent_source: RecordedAgents
    name: str = WORKLOAD

    @property
    def size(self) -> int:
        return self.agent_source.count

    def sample(self, index: int) -> Sample:
        script = self.agent_source.conversation(index % self.size)
        return replace(script.turn(script.first_turn, []), index=index)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            **self.agent_source.describe(),
            "generated": self.params.describe(),
            "content": "prose runs from the bundled corpus; equal hash_ids, equal blocks",
            "output_control": "max_tokens"
            + ("" if self.agent_source.shared.controls else " + ignore_eos"),
            **describe_tokenizer(self.tokenizer),
        }


@register_workload(WORKLOAD)
def agentic(
    *,
    seed: int = 0,
    conversations: Any = 4,
    turns: Any = (4, 8),
    subagents: Any = None,
    tool_time: Any = None,
    context_growth: Any = (100, 400),
    system_prompt_tokens: Any = 1024,
    shared_system_prompt: Any = False,
    output_tokens: Any = (16, 64),
    max_input_tokens: Any = None,
    block_size: Any = 64,
    start: Any = None,
    replies: Any = ReplyMode.SERVER.value,
    tokenizer: Any = None,
    ignore_eos: Any = True,
    conversation_header: Any = None,
) -> SyntheticAgentsWorkload:
    """Seeded agentic conversations (docs/agentic.md, "Synthetic agents").

    The shape parameters are :func:`~.synthetic_params.agentic_params`'; ``start="mid"``,
    ``replies=``, ``conversation_header=`` and ``tokenizer=`` are as for an agentic
    trace (``llm_load("trace", format="weka", ...)``).
    """
    params = agentic_params(
        conversations=conversations,
        turns=turns,
        subagents=subagents,
        tool_time=tool_time,
        context_growth=context_growth,
        system_prompt_tokens=system_prompt_tokens,
        shared_system_prompt=shared_system_prompt,
        output_tokens=output_tokens,
        max_input_tokens=max_input_tokens,
        stagger=0,  # an open or closed loop starts conversations at its own arrivals and slots
        block_size=block_size,
    )
    if start not in (None, "mid"):
        raise LlmPerfUsageError(
            f"workload {WORKLOAD!r}: start must be 'mid' (begin each conversation part-way, "
            f"after a cache warm-up) or None, got {start!r}"
        )
    if replies not in REPLY_MODES:
        raise LlmPerfUsageError(
            f"workload {WORKLOAD!r}: replies must be one of "
            f"{', '.join(map(repr, REPLY_MODES))}, got {replies!r}"
        )
    try:
        controls = output_controls(ignore_eos)
        header = parse_header(conversation_header)
    except LlmPerfUsageError as exc:
        raise LlmPerfUsageError(f"workload {WORKLOAD!r}: {exc}") from None
    tok = resolve_tokenizer(tokenizer)
    prompts = {params.block_size: AgentPrompts(tok, default_corpus(), seed, params.block_size)}
    shared = AgentSettings(prompts, ReplyMode(replies), controls, header, PromptTally())
    recorded = tuple(synthetic_conversations(params, seed))
    source = RecordedAgents(
        recorded=recorded,
        count=len(recorded),
        shared=shared,
        stagger_ns=0,
        mid=start == "mid",
        seed=seed,
    )
    return SyntheticAgentsWorkload(seed, params, tok, source)
