"""The two-stage precise sleep, in both modes."""

from __future__ import annotations

import asyncio
import math
import random
from types import SimpleNamespace

import pytest

from pytest_llmperf.sim import clock
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
async def test_sleep_until_is_never_early(mode: str) -> None:
    # Structure, on the real loop: how late is the machine's scheduling (a busy one wakes a
    # process milliseconds late at the median), so precision is the fake clock's test below
    # and benchmarks/sim_token_timing.py's figure.
    late = await _lateness(mode)
    assert late[0] >= 0.0, late


class FakeClock:
    """Time that moves only as the code under test waits (tests/README.md: a fake clock).

    An asyncio sleep wakes at the first whole millisecond after it is due, as epoll rounds
    its timeout up (the real loop shows it: the last test below); ``asyncio.sleep(0)`` is
    one pass through the loop (5 us); a blocking sleep and each read of the busy-wait
    clock take what they take (the read 1 us)."""

    PASS_S = 5e-6

    def __init__(self) -> None:
        self.now = 1000.0
        self.asyncio = SimpleNamespace(get_running_loop=lambda: self, sleep=self._sleep)
        self.time_module = SimpleNamespace(sleep=self._block, monotonic=self._read)

    def time(self) -> float:
        return self.now

    async def _sleep(self, delay: float) -> None:
        if delay <= 0:
            self.now += self.PASS_S
        else:
            self.now = math.ceil((self.now + delay) * 1000) / 1000

    def _block(self, delay: float) -> None:
        self.now += delay

    def _read(self) -> float:
        self.now += 1e-6
        return self.now


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["block", "spin"])
async def test_sleep_until_reaches_the_instant_not_the_next_millisecond(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two stages: the asyncio sleep stops short of the instant by more than its
    rounding, and the last stretch is waited out precisely (a blocking sleep or a spin)."""
    fake = FakeClock()
    monkeypatch.setattr(clock, "asyncio", fake.asyncio)
    monkeypatch.setattr(clock, "time", fake.time_module)
    rng = random.Random(1)
    late = []
    for _ in range(40):
        when = fake.now + rng.uniform(0.0005, 0.004)
        await clock.sleep_until(when, mode)
        late.append(fake.now - when)
    assert min(late) >= 0, late  # never early
    # a plain asyncio sleep would be up to 1 ms late here; a spin ends within a loop pass
    assert max(late) <= FakeClock.PASS_S, late


@pytest.mark.asyncio
async def test_a_plain_asyncio_sleep_is_late_by_its_millisecond_rounding() -> None:
    """The fake clock's model, on the real loop: epoll's millisecond rounding makes plain sleeps
    late (a busy machine only adds to it)."""
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
