"""The scripts the load generator runs, built from recorded :class:`~.model.AgentConversation`\\ s.

:class:`RecordedAgents` is an :class:`~..agent_script.AgentSource`; its
:class:`RecordedThread` scripts are :class:`~..agent_script.AgentScript`\\ s,
one per thread of a conversation's tree (the root, each subagent). Turn ``k``
of a thread is its call ``k``: ``max_tokens`` its ``out`` (with
``ignore_eos`` unless told otherwise), a prompt the server counts as its
``in`` (:mod:`.prompts`), the conversation header (``conversation_header=``)
naming the whole tree on every thread's requests.

Replies (``replies=``, docs/agentic.md "Prompts"):

- ``"server"`` (default): call ``k`` *continues* call ``k - 1`` when the trace
  says it kept that whole prompt (its ``hash_ids`` start with all of call
  ``k - 1``'s full blocks; no hash ids: assumed) and its ``in`` leaves room for
  the reply (``in(k) > in(k-1) + out(k-1)``): it is call ``k - 1``'s messages,
  the server's real reply, and new content (:meth:`.AgentPrompts.continuation`).
  Otherwise (compaction, a fresh context, a thread's first call) it is block
  text. A reply that turns out longer than the room (a server that ignored
  ``max_tokens``) falls back to block text too, counted (``describe()``'s
  ``replies_too_long``).
- ``"trace"``: every call is block text (block-exact, no reply quoted).

Times are as recorded (``think_ns``, :attr:`~..agent_script.Subagent.offset_ns`,
:meth:`RecordedAgents.start_ns` for a trace that records starts): the load
generator scales them by the load's ``time_scale``. ``start="mid"``: each
conversation's root begins at a seeded call in the middle half of its calls
(:attr:`RecordedThread.first_turn`), after :meth:`RecordedThread.warmup_sample`,
the block text of the call before it (``max_tokens`` 1).

``earlier[j]`` is what turn ``j`` got back; after a mid start the turns before
``first_turn`` were never sent, so ``earlier`` may hold placeholders there, or
only the tracked turns' results (``len(earlier) == k - first_turn``): both are
read alike. :meth:`RecordedThread.turn` is a pure function of ``(k, earlier)``; it keeps the
last continuation chain it built (same ``earlier`` objects: no rebuilding), so a
conversation of 300 calls costs one prompt per call.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

from pytest_llmperf.workloads.agent_script import Subagent
from pytest_llmperf.workloads.agentic.model import AgentCall, AgentConversation, AgentThread
from pytest_llmperf.workloads.agentic.prompts import AgentPrompts
from pytest_llmperf.workloads.base import Sample
from pytest_llmperf.workloads.conversations import TurnResult

__all__ = [
    "REPLY_MODES",
    "AgentSettings",
    "PromptTally",
    "RecordedAgents",
    "RecordedThread",
    "ReplyMode",
    "continues",
    "keeps_previous",
    "mid_turn",
]


class ReplyMode(StrEnum):
    """``replies=``: what a call's prompt quotes of the calls before it."""

    SERVER = "server"  # the server's real replies, as conversations=True does
    TRACE = "trace"  # nothing: every prompt is its hash ids' block text


REPLY_MODES = tuple(m.value for m in ReplyMode)


# what stands for the turns before a mid start, never sent (their results are never read)
_UNSENT_TURN = TurnResult("", 0, 0)


