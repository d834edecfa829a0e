"""The max_concurrency gate: arrival order, no lost slots on cancellation."""

from __future__ import annotations

import asyncio

import pytest

from pytest_llmperf.loadgen.issue.concurrency_cap import SlotGate

pytestmark = pytest.mark.asyncio


async def test_waiters_get_slots_in_arrival_order() -> None:
    gate = SlotGate(2)
    order: list[int] = []

    async def user(i: int) -> None:
        await gate.acquire()
        order.append(i)
        await asyncio.sleep(0.01)
        gate.release()

    await asyncio.gather(*(user(i) for i in range(8)))
    assert order == list(range(8))
    assert gate.in_use == 0 and gate.waiting == 0


async def test_at_most_slots_are_held_at_once() -> None:
    gate = SlotGate(3)
    held = peak = 0

    async def user() -> None:
        nonlocal held, peak
        await gate.acquire()
        held += 1
        peak = max(peak, held)
        await asyncio.sleep(0.005)
        held -= 1
        gate.release()

    await asyncio.gather(*(user() for _ in range(30)))
    assert peak == 3


async def test_a_cancelled_waiter_neither_leaks_nor_steals_a_slot() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    waiting = asyncio.ensure_future(gate.acquire())
    behind = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    gate.release()  # the slot goes past the cancelled waiter to the one behind it
    await asyncio.wait_for(behind, 1)
    assert gate.in_use == 1 and gate.waiting == 0
    gate.release()
    assert gate.in_use == 0


async def test_a_waiter_cancelled_as_it_is_handed_the_slot_passes_it_on() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    first = asyncio.ensure_future(gate.acquire())
    second = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)
    gate.release()  # first's future is resolved ...
    first.cancel()  # ... and it is cancelled before it runs
    await asyncio.wait_for(second, 1)
    assert gate.in_use == 1


async def test_a_gate_needs_a_slot() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        SlotGate(0)
