"""How many calls an agentic run may send: the spec's ``warmup`` and ``requests``, counted
in calls.

An agent tree's calls are not the plan's positions (a tree sends as many as its
threads have turns, when they are ready), so the agentic strategies
(:mod:`~pytest_llmperf.loadgen.issue.agents`) draw each call's place in the run from
a :class:`CallBudget` as it is about to be sent: the first ``warmup`` calls of this
process are untracked, the next ``requests`` tracked, and then the budget is spent and
no call is sent any more (threads end at their next call; their calls in flight drain).
With ``--llm-workers`` each process gets its part of both counts (worker ``i`` of ``n``:
``k // n``, plus one for ``i < k % n``), so the union is the run's.

The run positions handed out (for the event log) are ``index``, ``index + count``, ...
as the plan's are; cancel points (``cancel=``) are drawn in the same seeded order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # handed in: the plan it counts for (which places each call)
    from pytest_llmperf.loadgen.plan.planner import PlannedRequest, RunPlan, ScheduleShare

__all__ = ["CallBudget", "share_of"]


def share_of(total: int, share: ScheduleShare) -> int:
    """Worker ``share.index``'s part of ``total`` calls (the parts add up to ``total``)."""
    count = max(1, share.count)
    return total // count + (1 if share.index < total % count else 0)


class CallBudget:
    """This process's calls: ``warmup`` untracked, then at most ``requests`` tracked (None:
    no count: a trace's own calls, or ``duration``); :attr:`spent` once refused."""

    def __init__(self, plan: RunPlan) -> None:
        share = plan.share
        self._plan = plan
        self.warmup = share_of(plan.warmup, share)
        self.requests = None if plan.requests is None else share_of(plan.requests, share)
        self._position = share.index
        self._step = max(1, share.count)
        self._cancels = plan.cancel_points()
        self.taken = 0  # calls handed out, warm-up included
        self.taken_untracked = 0  # requests placed outside the count (mid-start warm-ups)
        self.spent = False  # no more calls: the count is reached, or the run's end said so

    def take(self, stage: int = -1) -> PlannedRequest | None:
        """The next call's place in the run (None: the budget is spent); ``stage``: the load
        stage it goes in. Its sample index is the record's to fill in, from the sample."""
        if self.spent:
            return None
        tracked = self.taken >= self.warmup
        if tracked and self.requests is not None and self.taken - self.warmup >= self.requests:
            self.spent = True
            return None
        return self._hand_out(tracked, stage)

    def untracked(self) -> PlannedRequest:
        """A place for a request outside the count (a conversation's mid-start warm-up)."""
        self.taken_untracked += 1
        return self._plan.placed(self._next_position(), False)

    def _hand_out(self, tracked: bool, stage: int) -> PlannedRequest:
        self.taken += 1
        stage = stage if tracked else -1
        return self._plan.placed(self._next_position(), tracked, stage, next(self._cancels))

    def _next_position(self) -> int:
        position = self._position
        self._position += self._step
        return position
