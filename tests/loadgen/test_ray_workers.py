"""``--llm-workers=ray:N``: load workers as Ray actors on a real local Ray instance.

One Ray instance (2 CPUs) serves the module; each test makes its own
:class:`RayCluster` on it (its actors are killed at the test's end, the
instance stays). The simulator is a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.loadgen.scale_out.ray_workers import RayCluster
from pytest_llmperf.results.event_log import analyse_event_log
from pytest_llmperf.results.run_result import StopReason
from pytest_llmperf.sim import start_sim_process
from pytest_llmperf.specs.run import RunSpec

ray = pytest.importorskip("ray")

DRAIN_TIMEOUT_S = 4.0  # the endpoint's total timeout in the fault tests: drain cap 9 s


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[Any]:
    started = not ray.is_initialized()
    if started:
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            logging_level="warning",
            _system_config={"worker_niceness": 0},
        )
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    sim = start_sim_process("fixed", overrides={"ttft_ms": 5, "itl_ms": 1})
    yield sim.url + "/v1"
    sim.stop()


@pytest.fixture
def cluster(ray_instance: Any) -> Iterator[RayCluster]:
    c = RayCluster()
    yield c
    c.close()
    assert ray_instance.is_initialized()  # not ours to shut down: the module's instance


def _execute(run: LoadRun) -> Any:
    return asyncio.run(run.execute())


def _served(sim_url: str) -> int:
    """Requests the simulator has answered so far (its own ``/metrics`` counter)."""
    text = httpx.get(sim_url.removesuffix("/v1") + "/metrics", timeout=10).text
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("vllm:request_success_total")
        )
    )


def _wait_until(check: Callable[[], bool], what: str, limit_s: float = 60.0) -> None:
    """Poll ``check`` (evidence, not a fixed delay); fail naming ``what`` after ``limit_s``."""
    end = time.monotonic() + limit_s
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {limit_s:g} s: {what}")
        time.sleep(0.05)


def _issued_rows(path: str | None) -> list[tuple[int, int, int]]:
    assert path is not None
    with sqlite3.connect(path) as db:
        return sorted(db.execute("SELECT req, sample, ref_ns FROM events WHERE kind = 'issued'"))


def test_ray_actors_issue_the_planned_schedule_and_merge_like_local_workers(
    cluster: RayCluster, sim_url: str, make_spec: Callable[..., RunSpec], tmp_path: Path
) -> None:
    spec = make_spec(
        "constant",
        rate=200,
        requests=60,
        output_tokens=3,
        sample_order="without-replacement",
        seed=7,
    )
    endpoint = Endpoint(sim_url)
    local = _execute(LoadRun(endpoint, spec, workers=2, events_path=tmp_path / "local.sqlite"))
    remote = _execute(
        LoadRun(endpoint, spec, workers=2, ray=cluster, events_path=tmp_path / "ray.sqlite")
    )
    assert (
        remote.counts
        == local.counts
        == {
            "issued": 60,
            "completed": 60,
            "failed": 0,
            "incomplete": 0,
            "cancelled": 0,
            "connection_retries": 0,
            "invalid": 0,
            "blank": 0,
        }
    )
    assert remote.stop_reason is StopReason.COMPLETED and not remote.interrupted
    for name in ("output_tokens", "input_requested", "output_requested", "token_events"):
        assert getattr(remote.accumulator, name) == getattr(local.accumulator, name), name
    for name in ("ttft", "e2e", "schedule_lag"):
        assert remote.metrics[name].count == local.metrics[name].count == 60  # type: ignore[union-attr]
    # the same positions with the same samples, planned on one timeline 5 ms apart
    rows, local_rows = _issued_rows(remote.events_path), _issued_rows(local.events_path)
    assert [(r, s) for r, s, _ in rows] == [(r, s) for r, s, _ in local_rows]
    assert [r for r, _, _ in rows] == list(range(60))
    planned = sorted(t for _, _, t in rows)
    assert {b - a for a, b in itertools.pairwise(planned)} <= {5_000_000}
    # the merged event log replays to the merged histograms exactly
    assert analyse_event_log(remote.events_path).summary() == remote.accumulator.summary()
    assert not list(tmp_path.glob("*.w*.sqlite"))
    check = remote.self_check
    assert check["workers"] == 2 and check["worker_backend"] == "ray"
    assert [n["workers"] for n in check["worker_nodes"]] == [2]
    assert sorted(r["requests"] for r in check["worker_runs"]) == [30, 30]
    assert {r["state"] for r in check["worker_runs"]} == {"ok"}
    assert len(check["worker_cpu_s"]) == 2
    assert "worker_backend" not in local.self_check  # local workers: today's self_check


def test_warm_actors_are_reused_and_a_closed_loop_splits_its_slots(
    cluster: RayCluster, sim_url: str, make_spec: Callable[..., RunSpec]
) -> None:
    endpoint = Endpoint(sim_url)
    first = _execute(
        LoadRun(endpoint, make_spec("constant", rate=200, requests=20), ray=cluster, workers=2)
    )
    spec = make_spec("max-throughput", concurrency=3, requests=45)
    second = _execute(LoadRun(endpoint, spec, workers=2, ray=cluster))
    assert second.counts["completed"] == 45
    ids = lambda r: {w["actor_id"] for w in r.self_check["worker_runs"]}  # noqa: E731
    assert ids(first) == ids(second)  # the session's actors stay warm between runs
    # a closed loop never gets more workers than slots
    third = _execute(
        LoadRun(
            endpoint, make_spec("max-throughput", concurrency=1, requests=5), workers=2, ray=cluster
        )
    )
    assert third.self_check["workers"] == 1 and third.counts["completed"] == 5


def test_stop_reaches_every_actor(
    cluster: RayCluster, sim_url: str, make_spec: Callable[..., RunSpec]
) -> None:
    spec = make_spec("constant", rate=50, requests=500)  # 10 s if not stopped
    run = LoadRun(Endpoint(sim_url), spec, workers=2, ray=cluster)
    before = _served(sim_url)

    async def stop_once_under_way() -> Any:
        # stopped once the server has answered 10 of this run's requests (evidence that
        # both actors are issuing), not after a fixed delay a busy machine can outlast
        task = asyncio.ensure_future(run.execute())
        loop = asyncio.get_running_loop()
        while not task.done() and await loop.run_in_executor(None, _served, sim_url) < before + 10:
            await asyncio.sleep(0.05)
        stopped.append(time.monotonic())
        run.stop()
        return await task

    stopped: list[float] = []
    result = asyncio.run(stop_once_under_way())
    # the stop ends the run well before its planned 10 s: judged from the stop, against
    # the ~9 s the schedule still had to go (the drain of 50 req/s takes milliseconds)
    assert time.monotonic() - stopped[0] < 6.0
    assert result.stop_reason is StopReason.STOPPED and result.interrupted
    assert 0 < result.counts["issued"] < 500
    assert result.counts["issued"] == result.counts["completed"]  # drained, none lost
    assert sorted(r["state"] for r in result.self_check["worker_runs"]) == ["ok", "ok"]


def test_a_killed_actor_leaves_an_incomplete_run_and_a_clear_message(
    cluster: RayCluster, sim_url: str, make_spec: Callable[..., RunSpec]
) -> None:
    endpoint = Endpoint(sim_url, timeouts=Timeouts.from_seconds(DRAIN_TIMEOUT_S))
    spec = make_spec("constant", rate=60, requests=600)  # 10 s if not cut short
    run = LoadRun(endpoint, spec, workers=2, ray=cluster)
    killed: list[str] = []

    before = _served(sim_url)
    killed_at: list[float] = []

    def kill_one() -> None:
        def placed() -> bool:
            placed = getattr(run.dispatcher.pool, "_placed", None)
            return bool(placed) and all(p.ref is not None for p in placed)

        _wait_until(placed, "both actors placed and running")
        chosen = run.dispatcher.pool._placed[1]  # type: ignore[union-attr]
        # evidence that it issues: the server answered some of this run's requests, and the
        # actor's progress report (every second) says it issued some, which the run counts
        # as incomplete once it is lost
        _wait_until(lambda: _served(sim_url) >= before + 10, "the run under way")
        _wait_until(lambda: chosen.issued > 0, "a progress report from the actor")
        killed.append(chosen.where["node_id"])
        killed_at.append(time.monotonic())
        ray.kill(chosen.actor.handle, no_restart=True)

    killer = threading.Thread(target=kill_one)
    killer.start()
    result = _execute(run)
    ended = time.monotonic()
    killer.join()
    assert killed, "the actor was never killed"
    # no hang: the run ends soon after the kill, well before the rest of its planned 10 s
    # plus the 9 s drain cap (what a run that waited for the lost actor would take)
    assert ended - killed_at[0] < 8.0
    assert result.stop_reason is StopReason.WORKER_LOST and result.interrupted
    counts = result.counts
    assert counts["issued"] < 600
    assert counts["incomplete"] > 0  # the lost actor's requests, counted
    assert counts["issued"] == counts["completed"] + counts["failed"]
    check = result.self_check
    assert check["generator_bound"] is True
    [message] = [r for r in check["reasons"] if "was lost" in r]
    assert "Ray actor w1" in message and killed[0][:12] in message
    states = {r["worker"]: r["state"] for r in check["worker_runs"]}
    assert states == {"w0": "ok", "w1": "lost"}
    samples = result.accumulator.error_samples.to_state()
    assert any("Ray actor w1" in json.dumps(s) for s in samples)
    # the dead actor is not reused: the next run gets a fresh one and completes
    again = _execute(
        LoadRun(endpoint, make_spec("constant", rate=200, requests=10), workers=2, ray=cluster)
    )
    assert again.counts["completed"] == 10
    assert {r["state"] for r in again.self_check["worker_runs"]} == {"ok"}


def test_ray_auto_settles_one_actor_per_free_cpu(
    ray_instance: Any, sim_url: str, make_spec: Callable[..., RunSpec]
) -> None:
    # earlier tests' actors release their CPUs asynchronously: settle before reading
    total = ray_instance.cluster_resources().get("CPU", 0.0)
    deadline = time.monotonic() + 20
    while (
        ray_instance.available_resources().get("CPU", 0.0) < total and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    cluster = RayCluster(auto=True)
    try:
        free = ray_instance.available_resources().get("CPU", 0.0)
        expected = max(1, math.floor(free))
        result = _execute(
            LoadRun(Endpoint(sim_url), make_spec("constant", rate=200, requests=20), ray=cluster)
        )
        assert cluster.auto_count == expected
        assert result.self_check["workers"] == expected == len(result.self_check["worker_runs"])
        assert result.counts["completed"] == 20
    finally:
        cluster.close()


def test_more_actors_than_free_cpus_get_a_share_each_never_a_wait(
    cluster: RayCluster, sim_url: str, make_spec: Callable[..., RunSpec]
) -> None:
    total = ray.cluster_resources().get("CPU", 0.0)  # all free once earlier actors are gone
    result = _execute(
        LoadRun(
            Endpoint(sim_url), make_spec("constant", rate=200, requests=30), workers=4, ray=cluster
        )
    )
    assert result.counts["completed"] == 30
    cpus = {r["cpus"] for r in result.self_check["worker_runs"]}
    assert cpus == {math.floor(total / 4 * 100) / 100} and max(cpus) < 1


TEST_FILE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=20)
@pytest.mark.llm_load("constant", rate=100)
async def test_run(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.counts["completed"] == 20
"""


