"""What an agent feels: per-conversation figures of a run (docs/measurement.md,
"Agentic conversations").

A *conversation* is the requests that share ``record.conversation`` (>= 0): a
multi-turn chat's turns, or an agent's tree of threads (``record.agent``, ``""``
the root) with its subagents. For each conversation whose every tracked call
completed:

- ``makespan`` (incl. tools): the first call's planned send (``t_sched``) to the
  last byte of any of its calls (``t_end``), over all threads — what the user of
  the agent waits, tool and think time included;
- ``makespan_excl_tools``: the time at least one of its calls was in flight, the
  length of the union of its calls' ``[t_send, t_end]`` intervals — the model
  server's share of that wait (tool waits, think time and the client's own
  scheduling delay before a send are out; overlapping subagent calls count once);
- ``fan_out``: the most of its calls in flight at one instant (an interval's end
  and another's start at the same nanosecond do not overlap), and ``threads``: how
  many threads (root and subagents) it ran;
- affinity, over its calls whose ``replica`` is known (``""`` = not attributed):
  consecutive calls by send time, within each thread and across the whole tree,
  and how many of those pairs reached the same replica.

A conversation with a failed or cancelled call counts in ``failed`` and enters
none of the histograms (a failed request enters no latency histogram either).

Streaming and memory: a conversation holds only its calls' send/end instants and
small thread/replica numbers (a few dozen bytes a call, nothing per token event)
until :meth:`ConversationTracker.end` folds it into the histograms; the load
generator may call that when it knows a conversation is over, and every reading
(:meth:`ConversationTracker.stats`, :meth:`ConversationTracker.to_state`) folds
what is still open into a copy without changing it, so a conversation that is
read mid-run keeps growing. A conversation's calls must reach one tracker: two
parts of one conversation merged from two processes count as two conversations.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.specs.conversation_names import (
    PROMPT_BANDS,
    TURN_BANDS,
    prompt_band,
    turn_band,
)

__all__ = [
    "CONVERSATION_HISTOGRAMS",
    "PROMPT_BANDS",
    "TURN_BANDS",
    "ConversationStats",
    "ConversationTracker",
    "prompt_band",
    "turn_band",
]

# The conversation latency metrics (ms), as SLOs name them: conversation.makespan.p90
CONVERSATION_HISTOGRAMS: tuple[str, ...] = ("makespan", "makespan_excl_tools")


@dataclass(slots=True)
class _Open:
    """One conversation's calls so far: parallel arrays, one entry a call."""

    first_sched: int
    sends: array[int] = field(default_factory=lambda: array("q"))
    ends: array[int] = field(default_factory=lambda: array("q"))
    threads: array[int] = field(default_factory=lambda: array("l"))  # index in thread_names
    replicas: array[int] = field(default_factory=lambda: array("l"))  # -1: not attributed
    thread_names: dict[str, int] = field(default_factory=dict)
    failed: bool = False