class PromptTally:
    """Counts made while prompts are built (this process's), for ``describe()``."""

    def __init__(self) -> None:
        self.too_long = 0
        self.inexact = 0
        self._lock = threading.Lock()

    def add(self, *, too_long: int = 0, inexact: int = 0) -> None:
        with self._lock:
            self.too_long += too_long
            self.inexact += inexact

    def __getstate__(self) -> dict[str, int]:
        return {"too_long": self.too_long, "inexact": self.inexact}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def keeps_previous(prev: AgentCall, call: AgentCall, block_size: int) -> bool:
    """Whether the trace says ``call`` kept ``prev``'s whole prompt (its full blocks)."""
    if not prev.hash_ids or not call.hash_ids:
        return not prev.hash_ids and not call.hash_ids
    full = max(1, prev.input_tokens // block_size)
    full = min(full, len(prev.hash_ids))
    return call.hash_ids[:full] == prev.hash_ids[:full]


def continues(prev: AgentCall, call: AgentCall, block_size: int) -> bool:
    """Server mode: ``call`` is ``prev``'s messages + the reply + new content."""
    return (
        keeps_previous(prev, call, block_size)
        and call.input_tokens > prev.input_tokens + prev.output_tokens
    )


def mid_turn(seed: int, index: int, calls: int) -> int:
    """``start="mid"``: a seeded call in the middle half of ``calls`` (0 for one call)."""
    if calls < 2:
        return 0
    low = max(1, calls // 4)
    high = min(calls - 1, max(low, (3 * calls) // 4))
    return random.Random(f"{seed}:mid:{index}").randint(low, high)


@dataclass(frozen=True)
class AgentSettings:
    """What every thread of a workload shares: prompt makers (one per block size), the
    reply mode, the output controls, the conversation header, the tally."""

    prompts: Mapping[int, AgentPrompts]  # by block size
    mode: ReplyMode
    controls: Mapping[str, Any]
    header: str | None
    tally: PromptTally


@dataclass(frozen=True, eq=False)
class RecordedThread:
    """One thread of a recorded conversation as an :class:`~..agent_script.AgentScript`."""

    index: int
    conversation_id: str
    agent_id: str
    thread: AgentThread
    namespace: str | None  # local hash scope: the conversation's own blocks
    block_size: int
    shared: AgentSettings
    first_turn: int = 0
    _memo: dict[int, tuple[tuple[TurnResult, ...], Sample]] = field(
        default_factory=dict, repr=False, compare=False
    )

    # -- ConversationScript ----------------------------------------------------------

    @property
    def turns(self) -> int:
        return len(self.thread.calls)

    @property
    def tracks_turns(self) -> bool:
        return True

    @property
    def replies(self) -> bool:
        return self.shared.mode is ReplyMode.SERVER

    def think_ns(self, k: int) -> int:
        return self.thread.calls[k].wait_ns if k >= 1 else 0

    # -- AgentScript -----------------------------------------------------------------

    def spawns(self, k: int) -> tuple[Subagent, ...]:
        return self._children.get(k, ())

    @cached_property
    def _children(self) -> dict[int, tuple[Subagent, ...]]:
        out: dict[int, list[Subagent]] = {}
        for spawn in self.thread.spawns:
            path = (
                f"{self.agent_id}/{spawn.thread.agent_id}"
                if self.agent_id
                else (spawn.thread.agent_id)
            )
            child = RecordedThread(
                self.index,
                self.conversation_id,
                path,
                spawn.thread,
                self.namespace,
                self.block_size,
                self.shared,
            )
            out.setdefault(spawn.after, []).append(Subagent(child, spawn.offset_ns, spawn.joined))
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def _continues(self) -> tuple[bool, ...]:
        calls = self.thread.calls
        if self.shared.mode is not ReplyMode.SERVER:
            return (False,) * len(calls)
        return (
            False,
            *(continues(calls[k - 1], calls[k], self.block_size) for k in range(1, len(calls))),
        )

    def warmup_sample(self) -> Sample | None:
        if self.first_turn <= 0:
            return None
        k = self.first_turn - 1
        call = self.thread.calls[k]
        text, _ = self._prompts.blocks(self._ids(call), call.input_tokens, self._key(k))
        return self._sample(text, (), call.input_tokens, 1)

    def turn(self, k: int, earlier: Sequence[TurnResult]) -> Sample:
        if self.first_turn and len(earlier) == k - self.first_turn < k:
            # only the tracked turns' results: put them at their turns' places
            earlier = ((_UNSENT_TURN,) * self.first_turn) + tuple(earlier)
        if k >= 1 and self._continues[k] and k - 1 >= self.first_turn and len(earlier) >= k:
            # back to the last turn built with these replies (or the chain's first call,
            # block text), then forward: each turn builds on the one before it
            start = k
            while start > self.first_turn and self._continues[start]:
                memo = self._memo.get(start - 1)
                if memo is not None and memo[0] == tuple(earlier[: start - 1]):
                    break
                start -= 1
            made: Sample | None = None
            for j in range(start, k + 1):  # the chain's earlier turns come from the memo
                made = self._turn(j, earlier)
            assert made is not None
            return made
        return self._turn(k, earlier)

    # -- building ----------------------------------------------------------------------

    @property
    def _prompts(self) -> AgentPrompts:
        return self.shared.prompts[self.block_size]

    def _ids(self, call: AgentCall) -> tuple[int, ...]:
        return self._prompts.block_ids(self.namespace, call.hash_ids)

    def _key(self, k: int) -> str:
        return f"{self.conversation_id}:{self.agent_id}:{k}"

    def _turn(self, k: int, earlier: Sequence[TurnResult]) -> Sample:
        seen = tuple(earlier[:k])
        memo = self._memo.get(k)
        if memo is not None and memo[0] == seen:
            return memo[1]
        call = self.thread.calls[k]
        sample: Sample | None = None
        if k >= 1 and self._continues[k] and k - 1 >= self.first_turn and len(earlier) >= k:
            before = self._turn(k - 1, earlier)  # from the memo when the chain came in order
            sample = self._continued(k, call, before, earlier[k - 1])
        if sample is None:
            text, exact = self._prompts.blocks(self._ids(call), call.input_tokens, self._key(k))
            if not exact:
                self.shared.tally.add(inexact=1)
            sample = self._sample(text, (), call.input_tokens, call.output_tokens)
        self._memo[k] = (seen, sample)
        self._memo.pop(k - 2, None)  # keep the chain's tail only
        return sample

    def _continued(
        self, k: int, call: AgentCall, before: Sample, reply: TurnResult
    ) -> Sample | None:
        history = (*before.history, {"role": "user", "content": before.prompt})
        roles = tuple(m["role"] for m in history)
        prev = self.thread.calls[k - 1]
        full = min(len(prev.hash_ids), max(1, prev.input_tokens // self.block_size))
        tail = self._ids(call)[full:] if prev.hash_ids else self._ids(call)
        made = self._prompts.continuation(
            roles, reply.prompt_tokens, reply.reply, tail, call.input_tokens, self._key(k)
        )
        if made is None:
            self.shared.tally.add(too_long=1)
            return None
        if not made.exact:
            self.shared.tally.add(inexact=1)
        history = (*history, {"role": "assistant", "content": reply.reply})
        return self._sample(made.text, history, call.input_tokens, call.output_tokens)

    def _sample(
        self, text: str, history: tuple[Mapping[str, str], ...], n_in: int, n_out: int
    ) -> Sample:
        header = self.shared.header
        return Sample(
            index=self.index,
            prompt=text,
            input_tokens=n_in,
            max_tokens=max(1, n_out),
            history=history,
            extra_body=self.shared.controls,
            headers={header: self.conversation_id} if header else {},
        )


@dataclass(frozen=True)
class RecordedAgents:
    """Recorded conversations as an :class:`~..agent_script.AgentSource`.

    ``count`` conversations: the first ``count`` of ``recorded``, repeated when
    ``count`` is larger (round ``r > 0`` of id ``x`` is ``x~r``, with blocks of its
    own under local hash scope). ``stagger_ns`` spaces the starts when the input
    records none (every ``start_ns`` 0), and the rounds of one that does.
    """

    recorded: tuple[AgentConversation, ...]
    count: int
    shared: AgentSettings
    stagger_ns: int
    mid: bool = False
    seed: int = 0

    @cached_property
    def timed(self) -> bool:
        """Whether the input records when each conversation started."""
        return any(c.start_ns for c in self.recorded)

    def conversation(self, index: int) -> RecordedThread:
        rounds, u = divmod(index, len(self.recorded))
        conv = self.recorded[u]
        cid = conv.conversation_id if not rounds else f"{conv.conversation_id}~{rounds}"
        first = mid_turn(self.seed, index, len(conv.root.calls)) if self.mid else 0
        return RecordedThread(
            index,
            cid,
            "",
            conv.root,
            # local scope: blocks of its own per conversation and round (ids may repeat)
            None if conv.shared_hashes else f"{u}~{rounds}",
            conv.block_size,
            self.shared,
            first,
        )

    def start_ns(self, index: int, time_scale: float = 1.0) -> int:
        if not self.timed:
            return index * self.stagger_ns
        rounds, u = divmod(index, len(self.recorded))
        period = max(c.start_ns for c in self.recorded) * time_scale + self.stagger_ns
        return round(rounds * period + self.recorded[u].start_ns * time_scale)

    def describe(self) -> dict[str, Any]:
        threads = [t for c in self.recorded for _, t in c.root.walk()]
        calls = [call for t in threads for call in t.calls]
        planned = sum(
            continues(t.calls[k - 1], t.calls[k], c.block_size)
            for c in self.recorded
            for _, t in c.root.walk()
            for k in range(1, len(t.calls))
        )
        out: dict[str, Any] = {
            "conversations": self.count,
            "recorded_conversations": len(self.recorded),
            "calls": len(calls),
            "threads": len(threads),
            "subagents": len(threads) - len(self.recorded),
            "background_subagents": sum(
                not s.joined for c in self.recorded for _, t in c.root.walk() for s in t.spawns
            ),
            "dropped_spawns": sum(c.dropped_spawns for c in self.recorded),
            "distinct_hash_ids": len({h for call in calls for h in call.hash_ids}),
            "block_size": sorted({c.block_size for c in self.recorded}),
            "hash_id_scope": sorted(
                {"global" if c.shared_hashes else "local" for c in self.recorded}
            ),
            "replies": self.shared.mode.value,
            "start": "mid" if self.mid else "first call",
            "starts": "recorded" if self.timed else f"every {self.stagger_ns / 1e9:g} s",
        }
        if self.shared.mode is ReplyMode.SERVER:
            out["calls_quoting_reply"] = planned
            out["calls_from_blocks"] = len(calls) - planned
        out["replies_too_long"] = self.shared.tally.too_long
        out["inexact_prompts"] = self.shared.tally.inexact
        notes = sorted({n for c in self.recorded for n in c.notes})
        if notes:
            out["notes"] = notes
        return out
