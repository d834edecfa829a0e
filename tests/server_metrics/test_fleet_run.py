"""A run with a fleet of pages: each page sampled on its own, ``runs[].fleet`` and the whole.

The requests go to one simulator (replica ``0``); a second simulator that serves
nothing is replica ``1`` (its page is read, its counters do not move), and a third
page 404s. Every request completes; the failing page is missing with its reason and
the others still count. One page given as today (``URL``) writes today's JSON: no
``fleet`` key, the same ``server_metrics`` keys.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from loopback import ServeApp, aiohttp_apps, running_in_thread

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.server_metrics.fleet_source import FleetSource, resolve_metrics
from pytest_llmperf.server_metrics.source import ServerMetricsSource
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

SERVER_METRICS_KEYS = {
    "source", "family", "metrics", "series", "raw", "missing", "scrapes", "buckets", "notes",
}  # fmt: skip


@pytest.fixture
def gone() -> Iterator[str]:
    """The root URL of a server whose every page 404s."""
    with aiohttp_apps() as start:
        serve: ServeApp = start
        yield serve(web.Application())


def spec(requests: int) -> RunSpec:
    load = LoadSpec.parse("concurrency", {"concurrency": 4})
    return RunSpec("synthetic", {"input_tokens": 8, "output_tokens": 4}, 0, load, requests)


@pytest.mark.asyncio
async def test_two_pages_and_a_404_give_each_page_the_pools_and_the_whole(gone: str) -> None:
    async with (
        SimServer("fixed", ttft_ms=2.0, itl_ms=0.5) as zero,
        SimServer("fixed", ttft_ms=2.0, itl_ms=0.5) as one,
    ):
        endpoint = Endpoint(zero.url + "/v1", timeouts=Timeouts.from_seconds(10))
        option = (
            f"replica:0={zero.url}/metrics,replica:1={one.url}/metrics,"
            f"replica:gone={gone}/metrics,0.2"
        )
        source, note = await asyncio.to_thread(resolve_metrics, endpoint, option)
        assert isinstance(source, FleetSource)
        assert note.startswith("fleet of 3 pages: replica 0 (sim), replica 1 (sim), replica gone")
        result = await LoadRun(endpoint, spec(12), server_metrics=source).execute()
    assert result.counts["completed"] == 12 and result.counts["failed"] == 0
    fleet = result.fleet
    assert fleet is not None and [p.name for p in fleet.pages] == ["0", "1", "gone"]
    page = {p.name: p.metrics for p in fleet.pages}
    assert page["0"].missing is None and page["0"].metrics["server.requests"]["value"] == 12
    assert page["1"].missing is None and page["1"].metrics["server.requests"]["value"] == 0
    assert page["gone"].missing is not None and "404" in page["gone"].missing
    assert fleet.requests == {"0": 12.0, "1": 0.0}
    assert any(n.startswith("replica gone: no numbers (GET ") for n in fleet.notes)
    whole = result.server_metrics
    assert whole is not None and fleet.whole is not None
    assert whole.metrics["server.requests"] == {"value": 12.0}  # the others still count
    assert any(n.startswith("replica gone: GET ") and "404" in n for n in whole.notes)
    assert whole.metrics["server.ttft"]["count"] == 12
    assert whole.source is not None and whole.source.startswith("fleet: replica 0, replica 1")
    assert whole.family.value == "sim"  # the pages that had numbers say whose names they are
    assert fleet.roles["replica"].metrics["server.requests"] == {"value": 12.0}
    out = result.to_dict()
    assert out["server_metrics"] == whole.to_dict()  # the fleet as one, as runs[].server_metrics
    assert [p["name"] for p in out["fleet"]["pages"]] == ["0", "1", "gone"]
    assert "whole" not in out["fleet"]  # not written a second time
    json.dumps(out, allow_nan=False)  # strict JSON


@pytest.mark.asyncio
async def test_one_page_as_today_writes_todays_json() -> None:
    async with SimServer("fixed", ttft_ms=2.0, itl_ms=0.5) as sim:
        endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(10))
        source, note = await asyncio.to_thread(resolve_metrics, endpoint, "0.2")
        assert isinstance(source, ServerMetricsSource)  # today's path, untouched
        assert note == f"sim at {sim.url}/metrics every 0.2 s"
        result = await LoadRun(endpoint, spec(6), server_metrics=source).execute()
    assert result.fleet is None
    out = result.to_dict()
    assert "fleet" not in out
    assert set(out["server_metrics"]) == SERVER_METRICS_KEYS
    assert out["server_metrics"]["metrics"]["server.requests"] == {"value": 6.0}


INNER = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=6)
@pytest.mark.llm_load("concurrency", concurrency=3)
@pytest.mark.llm_slo("server.requests == 6")
async def test_fleet(llm_loadgen):
    await llm_loadgen.run()
"""


def test_the_plugin_reads_a_list_from_its_ini_and_reports_the_fleet(
    pytester: pytest.Pytester, gone: str
) -> None:
    sim = SimServer("fixed", ttft_ms=2.0, itl_ms=0.5)
    with running_in_thread(lambda: sim, "sim"):
        pages = f"replica:0={sim.url}/metrics,replica:gone={gone}/metrics,0.2"
        pytester.makeini(f"[pytest]\nllm_server_metrics = {pages}\n")
        pytester.makepyfile(INNER)
        # the simulator shares the client's process here: on a busy machine the generator
        # may be CPU-bound, which makes the verdict inconclusive, not wrong (observed below)
        result = pytester.runpytest(
            f"--llm-endpoint={sim.url}/v1", "--llm-json=out.json", "--llm-inconclusive=warn"
        )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["llmperf: server metrics: a fleet of pages (replica:0=*"])
    report = json.loads((Path(pytester.path) / "out.json").read_text())
    test = report["tests"][0]
    (verdict,) = test["slos"]
    assert verdict["observed"] == 6 and verdict["verdict"] in ("pass", "inconclusive"), verdict
    said = test["endpoint"]["server_metrics"]
    assert said.startswith("fleet of 2 pages: replica 0 (sim), replica gone (none: GET ")
    (run,) = test["runs"]
    assert [p["name"] for p in run["fleet"]["pages"]] == ["0", "gone"]
    assert run["fleet"]["requests"] == {"0": 6.0}
    assert run["server_metrics"]["metrics"]["server.requests"] == {"value": 6.0}


def test_a_bad_item_is_a_usage_error_at_configure_time(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    (pytester.path / "pages.txt").write_text(
        "replica:0=http://w0:1/metrics\nreplica:0=http://w1:1/m\n"
    )
    result = pytester.runpytest("--llm-server-metrics=@pages.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = result.stderr.str() + result.stdout.str()
    assert "--llm-server-metrics (pages.txt, line 2)" in said
    assert "two pages named '0'" in said
