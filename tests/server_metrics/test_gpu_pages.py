"""The ``gpu`` page role: an NVIDIA DCGM exporter's page in the list of pages, sampled with
the fleet but never an engine page, its GPUs the run's ``runs[].gpu``.

The exporter is a loopback page (aiohttp) in the exporter's documented format
(tests/gpu/dcgm_pages.py): two GPUs on node-a whose energy counters rise a fixed step at
every scrape (so the run's energy is known exactly from the count of scrapes), one GPU
on node-b without the counter. The load goes to the embedded simulator, whose own
``/metrics`` stays the server's page when only gpu pages are given.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from loopback import ServeApp, aiohttp_apps

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.gpu.figures import EnergySource, TokenSource
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.server_metrics.discovery import discover_pages
from pytest_llmperf.server_metrics.fleet import PageSpec
from pytest_llmperf.server_metrics.fleet_reset import fleet_servers
from pytest_llmperf.server_metrics.fleet_source import FleetSource, resolve_metrics
from pytest_llmperf.server_metrics.source import parse_option
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.fleet_names import PageRole
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

sys.path.insert(0, str(Path(__file__).parents[1] / "gpu"))
from dcgm_pages import DcgmGpu, dcgm_page

STEP_MJ = 50_000.0  # each scrape: 50 J more on each counter


class Exporter:
    """A DCGM exporter whose counters rise ``STEP_MJ`` per scrape; counts its scrapes."""

    def __init__(self) -> None:
        self.scrapes = 0

    def app(self) -> web.Application:
        app = web.Application()

        async def metrics(request: web.Request) -> web.Response:
            k = self.scrapes
            self.scrapes += 1
            gpus = [
                DcgmGpu("0", "GPU-a0", "node-a", 300.0, 9e9 + STEP_MJ * k, fb_used=2000 + k),
                DcgmGpu("1", "GPU-a1", "node-a", 200.0, 1e6 + STEP_MJ * k, util_pct=70),
                DcgmGpu("0", "GPU-b0", "node-b", 70.0, None, model="NVIDIA A10"),
            ]
            return web.Response(text=dcgm_page(gpus), content_type="text/plain")

        app.router.add_get("/metrics", metrics)
        return app


@pytest.fixture
def start() -> Iterator[ServeApp]:
    with aiohttp_apps() as serve:
        yield serve


def spec(requests: int) -> RunSpec:
    load = LoadSpec.parse("concurrency", {"concurrency": 4})
    return RunSpec("synthetic", {"input_tokens": 8, "output_tokens": 4}, 0, load, requests)


def test_the_option_takes_a_gpu_page_beside_the_engines_and_in_a_file(tmp_path: Path) -> None:
    parsed = parse_option("gpu=http://node:9400/metrics,replica:w1=http://w1:8000/metrics")
    assert parsed.pages is not None and parsed.pages.pages == (
        PageSpec(PageRole.GPU, "node:9400", "http://node:9400/metrics"),
        PageSpec(PageRole.REPLICA, "w1", "http://w1:8000/metrics"),
    )
    listed = tmp_path / "pages.txt"
    listed.write_text("# the GPUs\ngpu:node-a=http://a:9400/metrics\n", encoding="utf-8")
    from_file = parse_option(f"@{listed}").pages
    assert from_file is not None
    assert from_file.pages == (PageSpec(PageRole.GPU, "node-a", "http://a:9400/metrics"),)


def test_a_gpu_page_is_no_engine_server_to_reset() -> None:
    target = Endpoint("http://r:8000/v1")
    from pytest_llmperf.server_metrics.fleet_source import FleetPage

    source = FleetSource(
        (
            FleetPage(PageSpec(PageRole.GPU, "g", "http://g:9400/metrics")),
            FleetPage(PageSpec(PageRole.REPLICA, "w", "http://w:8001/metrics")),
        )
    )
    assert [e.base_url for e in fleet_servers(target, source)] == ["http://w:8001/v1"]


def test_the_simulators_listing_may_name_a_gpu_page(start: ServeApp) -> None:
    app = web.Application()

    async def listing(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "router": "round_robin",
                "pages": [
                    {"role": "replica", "name": "0", "metrics": "/replicas/0/metrics"},
                    {"role": "gpu", "name": "gpus", "metrics": "/gpu/metrics"},
                ],
            }
        )

    app.router.add_get("/llmperf/fleet", listing)
    root = start(app)
    found = discover_pages(Endpoint(root + "/v1"), root)
    assert [(p.role, p.name, p.url) for p in found.pages] == [
        (PageRole.REPLICA, "0", f"{root}/replicas/0/metrics"),
        (PageRole.GPU, "gpus", f"{root}/gpu/metrics"),
    ]


@pytest.mark.asyncio
async def test_a_run_with_a_dcgm_page_gives_each_gpus_figures_and_energy_per_token(
    start: ServeApp,
) -> None:
    exporter = Exporter()
    gpu_url = start(exporter.app()) + "/metrics"
    gone = start(web.Application()) + "/metrics"  # a second gpu page that 404s
    async with SimServer("fixed", ttft_ms=2.0, itl_ms=0.5) as sim:
        endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(10))
        option = f"gpu:node-a={gpu_url},gpu:gone={gone},0.2"
        source, note = await asyncio.to_thread(resolve_metrics, endpoint, option)
        assert isinstance(source, FleetSource)
        assert "gpu node-a (unknown)" in note and "replica " in note  # the endpoint's page
        before = exporter.scrapes  # the probe's
        result = await LoadRun(endpoint, spec(12), server_metrics=source).execute()
    scrapes = exporter.scrapes - before
    assert result.counts["completed"] == 12 and scrapes >= 2
    # the engine side: the endpoint's own page alone, the gpu page in no pool nor the whole
    fleet = result.fleet
    assert fleet is not None and [p.role for p in fleet.pages] == [PageRole.REPLICA]
    assert "gpu" not in fleet.roles
    assert result.server_metrics is not None
    assert result.server_metrics.metrics["server.requests"] == {"value": 12.0}
    gpu = result.gpu
    assert gpu is not None
    assert gpu.sources == [f"dcgm {gpu_url}"]
    by = {(d.host, d.id): d for d in gpu.devices}
    assert set(by) == {("node-a", "0"), ("node-a", "1"), ("node-b", "0")}
    a0, a1, b0 = by["node-a", "0"], by["node-a", "1"], by["node-b", "0"]
    exact = STEP_MJ / 1000 * (scrapes - 1)  # J between the run's first and last scrape
    assert a0.energy_from is EnergySource.COUNTER and a0.energy_j == pytest.approx(exact)
    assert a1.energy_j == pytest.approx(exact) and a0.samples == scrapes
    assert b0.energy_from is EnergySource.POWER and b0.name == "NVIDIA A10"
    assert b0.series is not None
    span = b0.series.t_s[-1] - b0.series.t_s[0]
    assert b0.energy_j == pytest.approx(70.0 * span, abs=70.0 * 0.002)
    assert a0.memory_used_mb_max == 2000 + exporter.scrapes - 1
    assert gpu.power_w_mean == pytest.approx(570.0) and gpu.power_w_max == pytest.approx(570.0)
    assert any(n.startswith("gpu page gone: no numbers (GET ") for n in gpu.notes)
    generated = result.server_metrics.stat("server.generation_tokens", None)
    assert generated == 48  # the simulator's own counter: 12 requests x 4 tokens
    assert gpu.output_tokens_from is TokenSource.SERVER and gpu.output_tokens == generated
    out = result.to_dict()
    assert out["gpu"]["energy_per_output_token_j"] == pytest.approx(gpu.energy_j / 48)
    assert out["gpu"]["energy_j"] == pytest.approx(2 * exact + b0.energy_j)
    json.dumps(out, allow_nan=False)  # strict JSON
