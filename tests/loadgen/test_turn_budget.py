"""The closed loop's turn budget: a few takers per turn of the event loop, the rest later."""

from __future__ import annotations

import asyncio

import pytest

from pytest_llmperf.loadgen.issue.turn_budget import TurnBudget

pytestmark = pytest.mark.asyncio


async def _turns(counter: list[int]) -> None:
    """Count the loop's turns: this task runs once in each."""
    while True:
        counter[0] += 1
        await asyncio.sleep(0)


async def test_a_burst_goes_through_a_few_per_turn_in_arrival_order() -> None:
    budget = TurnBudget(per_turn=4)
    turn = [0]
    ticker = asyncio.create_task(_turns(turn))
    await asyncio.sleep(0)
    through: list[tuple[int, int]] = []  # (taker, turn it went through in)

    async def taker(i: int) -> None:
        await budget.take()
        through.append((i, turn[0]))

    await asyncio.gather(*(taker(i) for i in range(30)))
    ticker.cancel()
    assert [i for i, _ in through] == list(range(30))  # first come, first served
    per_turn: dict[int, int] = {}
    for _, t in through:
        per_turn[t] = per_turn.get(t, 0) + 1
    assert max(per_turn.values()) <= 4
    assert len(per_turn) >= 30 // 4  # the rest waited for later turns


async def test_a_cancelled_waiter_holds_no_place() -> None:
    budget = TurnBudget(per_turn=1)
    first, second, third = (asyncio.ensure_future(budget.take()) for _ in range(3))
    await asyncio.sleep(0)  # the first goes through; the others wait
    assert first.done() and not second.done() and not third.done()
    second.cancel()
    await asyncio.wait_for(third, 30)  # the next turn's place passes the cancelled one by
    assert second.cancelled()


async def test_takers_within_the_budget_go_through_at_once() -> None:
    budget = TurnBudget(per_turn=3)
    for _ in range(3):  # no await suspends: the same turn
        take = budget.take()
        with pytest.raises(StopIteration):
            take.send(None)
