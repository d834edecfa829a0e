"""Event logs of real runs, and runs split across worker processes."""

from __future__ import annotations

import itertools
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.results.event_log import analyse_event_log, read_meta
from pytest_llmperf.sim import start_sim_process
from pytest_llmperf.specs.run import RunSpec

pytestmark = pytest.mark.asyncio


async def test_events_dir_keeps_one_log_per_run_and_it_replays_exactly(
    fast_sim: Endpoint, make_spec: Callable[..., RunSpec], tmp_path: Path
) -> None:
    spec = make_spec("poisson", rate=200, requests=40, warmup=5, output_tokens=6)
    first = await LoadRun(fast_sim, spec, events_dir=tmp_path, label="a b/c").execute()
    second = await LoadRun(fast_sim, spec, events_dir=tmp_path, label="a b/c").execute()
    assert first.events_path != second.events_path
    assert sorted(p.name for p in tmp_path.glob("*.sqlite")) == sorted(
        Path(p).name for p in (first.events_path, second.events_path)
    )
    assert first.to_dict()["events"] == first.events_path
    replay = analyse_event_log(first.events_path)
    assert replay.summary() == first.accumulator.summary()
    with sqlite3.connect(first.events_path) as db:
        kinds = Counter(kind for (kind,) in db.execute("SELECT kind FROM events WHERE phase = 1"))
    assert kinds["issued"] == kinds["first_chunk"] == kinds["complete"] == 40
    assert kinds["chunk"] == 40 * 5
    meta = read_meta(first.events_path)
    assert meta["load"]["rate"] == 200
    assert meta["summary"]["ttft"]["count"] == 40


@pytest.fixture(scope="module")
def sim_process() -> object:
    sim = start_sim_process("fixed", overrides={"ttft_ms": 5, "itl_ms": 1})
    yield sim
    sim.stop()


async def test_two_workers_issue_exactly_the_planned_schedule(
    sim_process: object, make_spec: Callable[..., RunSpec], tmp_path: Path
) -> None:
    endpoint = Endpoint(sim_process.url + "/v1")  # type: ignore[attr-defined]
    spec = make_spec("constant", rate=200, requests=60, output_tokens=3)
    result = await LoadRun(endpoint, spec, workers=2, events_dir=tmp_path).execute()
    assert result.counts == {
        "issued": 60,
        "completed": 60,
        "failed": 0,
        "incomplete": 0,
        "cancelled": 0,
        "connection_retries": 0,
        "invalid": 0,
        "blank": 0,
    }
    assert result.self_check["workers"] == 2
    assert len(result.self_check["worker_cpu_s"]) == 2
    with sqlite3.connect(result.events_path) as db:
        planned = sorted(t for (t,) in db.execute("SELECT ref_ns FROM events WHERE kind='issued'"))
        positions = sorted(p for (p,) in db.execute("SELECT req FROM events WHERE kind='issued'"))
    assert positions == list(range(60))  # the union of the shares is the whole run
    gaps = {b - a for a, b in itertools.pairwise(planned)}
    assert gaps <= {5_000_000}  # constant 200/s from one common t0: 5 ms apart exactly
    replay = analyse_event_log(result.events_path)
    assert replay.summary() == result.accumulator.summary()  # exact merge of HDR histograms
    assert not list(tmp_path.glob("*.w*.sqlite"))  # worker parts merged and removed
