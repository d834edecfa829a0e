"""``llm_load(pacing=)``: the open loop's wait for each planned instant.

How close to its plan a send leaves is timing, measured by
``benchmarks/loadgen_poisson.py --pacing precise``; these tests check what
must hold on any machine: no send before its plan, the spin engaging when the
loop's turns are long, the spec's words, and a run that reports its spin.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.loadgen.issue.pacing import Pacer
from pytest_llmperf.specs.load import LoadSpec, PacingMode
from pytest_llmperf.specs.run import RunSpec

TURN_S = 0.0003  # what a turn of the loop that reads many streams may take


@pytest_asyncio.fixture
async def busy_loop() -> AsyncIterator[None]:
    """Every turn of the loop takes ``TURN_S`` of CPU (as reading many streams does)."""
    stopping = False

    async def busy() -> None:
        while not stopping:
            time.sleep(TURN_S)
            await asyncio.sleep(0)

    task = asyncio.create_task(busy())
    yield
    stopping = True
    await task


async def _waits(pacer: Pacer, count: int) -> list[int]:
    """How late (ns) each of ``count`` waits 3 ms ahead returned; never negative."""
    late = []
    for _ in range(count):
        planned = time.monotonic_ns() + 3_000_000
        assert await pacer.wait_until(planned)
        late.append(time.monotonic_ns() - planned)
    return late


@pytest.mark.asyncio
@pytest.mark.usefixtures("busy_loop")
async def test_precise_pacing_spins_the_last_stretch_and_never_returns_early() -> None:
    precise = Pacer(precise=True)
    assert min(await _waits(precise, 20)) >= 0
    assert precise.spun_ns > 0  # turns of 0.3 ms: the last stretch was spun, not yielded


@pytest.mark.asyncio
@pytest.mark.usefixtures("busy_loop")
async def test_default_pacing_yields_to_the_loop_and_never_spins() -> None:
    default = Pacer()
    assert min(await _waits(default, 20)) >= 0
    assert default.spun_ns == 0


@pytest.mark.asyncio
async def test_a_precise_pacer_stopped_while_it_waits_returns_false() -> None:
    pacer = Pacer(precise=True)
    waiting = asyncio.ensure_future(pacer.wait_until(time.monotonic_ns() + 60_000_000_000))
    await asyncio.sleep(0)
    pacer.cancel()
    assert await asyncio.wait_for(waiting, 30) is False


def test_pacing_is_an_open_loop_word_and_reported_only_when_precise() -> None:
    precise = LoadSpec.parse("poisson", {"rate": 5, "pacing": "precise"})
    assert precise.pacing is PacingMode.PRECISE
    assert precise.describe()["pacing"] == "precise"
    default = LoadSpec.parse("constant", {"rate": 5})
    assert default.pacing is PacingMode.DEFAULT
    assert "pacing" not in default.describe()  # reports saved before it still compare
    with pytest.raises(LlmPerfUsageError, match=r"llm_load\('poisson'\): unknown pacing 'exact'"):
        LoadSpec.parse("poisson", {"rate": 5, "pacing": "exact"})
    with pytest.raises(LlmPerfUsageError, match=r"llm_load\('concurrency'\) does not take pacing"):
        LoadSpec.parse("concurrency", {"concurrency": 2, "pacing": "precise"})


def test_run_overrides_take_pacing() -> None:
    spec = RunSpec("synthetic", {}, 0, LoadSpec.parse("poisson", {"rate": 5}), requests=10)
    assert spec.with_overrides({"pacing": "precise"}).load.pacing is PacingMode.PRECISE


@pytest.mark.asyncio
async def test_a_precise_open_loop_sends_nothing_early_and_reports_its_spin(
    fast_sim: Endpoint,
) -> None:
    spec = RunSpec(
        "synthetic",
        {"input_tokens": 8, "output_tokens": 4},
        0,
        LoadSpec.parse("poisson", {"rate": 200, "seed": 3, "pacing": "precise"}),
        requests=100,
    )
    result = await LoadRun(fast_sim, spec).execute()
    assert result.counts["completed"] == 100, result.error_samples
    assert result.load["pacing"] == "precise"
    assert result.histogram("schedule_lag").min >= 0  # t_send never before t_sched
    spin = result.self_check["pacing_spin_s"]
    assert isinstance(spin, float) and 0 <= spin <= result.self_check["client_cpu_s"]


@pytest.mark.asyncio
async def test_many_waits_at_once_each_end_at_their_instant_and_a_cancel_wakes_them_all() -> None:
    """The one waiting primitive of every issuer: a conversation's subagents and many tool
    waits wait on one pacer at once."""
    pacer = Pacer()
    now = time.monotonic_ns()
    dues = [now + k * 5_000_000 for k in range(1, 6)]
    ended: list[int] = []

    async def wait(due: int) -> None:
        assert await pacer.wait_until(due)
        ended.append(time.monotonic_ns())

    await asyncio.gather(*(wait(d) for d in dues))
    assert all(e >= d for e, d in zip(sorted(ended), dues, strict=True))  # never early
    far = [asyncio.ensure_future(pacer.wait_until(now + 60_000_000_000)) for _ in range(3)]
    await asyncio.sleep(0)
    started = time.monotonic()
    pacer.cancel()
    assert await asyncio.gather(*far) == [False, False, False]
    assert time.monotonic() - started < 10  # woken, not waited out (a minute each)
