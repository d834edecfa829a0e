"""``llm_load(..., pacing="precise")``: an open loop that spins the last stretch before
each send. What is tested here is the contract (never early, the marker's word, a run
that uses it); how close to the plan it sends is a benchmark's figure
(benchmarks/loadgen_poisson.py --pacing precise), not a timing assert."""

from __future__ import annotations

import asyncio
import time

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.issue.pacing import PRECISE_SPIN_NS, Pacer
from pytest_llmperf.specs.load import PACING_PRECISE, LoadSpec


def test_the_marker_takes_precise_pacing_on_open_loops_only() -> None:
    spec = LoadSpec.parse("poisson", {"rate": 50, "pacing": "precise"})
    assert spec.pacing == PACING_PRECISE and spec.describe()["pacing"] == "precise"
    assert LoadSpec.parse("poisson", {"rate": 50}).pacing is None
    with pytest.raises(LlmPerfUsageError, match=r"pacing= takes 'precise'.*got 'exact'"):
        LoadSpec.parse("constant", {"rate": 5, "pacing": "exact"})
    with pytest.raises(LlmPerfUsageError, match=r"llm_load\('concurrency'\): pacing= applies"):
        LoadSpec.parse("concurrency", {"concurrency": 4, "pacing": "precise"})


@pytest.mark.asyncio
@pytest.mark.parametrize("precise", [False, True])
async def test_a_wait_is_never_early_and_a_cancel_ends_it(precise: bool) -> None:
    pacer = Pacer(precise=precise)
    assert pacer.spin_ns == (PRECISE_SPIN_NS if precise else 0)
    for ahead_ns in (0, 200_000, 2_000_000):
        planned = time.monotonic_ns() + ahead_ns
        assert await pacer.wait_until(planned)
        assert time.monotonic_ns() >= planned  # a lower bound only: never before the plan
    far = time.monotonic_ns() + 10_000_000_000
    waiting = asyncio.ensure_future(pacer.wait_until(far))
    await asyncio.sleep(0.01)
    pacer.cancel()
    assert await waiting is False  # cancelled long before its time


SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=100)
@pytest.mark.llm_load("poisson", rate=200, pacing="precise")
async def test_paced(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.load["pacing"] == "precise"
    assert result.counts["completed"] == 100
    assert result.metrics["schedule_lag"].count == 100
"""


def test_a_run_with_precise_pacing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_paced=SUITE)
    pytester.runpytest("--llm-endpoint=sim:fixed").assert_outcomes(passed=1)
