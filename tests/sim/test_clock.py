"""The two-stage precise sleep, in both modes."""

from __future__ import annotations

import asyncio
import random

import pytest

from pytest_llmperf.sim.clock import sleep_until


async def _lateness(mode: str) -> list[float]:
    loop = asyncio.get_running_loop()
    rng = random.Random(1)
    out = []
    for _ in range(40):
        when = loop.time() + rng.uniform(0.0005, 0.004)
        await sleep_until(when, mode)
        out.append(loop.time() - when)
    return sorted(out)


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["block", "spin"])
async def test_sleep_until_is_never_early_and_usually_precise(mode: str) -> None:
    late = await _lateness(mode)
    assert late[0] >= 0.0
    # plain asyncio.sleep: uniform 0..1 ms late, median ~0.5 ms; busy-machine noise only
    # adds lateness, so the median of 40 is a fair test of the mechanism
    assert late[len(late) // 2] < 0.2e-3, late


@pytest.mark.asyncio
async def test_plain_asyncio_sleep_would_fail_the_same_check() -> None:
    """Guards the check above: epoll's millisecond rounding makes plain sleeps late."""
    loop = asyncio.get_running_loop()
    rng = random.Random(1)
    late = []
    for _ in range(40):
        delay = rng.uniform(0.0005, 0.004)
        when = loop.time() + delay
        await asyncio.sleep(delay)
        late.append(loop.time() - when)
    late.sort()
    assert late[len(late) // 2] > 0.2e-3, late
