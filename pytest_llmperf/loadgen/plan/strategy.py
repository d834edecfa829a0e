"""How a plan is issued, chosen once when the plan is built (a closed set, so an enum).

The issuing side maps each member to one strategy function
(:data:`~pytest_llmperf.loadgen.issue.strategies.STRATEGIES`), so no issue loop
asks "is this a conversation workload?" or "is this a trace?" while it runs.
Imports nothing of ``loadgen/``.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["IssueStrategy", "choose_strategy"]


class IssueStrategy(StrEnum):
    """Which loop issues a plan: independent requests, multi-turn conversations or agentic
    conversation trees, each on an open loop (planned arrivals) or a closed loop (slots); a
    trace of conversations keeps its own rows' times, a trace of agents its conversations'
    starts and recorded waits."""

    OPEN_LOOP = "open_loop"  # each planned request at t0 + its offset
    CLOSED_LOOP = "closed_loop"  # slots that send the next request as one ends
    CONVERSATIONS_OPEN_LOOP = "conversations_open_loop"  # arrivals are turns
    CONVERSATIONS_TRACE = "conversations_trace"  # a trace's rows, each after its turn's reply
    CONVERSATIONS_CLOSED_LOOP = "conversations_closed_loop"  # one conversation per slot
    AGENTS_OPEN_LOOP = "agents_open_loop"  # each arrival starts a conversation tree
    AGENTS_TRACE = "agents_trace"  # each tree at its recorded start, calls on recorded waits
    AGENTS_CLOSED_LOOP = "agents_closed_loop"  # one tree per slot, its subagents included

    @property
    def agents(self) -> bool:
        """Issues agentic conversation trees (:mod:`~pytest_llmperf.loadgen.issue.agents`)."""
        return self.name.startswith("AGENTS_")

    @property
    def latency_from_send(self) -> bool:
        """Latency counts from the actual send (``t_sched`` := ``t_send``): a closed loop
        whose sends wait for nothing planned. Agent trees keep their ``t_sched`` (the end of
        a tool wait is a planned instant, in a closed loop too)."""
        return self in (IssueStrategy.CLOSED_LOOP, IssueStrategy.CONVERSATIONS_CLOSED_LOOP)

    def describe(self) -> str:
        """The words the run's workload description shows (``"issue"``)."""
        return _WORDS[self]


_WORDS = {
    IssueStrategy.OPEN_LOOP: "requests on planned arrivals",
    IssueStrategy.CLOSED_LOOP: "requests from slots",
    IssueStrategy.CONVERSATIONS_OPEN_LOOP: "conversation turns on planned arrivals",
    IssueStrategy.CONVERSATIONS_TRACE: "conversation turns at the trace's times",
    IssueStrategy.CONVERSATIONS_CLOSED_LOOP: "conversations, one per slot",
    IssueStrategy.AGENTS_OPEN_LOOP: "agent trees, one per arrival",
    IssueStrategy.AGENTS_TRACE: "agent trees at the trace's times",
    IssueStrategy.AGENTS_CLOSED_LOOP: "agent trees, one per slot",
}


def choose_strategy(
    *, open_loop: bool, conversations: bool, timed_trace: bool, agents: bool = False
) -> IssueStrategy:
    """The strategy of a plan: ``open_loop`` (the load's kind), ``conversations`` (the
    workload runs multi-turn conversations), ``timed_trace`` (a trace load whose
    conversations carry their times: a trace of rows with conversation ids, or of agents),
    ``agents`` (the workload runs agentic conversation trees: it wins over
    ``conversations``)."""
    if agents:
        if not open_loop:
            return IssueStrategy.AGENTS_CLOSED_LOOP
        return IssueStrategy.AGENTS_TRACE if timed_trace else IssueStrategy.AGENTS_OPEN_LOOP
    if not conversations:
        return IssueStrategy.OPEN_LOOP if open_loop else IssueStrategy.CLOSED_LOOP
    if not open_loop:
        return IssueStrategy.CONVERSATIONS_CLOSED_LOOP
    if timed_trace:
        return IssueStrategy.CONVERSATIONS_TRACE
    return IssueStrategy.CONVERSATIONS_OPEN_LOOP