@dataclass
class ConversationStats:
    """The folded figures of a run's conversations (mergeable, JSON-able state)."""

    conversations: int = 0  # whose every call completed (the histograms' population)
    failed: int = 0  # with a failed or cancelled call
    calls: int = 0  # the calls of the completed conversations
    makespan: LatencyHistogram = field(default_factory=LatencyHistogram)
    makespan_excl_tools: LatencyHistogram = field(default_factory=LatencyHistogram)
    fan_out: Counter[int] = field(default_factory=Counter)  # most in flight -> conversations
    threads: Counter[int] = field(default_factory=Counter)  # threads -> conversations
    thread_pairs: int = 0  # consecutive attributed calls within a thread ...
    thread_same: int = 0  # ... that reached the same replica
    tree_pairs: int = 0  # consecutive attributed calls across the tree (by send time) ...
    tree_same: int = 0  # ... on the same replica
    attributed: int = 0  # conversations with at least one attributed pair in a thread
    one_replica: int = 0  # ... whose attributed calls all reached one replica

    def histogram(self, name: str) -> LatencyHistogram:
        """``makespan`` or ``makespan_excl_tools``."""
        if name not in CONVERSATION_HISTOGRAMS:
            raise KeyError(name)
        hist: LatencyHistogram = getattr(self, name)
        return hist

    @property
    def same_replica_rate(self) -> float | None:
        """Consecutive calls of a thread that reached the same replica, of those whose
        replica is known (None: no such pair)."""
        return self.thread_same / self.thread_pairs if self.thread_pairs else None

    @property
    def tree_same_replica_rate(self) -> float | None:
        return self.tree_same / self.tree_pairs if self.tree_pairs else None

    def add_conversation(self, conv: _Open) -> None:
        """Fold one conversation's calls into the figures."""
        n = len(conv.sends)
        if conv.failed or not n:
            self.failed += 1
            return
        self.conversations += 1
        self.calls += n
        order = sorted(range(n), key=lambda i: (conv.sends[i], conv.ends[i]))
        self.makespan.record_ns(max(conv.ends) - conv.first_sched)
        self.makespan_excl_tools.record_ns(_union_ns(conv, order))
        self.fan_out[_most_in_flight(conv)] += 1
        self.threads[len(conv.thread_names)] += 1
        self._add_affinity(conv, order)

    def _add_affinity(self, conv: _Open, order: list[int]) -> None:
        last_in_thread: dict[int, int] = {}
        last_anywhere = -1
        pairs = same = 0
        seen: set[int] = set()
        for i in order:
            replica = conv.replicas[i]
            if replica < 0:
                continue
            seen.add(replica)
            thread = conv.threads[i]
            before = last_in_thread.get(thread)
            if before is not None:
                pairs += 1
                same += before == replica
            last_in_thread[thread] = replica
            if last_anywhere >= 0:
                self.tree_pairs += 1
                self.tree_same += last_anywhere == replica
            last_anywhere = replica
        self.thread_pairs += pairs
        self.thread_same += same
        if pairs:
            self.attributed += 1
            self.one_replica += len(seen) == 1

    def merge(self, other: ConversationStats) -> None:
        self.makespan.merge(other.makespan)
        self.makespan_excl_tools.merge(other.makespan_excl_tools)
        self.fan_out.update(other.fan_out)
        self.threads.update(other.threads)
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def copy(self) -> ConversationStats:
        out = ConversationStats()
        out.merge(self)
        return out

    def summary(self) -> dict[str, Any]:
        """The JSON report's ``runs[].conversations`` object (ms; shares as fractions)."""
        out: dict[str, Any] = {"count": self.conversations, "failed": self.failed}
        out["calls"] = self.calls
        out["calls_mean"] = (
            round(self.calls / self.conversations, 3) if self.conversations else None
        )
        out["makespan"] = self.makespan.summary()
        out["makespan_excl_tools"] = self.makespan_excl_tools.summary()
        out["fan_out"] = _count_summary(self.fan_out)
        out["threads"] = _count_summary(self.threads)
        out["affinity"] = {
            "same_replica_rate": _share(self.thread_same, self.thread_pairs),
            "pairs": self.thread_pairs,
            "tree_same_replica_rate": _share(self.tree_same, self.tree_pairs),
            "tree_pairs": self.tree_pairs,
            "attributed": self.attributed,
            "one_replica": self.one_replica,
        }
        return out

    def to_state(self) -> dict[str, Any]:
        return {
            "counts": {name: getattr(self, name) for name in _COUNTS},
            "makespan": self.makespan.to_state(),
            "makespan_excl_tools": self.makespan_excl_tools.to_state(),
            "fan_out": {str(k): v for k, v in self.fan_out.items()},
            "threads": {str(k): v for k, v in self.threads.items()},
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ConversationStats:
        out = cls()
        for name, value in state.get("counts", {}).items():
            if name in _COUNTS:
                setattr(out, name, int(value))
        for name in CONVERSATION_HISTOGRAMS:
            if name in state:
                setattr(out, name, LatencyHistogram.from_state(state[name]))
        out.fan_out.update({int(k): int(v) for k, v in state.get("fan_out", {}).items()})
        out.threads.update({int(k): int(v) for k, v in state.get("threads", {}).items()})
        return out


_COUNTS = (
    "conversations",
    "failed",
    "calls",
    "thread_pairs",
    "thread_same",
    "tree_pairs",
    "tree_same",
    "attributed",
    "one_replica",
)


class ConversationTracker:
    """The conversations of one run, fed record by record (tracked records only)."""

    def __init__(self) -> None:
        self.closed = ConversationStats()
        self.open: dict[int, _Open] = {}
        self._replica_ids: dict[str, int] = {}
        self._folded: ConversationStats | None = None  # stats() until the next change

    def add(self, record: RequestRecord) -> None:
        """One finished call of conversation ``record.conversation`` (>= 0)."""
        self._folded = None
        conv = self.open.get(record.conversation)
        if conv is None:
            conv = self.open[record.conversation] = _Open(record.t_sched)
        elif record.t_sched < conv.first_sched:
            conv.first_sched = record.t_sched
        if record.cancelled or not record.ok or not record.t_send:
            conv.failed = True
            return
        conv.sends.append(record.t_send)
        conv.ends.append(record.t_end or record.t_last or record.t_send)
        thread = conv.thread_names.setdefault(record.agent, len(conv.thread_names))
        conv.threads.append(thread)
        if record.replica:
            replica = self._replica_ids.setdefault(record.replica, len(self._replica_ids))
        else:
            replica = -1
        conv.replicas.append(replica)

    def end(self, conversation: int) -> None:
        """Conversation ``conversation`` is over: fold it and drop its calls."""
        conv = self.open.pop(conversation, None)
        if conv is not None:
            self._folded = None
            self.closed.add_conversation(conv)

    def stats(self) -> ConversationStats:
        """Every conversation so far, the open ones folded into a copy as if over (kept
        until the next call arrives: a report reads it several times). Read only."""
        if not self.open:
            return self.closed
        if self._folded is None:
            out = self.closed.copy()
            for conv in self.open.values():
                out.add_conversation(conv)
            self._folded = out
        return self._folded

    def merge(self, other: ConversationTracker) -> None:
        """Add another tracker's conversations (another process's or test's: their
        conversation numbers are their own, so its open ones are folded, not joined)."""
        self._folded = None
        self.closed.merge(other.stats())

    def __bool__(self) -> bool:
        return bool(self.open) or bool(self.closed.conversations or self.closed.failed)

    def to_state(self) -> dict[str, Any]:
        return self.stats().to_state()

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ConversationTracker:
        out = cls()
        out.closed = ConversationStats.from_state(state)
        return out


def _union_ns(conv: _Open, order: list[int]) -> int:
    """The length of the union of the calls' ``[send, end]`` intervals."""
    total = 0
    start = end = -1
    for i in order:
        s, e = conv.sends[i], conv.ends[i]
        if s > end:
            total += end - start
            start, end = s, e
        elif e > end:
            end = e
    return total + end - start


def _most_in_flight(conv: _Open) -> int:
    """The most calls in flight at one instant (an end before a start at a tie)."""
    events = sorted([(e, -1) for e in conv.ends] + [(s, 1) for s in conv.sends])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def _count_summary(counts: Counter[int]) -> dict[str, Any]:
    """``{"max", "p50", "mean"}`` of a small exact distribution (None where empty)."""
    n = sum(counts.values())
    if not n:
        return {"max": None, "p50": None, "mean": None}
    rank = (n + 1) // 2  # nearest rank of the median
    seen = 0
    median = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            median = value
            break
    mean = sum(v * c for v, c in counts.items()) / n
    return {"max": max(counts), "p50": median, "mean": round(mean, 3)}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 6) if whole else None
