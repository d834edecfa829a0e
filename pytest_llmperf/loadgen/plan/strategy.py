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
    """Which loop issues a plan: independent requests or multi-turn conversations, each on
    an open loop (planned arrivals) or a closed loop (slots); a trace of conversations
    keeps its own rows' times."""

    OPEN_LOOP = "open_loop"  # each planned request at t0 + its offset
    CLOSED_LOOP = "closed_loop"  # slots that send the next request as one ends
    CONVERSATIONS_OPEN_LOOP = "conversations_open_loop"  # arrivals are turns
    CONVERSATIONS_TRACE = "conversations_trace"  # a trace's rows, each after its turn's reply
    CONVERSATIONS_CLOSED_LOOP = "conversations_closed_loop"  # one conversation per slot


def choose_strategy(*, open_loop: bool, conversations: bool, timed_trace: bool) -> IssueStrategy:
    """The strategy of a plan: ``open_loop`` (the load's kind), ``conversations`` (the
    workload runs multi-turn conversations), ``timed_trace`` (a trace load whose
    conversations carry their rows' times)."""
    if not conversations:
        return IssueStrategy.OPEN_LOOP if open_loop else IssueStrategy.CLOSED_LOOP
    if not open_loop:
        return IssueStrategy.CONVERSATIONS_CLOSED_LOOP
    if timed_trace:
        return IssueStrategy.CONVERSATIONS_TRACE
    return IssueStrategy.CONVERSATIONS_OPEN_LOOP
