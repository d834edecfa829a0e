"""A run whose server's /metrics misbehaves: the run is the same, the report says why.

The requests go to the simulator; the metrics source is a page on another port
that 404s, never answers or serves garbage. Every request still completes (the
sampler's thread never touches the run's loop), and the run's ``server_metrics``
says what went wrong with the page. The per-request timings the simulator
returns still fill the latency names, so the report keeps what it can.
"""

from __future__ import annotations

import asyncio

import pytest
from odd_servers import OddServer, Request, Wire, always, serve_in_thread

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.server_metrics.source import ServerMetricsSource
from pytest_llmperf.server_metrics.summary import ServerFamily
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec


async def never_answers(req: Request, wire: Wire) -> None:
    await asyncio.sleep(3600)


async def garbage(req: Request, wire: Wire) -> None:
    await wire.whole(200, b"\x00\x01{not prometheus at all\n", {"Content-Type": "text/plain"})


@pytest.mark.parametrize(
    ("behaviour", "says"),
    [
        (always(404, "Not Found"), "404"),
        (never_answers, "never answered"),
        (garbage, "not Prometheus text"),
    ],
    ids=["404", "hangs", "garbage"],
)
@pytest.mark.asyncio
async def test_a_bad_page_leaves_the_run_whole_and_says_why(behaviour: object, says: str) -> None:
    with serve_in_thread(OddServer(behaviour, models=False)) as page:  # type: ignore[arg-type]
        page_url = page.url
        source = ServerMetricsSource(page_url + "/metrics", 0.2, ServerFamily.VLLM)
        async with SimServer("fixed", ttft_ms=5.0, itl_ms=1.0) as sim:
            endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(10))
            load = LoadSpec.parse("concurrency", {"concurrency": 4})
            spec = RunSpec("synthetic", {"input_tokens": 8, "output_tokens": 4}, 0, load, 40)
            result = await LoadRun(endpoint, spec, server_metrics=source).execute()
    assert result.counts["completed"] == 40 and result.counts["failed"] == 0
    server = result.server_metrics
    assert server is not None and server.missing is not None
    assert says in server.missing and page_url in server.missing
    assert "server.preemptions" not in server.metrics  # nothing made up
    # what the responses said is kept: the simulator returns vLLM's per-request metrics
    assert server.source == "responses" and server.metrics["server.queue_time"]["count"] == 40
