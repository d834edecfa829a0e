"""Runs against the simulator, which returns vLLM's per-request ``metrics``: each
request's TTFT split into client queue, server queue, engine and remainder, carried
through the event log and merged from worker processes.

The simulator runs in a process of its own and stamps its engine's times on the
system-wide monotonic clock, the one the client reads: so the split of every
request adds up to its TTFT exactly (the remainder is defined so) and the
remainder — network, HTTP, the server's API layer — is not negative beyond the
clocks' noise. No assertion here bounds a time from above: the machine is busy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.results.accumulator import ttft_parts_ns
from pytest_llmperf.results.event_log import analyse_event_log, read_records
from pytest_llmperf.results.server_per_request import server_metrics_from_requests, ttft_split
from pytest_llmperf.sim import SimProcess, start_sim_process
from pytest_llmperf.specs.run import RunSpec

pytestmark = pytest.mark.asyncio

NOISE_NS = 1_000_000  # rounding of float milliseconds and of two processes' readings


@pytest.fixture(scope="module")
def engine_sim() -> Iterator[SimProcess]:
    sim = start_sim_process("tiny")
    yield sim
    sim.stop()


@pytest.fixture(scope="module")
def fixed_sim() -> Iterator[SimProcess]:
    sim = start_sim_process("fixed", overrides={"ttft_ms": 5, "itl_ms": 1})
    yield sim
    sim.stop()


async def test_every_requests_ttft_splits_into_parts_that_add_up(
    engine_sim: SimProcess, make_spec: Callable[..., RunSpec], tmp_path: Path
) -> None:
    spec = make_spec("poisson", rate=100, requests=60, output_tokens=6)
    result = await LoadRun(Endpoint(engine_sim.url + "/v1"), spec, events_dir=tmp_path).execute()
    assert result.counts["completed"] == 60
    assert result.events_path is not None
    records = [r for r in read_records(result.events_path) if r.tracked]
    assert len(records) == 60
    for r in records:
        parts = ttft_parts_ns(r)
        assert parts is not None, "every simulator response carries its metrics"
        client_queue, server_queue, engine, remainder = parts
        assert client_queue + server_queue + engine + remainder == r.t_first - r.t_sched
        assert client_queue == r.t_send - r.t_sched
        assert server_queue >= 0 and engine > 0
        assert remainder >= -NOISE_NS, (r.index, parts)
        assert r.server_decode_ms is not None and r.server_mean_itl_ms is not None
    split = result.to_dict()["ttft_split"]
    assert split["count"] == 60 == split["server_queue_reported"]
    # the means add up to the TTFT's (each rounded to 0.1 us), but for what a remainder
    # below 0 (recorded as 0) adds
    overrun_ms = sum(min(0, p[3]) for r in records if (p := ttft_parts_ns(r))) / 60 / 1e6
    means = sum(split[k]["mean"] for k in ("client_queue", "server_queue", "engine", "remainder"))
    assert means + overrun_ms == pytest.approx(split["ttft"]["mean"], abs=1e-3)
    server = server_metrics_from_requests(result.accumulator)
    assert server is not None and server.source == "responses"
    assert server.samples("server.prefill_time") == 60
    # the event log replays them exactly
    replay = analyse_event_log(result.events_path)
    assert ttft_split(replay) == split
    assert server_metrics_from_requests(replay) == server


async def test_workers_send_them_back_and_the_parent_merges_them(
    fixed_sim: SimProcess, make_spec: Callable[..., RunSpec], tmp_path: Path
) -> None:
    endpoint = Endpoint(fixed_sim.url + "/v1")
    spec = make_spec("constant", rate=200, requests=60, output_tokens=3)
    result = await LoadRun(endpoint, spec, workers=2, events_dir=tmp_path).execute()
    assert result.counts["completed"] == 60
    assert result.self_check["workers"] == 2
    split = result.ttft_split
    assert split is not None and split["count"] == 60
    # the fixed model: no queue, its first token ttft_ms after arrival
    assert split["server_queue"]["p99"] == 0.0
    assert split["engine"]["p50"] == pytest.approx(5.0, abs=0.01)
    server = server_metrics_from_requests(result.accumulator)
    assert server is not None
    assert server.samples("server.decode_time") == 60
    assert server.stat("server.itl", "p50") == pytest.approx(1.0, abs=0.01)
    assert result.events_path is not None
    assert ttft_split(analyse_event_log(result.events_path)) == split
