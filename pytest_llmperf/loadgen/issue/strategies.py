"""Which function issues a plan: one per
:class:`~pytest_llmperf.loadgen.plan.strategy.IssueStrategy`.

The plan chose its strategy when it was built; the share run looks it up here
once and awaits it. Every strategy has one signature (the share's book, the
client, the endpoint, the start instant ``t0``) and works over the public
:class:`~pytest_llmperf.loadgen.issue.book.IssueBook`, whose plan says what to
send; none asks which kind of workload or load it runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.issue.agents import (
    issue_agents_closed_loop,
    issue_agents_open_loop,
    issue_agents_trace,
)
from pytest_llmperf.loadgen.issue.closed_loop import issue_closed_loop
from pytest_llmperf.loadgen.issue.conversations import (
    issue_conversations_closed_loop,
    issue_conversations_open_loop,
    issue_conversations_trace,
)
from pytest_llmperf.loadgen.issue.open_loop import issue_open_loop
from pytest_llmperf.loadgen.plan.strategy import IssueStrategy

if TYPE_CHECKING:  # handed in: the book of the share being issued
    from pytest_llmperf.loadgen.issue.book import IssueBook

__all__ = ["STRATEGIES", "Strategy"]

# (book, http, endpoint, t0): issue the book's plan from t0 until it runs out or stops
Strategy = Callable[["IssueBook", StreamClient, Endpoint, int], Awaitable[None]]

STRATEGIES: Mapping[IssueStrategy, Strategy] = MappingProxyType(
    {
        IssueStrategy.OPEN_LOOP: issue_open_loop,
        IssueStrategy.CLOSED_LOOP: issue_closed_loop,
        IssueStrategy.CONVERSATIONS_OPEN_LOOP: issue_conversations_open_loop,
        IssueStrategy.CONVERSATIONS_TRACE: issue_conversations_trace,
        IssueStrategy.CONVERSATIONS_CLOSED_LOOP: issue_conversations_closed_loop,
        IssueStrategy.AGENTS_OPEN_LOOP: issue_agents_open_loop,
        IssueStrategy.AGENTS_TRACE: issue_agents_trace,
        IssueStrategy.AGENTS_CLOSED_LOOP: issue_agents_closed_loop,
    }
)