def test_plugin_runs_ray_2_and_reports_where_the_workers_ran(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_on_ray=TEST_FILE)
    result = pytester.runpytest_subprocess(
        "--llm-workers=ray:2", "--llm-json=out.json", "--llm-events=events", "-q"
    )
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "out.json").read_text())
    [run] = report["tests"][0]["runs"]
    check = run["self_check"]
    assert check["workers"] == 2 and check["worker_backend"] == "ray"
    assert sum(n["workers"] for n in check["worker_nodes"]) == 2
    assert [w["requests"] for w in check["worker_runs"]] == [10, 10]
    assert run["counts"]["completed"] == 20
    path = Path(run["events"])
    path = path if path.is_absolute() else pytester.path / path
    assert analyse_event_log(path).counts() == run["counts"]


def test_ray_without_the_extra_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import sys\nsys.modules['ray'] = None  # as if not installed\n")
    pytester.makepyfile(test_on_ray=TEST_FILE)
    result = pytester.runpytest_subprocess("--llm-workers=ray:2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--llm-workers" in err and 'pip install "pytest-llmperf[ray]"' in err


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("ray:0", "must be > 0, got '0'"),
        ("ray:x", "expected a whole number, got 'x'"),
        ("ray", "ray:N"),
    ],
)
def test_bad_ray_worker_values_are_usage_errors(
    pytester: pytest.Pytester, value: str, says: str
) -> None:
    pytester.makepyfile(test_on_ray=TEST_FILE)
    result = pytester.runpytest(f"--llm-workers={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--llm-workers" in err and says in err


def test_ray_under_xdist_without_a_cluster_address_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each xdist worker would otherwise start a local Ray instance of its own."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    pytester.makepyfile(test_on_ray=TEST_FILE)
    result = pytester.runpytest("-n", "2", "--llm-workers=ray:2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--llm-workers" in err and "--llm-ray-address" in err and "xdist" in err
