"""Sweeps, searches, warm-up and comparisons against the embedded simulator on 127.0.0.1.

The fixed-latency profile with load-dependent TTFT (``ttft_per_active_ms``)
gives a server whose latency rises with concurrency by a known law, so the
searches have a known answer and the sweep a knee.
"""

from __future__ import annotations

import pytest
from aiohttp import web

from pytest_llmperf.analysis import collect, compare_table, memory_pressure, scrape_metrics
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.methodology import LlmLoadgen, run_configurations
from pytest_llmperf.methodology.warm_up import consecutive_variation
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.perf import PerfSpec

pytestmark = pytest.mark.asyncio


def generator(url: str, workload: dict, load: dict | None = None, slos=()) -> LlmLoadgen:
    spec = PerfSpec.from_markers(
        (("synthetic",), workload),
        ((), load) if load else None,
        [(tuple(slos), {})] if slos else [],
    )
    return LlmLoadgen(Endpoint.from_env(url, api_key_env=None), spec)


async def test_sweep_finds_knee_and_keeps_probe_runs_ungated() -> None:
    async with SimServer("fixed", ttft_ms=4, ttft_per_active_ms=4, itl_ms=2) as sim:
        gen = generator(sim.url, {"input_tokens": 32, "output_tokens": 16, "requests": 30})
        # Constant spacing: at 10 and 20 req/s each request (~36 ms) ends before the next
        # (TTFT 4 ms); at 200 req/s ~7 are in flight (TTFT ~30 ms). The knee is judged at p50:
        # p99 of 30 requests is their maximum, and one request held up by a busy machine
        # (up to ~180 ms) at a low rate would raise the floor past the knee's 2x.
        curve = await gen.sweep(rates=[20, 10, 200], pattern="constant", knee_percentile=50)
    assert [p.offered for p in curve.points] == [10, 20, 200]
    assert curve.knee == 200 and curve.knee_percentile == 50
    assert [r.label for r in gen.results] == ["sweep rate=10", "sweep rate=20", "sweep rate=200"]
    assert not any(r.gated for r in gen.results)
    attached = gen.analyses[-1]
    assert attached["kind"] == "curve" and attached["knee"] == 200
    assert attached["x"] in attached["columns"]
    assert all(y in attached["columns"] for y in attached["y"])
    assert len(attached["rows"]) == 3


async def test_max_concurrency_finds_the_known_capacity() -> None:
    # TTFT = 4 ms + 3 ms per request already in flight: p50 < 25 ms holds up to ~7 in flight.
    async with SimServer("fixed", ttft_ms=4, ttft_per_active_ms=3, itl_ms=1) as sim:
        gen = generator(sim.url, {"input_tokens": 16, "output_tokens": 8, "requests": 40})
        search = await gen.max_concurrency(
            initial=2, maximum=64, slos=["ttft.p50 < 25ms"], confirm=True
        )
    assert search.best is not None and 5 <= search.best <= 9
    assert [level for level, *_ in search.probes][:3] == [2, 4, 8]  # doubling first
    assert search.confirmed is not None and search.confirmed.gated
    assert gen.analyses[-1]["best"] == search.best


async def test_search_without_slos_is_a_usage_error() -> None:
    gen = generator("http://127.0.0.1:9", {"requests": 1})
    with pytest.raises(LlmPerfUsageError, match="SLOs"):
        await gen.max_rate(low=1, high=2)


@pytest.mark.parametrize(("tolerance", "rounds"), [(10.0, 1), (0.0, 3)])
async def test_warm_up_verifies_stable_probes(tolerance: float, rounds: int) -> None:
    """The verdict is the probes' own: stable once every probe is within the tolerance of
    the one before, else another round, up to three. A probe (16 tokens at TTFT 10 ms and
    ITL 3 ms) takes at least 55 ms on the server's plan, and what a busy machine adds to one
    (up to ~180 ms) would make the default 10% a verdict on the machine; so the tolerances
    here are ones noise cannot cross: 10x (no probe can be 11 times the one before: stable
    in round 1) and 0 (no variation is under it: three rounds, not stable). The 10% itself
    is consecutive_variation's arithmetic (test_method_search_logic.py)."""
    async with SimServer("fixed", ttft_ms=10, itl_ms=3) as sim:
        gen = generator(sim.url, {"input_tokens": 16, "output_tokens": 8, "requests": 10})
        report = await gen.warm_up(requests=10, probes=4, tolerance=tolerance)
    assert len(report.probes_ms) == 4 and all(p >= 10 + 15 * 3 for p in report.probes_ms)
    assert report.variation == consecutive_variation(report.probes_ms)
    assert report.stable is (rounds == 1) and report.rounds == rounds, report
    labels = [r.label for r in gen.results]
    assert labels == ["warm-up probe before"] + [
        label
        for k in range(1, rounds + 1)
        for label in (f"warm-up round {k}", f"warm-up probes round {k}")
    ]
    assert not any(r.gated for r in gen.results)


async def test_configurations_compared_with_same_requests_and_significance() -> None:
    async with (
        SimServer("fixed", ttft_ms=8, itl_ms=1) as fast,
        SimServer("fixed", ttft_ms=30, itl_ms=1) as slow,
    ):
        gen = generator(
            fast.url,
            {"input_tokens": (16, 64), "output_tokens": 8, "requests": 12},
            {"concurrency": 2},
        )
        with collect(gen) as seen:
            runs = await run_configurations(gen, {"A": None, "B": slow.url}, repetitions=3)
        with pytest.raises(LlmPerfUsageError, match="repetitions"):
            await run_configurations(gen, {"A": None, "B": slow.url}, repetitions=2)
    assert [r.label for r in gen.results] == [f"{n} rep {i}" for i in (1, 2, 3) for n in "AB"]
    assert not any(r.gated for r in gen.results)
    # The same requests each time: identical prompt sizes per index, every repetition.
    sizes = [sorted((r.index, r.input_tokens) for r in rows) for rows in runs.rows["B"]]
    assert sizes[0] == sizes[1] == sizes[2]
    assert sizes[0] == sorted((r.index, r.input_tokens) for r in seen.rows[:12])
    table = compare_table(runs, ("ttft.p50",))
    diff = table["differences"]["ttft.p50"]["B"]
    assert diff["significant"] and 15 < diff["difference"] < 30


async def test_memory_pressure_reads_preemptions_from_metrics() -> None:
    async with SimServer("tiny") as sim:
        gen = generator(sim.url, {"input_tokens": 400, "output_tokens": 120, "requests": 12})
        levels = await memory_pressure(gen, capacity=3, levels=(1.0, 3.0))
        assert await scrape_metrics(gen.endpoint) is not None
    assert levels[0].counters is not None
    assert levels[1].preemptions > levels[0].preemptions
    table = gen.analyses[-1]
    assert [row[0] for row in table["rows"]] == ["100%", "300%"]


async def test_scrape_metrics_is_none_without_a_metrics_page() -> None:
    app = web.Application()
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        assert (
            await scrape_metrics(Endpoint.from_env(f"http://127.0.0.1:{port}", api_key_env=None))
            is None
        )
    finally:
        await runner.cleanup()
