"""The sampler against real servers on 127.0.0.1: misbehaving /metrics pages, a router that
alternates two workers, and the simulator during a short run.

A /metrics that 404s, hangs, trickles or serves garbage must never raise out of the
sampler or hold up the run: ``start()`` and ``stop()`` return within their bounds
(scrapes limited to 0.5 s here), and the summary's ``missing`` gives the first
reason. The bounds asserted are the sampler's own limits plus seconds, a margin
no busy machine's scheduling noise comes near: the point is that nothing hangs.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator

import httpx
import pytest
from odd_servers import OddServer, Request, Wire, always, serve_in_thread, trickles
from prom_pages import VllmPage

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.server_metrics.sampler import (
    START_WAIT_S,
    ServerMetricsRecording,
    ServerMetricsSampler,
)
from pytest_llmperf.server_metrics.source import ServerMetricsSource, resolve_source
from pytest_llmperf.server_metrics.summary import ServerFamily
from pytest_llmperf.sim import SimServer

LIMIT_S = 0.5  # each scrape
MARGIN_S = 5.0  # beyond the sampler's own bounds: generous for a busy 2-core machine


def endpoint(url: str) -> Endpoint:
    return Endpoint.from_env(url, api_key_env=None, timeouts=Timeouts.from_seconds(5))


async def never_answers(req: Request, wire: Wire) -> None:
    await asyncio.sleep(3600)


async def html_page(req: Request, wire: Wire) -> None:
    body = b"<html><body><h1>Welcome to nginx!</h1></body></html>"
    await wire.whole(200, body, {"Content-Type": "text/html"})


def sample_briefly(url: str, run_s: float = 0.6) -> tuple[ServerMetricsRecording, float, float]:
    """start, a 'run' of ``run_s``, stop: the recording and how long start and stop took."""
    source = ServerMetricsSource(url + "/metrics", 0.2, ServerFamily.VLLM)
    sampler = ServerMetricsSampler(endpoint(url), source, scrape_limit_s=LIMIT_S)
    began = time.monotonic()
    sampler.start()
    start_s = time.monotonic() - began
    time.sleep(run_s)
    began = time.monotonic()
    rec = sampler.stop()
    return rec, start_s, time.monotonic() - began


@pytest.mark.parametrize(
    ("behaviour", "says"),
    [
        (always(404, "Not Found"), "/metrics: 404 Not Found"),
        (never_answers, "/metrics: never answered: no response head in 0.5 s"),
        (trickles, "/metrics: sent the head (HTTP 200)"),
        (html_page, "/metrics: not Prometheus text (an HTML or XML page)"),
    ],
    ids=["404", "hangs", "trickles", "html"],
)
def test_a_bad_metrics_page_never_raises_nor_holds_up_the_run(behaviour: object, says: str) -> None:
    with serve_in_thread(OddServer(behaviour, models=False)) as srv:  # type: ignore[arg-type]
        url = srv.url
        rec, start_s, stop_s = sample_briefly(url)
    assert start_s < START_WAIT_S + MARGIN_S
    assert stop_s < 2 * LIMIT_S + MARGIN_S
    assert rec.scrapes == [] and rec.failures
    out = rec.summary(rec.started_ns)
    assert out.missing is not None and out.missing.startswith(f"GET {url}{says}")
    assert not out.metrics and out.source == url + "/metrics"


def test_a_hanging_page_is_not_asked_again_at_the_end() -> None:
    with serve_in_thread(OddServer(never_answers, models=False)) as srv:
        rec, _, _ = sample_briefly(srv.url, run_s=0.1)
    roles = [a.role for a in rec.attempts]
    assert roles[0] == "start" and "end" not in roles  # the last one just did not answer


def test_a_router_alternating_two_workers_is_reported_not_summed() -> None:
    workers = [VllmPage(started=1000.0), VllmPage(started=2000.0)]
    for _ in range(946):
        workers[0].request(queue_s=0.01, prefill_s=0.01, decode_s=0.01, output=10)
    for _ in range(128):
        workers[1].request(queue_s=0.01, prefill_s=0.01, decode_s=0.01, output=10)
    turn: Iterator[VllmPage] = itertools.cycle(workers)

    async def router(req: Request, wire: Wire) -> None:
        text = next(turn).text().encode()
        await wire.whole(200, text, {"Content-Type": "text/plain; version=0.0.4"})

    with serve_in_thread(OddServer(router, models=False)) as srv:
        rec, _, _ = sample_briefly(srv.url)
    assert len(rec.scrapes) >= 2
    out = rec.summary(rec.started_ns)
    assert out.missing is not None and "not one process's" in out.missing
    assert "--llm-server-metrics=URL" in out.missing and not out.metrics


def test_resolve_source_probes_once_and_says_what_it_found() -> None:
    page = VllmPage()

    async def metrics(req: Request, wire: Wire) -> None:
        await wire.whole(200, page.text().encode(), {"Content-Type": "text/plain"})

    with serve_in_thread(OddServer(metrics, models=False)) as srv:
        source, note = resolve_source(endpoint(srv.url + "/v1"), "2")
        assert source is not None and source.family is ServerFamily.VLLM
        assert source.url == srv.url + "/metrics" and source.interval_s == 2.0
        assert note == f"vllm at {srv.url}/metrics every 2 s"
        other, note = resolve_source(endpoint("http://127.0.0.1:9/v1"), f"{srv.url}/metrics")
        assert other is not None and other.url == f"{srv.url}/metrics" and other.interval_s == 1
        assert len(srv.requests) == 2
    assert resolve_source(endpoint("http://127.0.0.1:9"), "off") == (None, "off")
    with serve_in_thread(OddServer(always(404, "Not Found"), models=False)) as bad:
        none, note = resolve_source(endpoint(bad.url), "auto")
        assert none is None and note.startswith(f"none (GET {bad.url}/metrics: 404 Not Found")


def test_credentials_go_only_to_the_endpoints_own_origin() -> None:
    page = VllmPage()

    async def metrics(req: Request, wire: Wire) -> None:
        await wire.whole(200, page.text().encode(), {"Content-Type": "text/plain"})

    with (
        serve_in_thread(OddServer(metrics, models=False)) as own,
        serve_in_thread(OddServer(metrics, models=False)) as worker,
    ):
        keyed = Endpoint(own.url + "/v1", api_key="sk-secret-metrics-1", timeouts=Timeouts())
        resolve_source(keyed, "auto")
        resolve_source(keyed, worker.url + "/metrics")
    assert own.requests[0].headers.get("authorization") == "Bearer sk-secret-metrics-1"
    assert "authorization" not in worker.requests[0].headers


@pytest.mark.asyncio
async def test_the_sampler_beside_a_live_simulator_run() -> None:
    """A short run against the tiny profile (it preempts within seconds under load):
    the server's own counts equal the run's, and the loop never waited for a scrape."""
    async with (
        SimServer("tiny", speedup=4.0) as sim,  # about half a second of load
        httpx.AsyncClient(base_url=sim.url, timeout=30) as client,
    ):
        source, note = await asyncio.to_thread(resolve_source, endpoint(sim.url), "0.1")
        assert source is not None and source.family is ServerFamily.SIM, note
        assert note == f"sim at {sim.url}/metrics every 0.1 s"
        sampler = ServerMetricsSampler(endpoint(sim.url), source)
        await sampler.astart()
        t0 = time.monotonic_ns()
        prompt = " ".join(f"x{i}" for i in range(300))

        async def one(i: int) -> dict[str, int]:
            body = {"prompt": f"p{i} " + prompt, "max_tokens": 300}
            r = await client.post("/v1/completions", json=body)
            usage: dict[str, int] = r.json()["usage"]
            return usage

        usages = await asyncio.gather(*(one(i) for i in range(8)))
        rec = await sampler.astop()
        url = sim.url
    out = rec.summary(t0)
    assert out.missing is None, out.missing
    assert out.family is ServerFamily.SIM and out.source == f"{url}/metrics"
    m = out.metrics
    assert m["server.requests"]["value"] == 8
    assert m["server.generation_tokens"]["value"] == sum(u["completion_tokens"] for u in usages)
    assert m["server.prompt_tokens"]["value"] == sum(u["prompt_tokens"] for u in usages)
    assert m["server.preemptions"]["value"] > 0  # tiny's KV cache holds fewer than 8 at once
    for name in ("server.queue_time", "server.prefill_time", "server.decode_time", "server.e2e"):
        assert m[name]["count"] == 8, name
        assert m[name]["p50_lo"] < m[name]["p50"] and m[name]["p99"] <= m[name]["max"]
    assert m["server.ttft"]["count"] == 8
    assert m["server.kv_cache_usage"]["max"] > 0.5  # sampled while the cache was full
    assert out.series["server.kv_cache_usage"] and out.scrapes >= 3
    assert all(t >= 0 for t, _ in out.series["server.running"])


def test_resolve_source_against_a_page_that_never_answers_ends_within_its_limit() -> None:
    with serve_in_thread(OddServer(never_answers, models=False)) as srv:
        began = time.monotonic()
        source, note = resolve_source(endpoint(srv.url), "auto", limit_s=LIMIT_S)
        took = time.monotonic() - began
        assert source is None
        assert note.startswith(f"none (GET {srv.url}/metrics: never answered")
    assert took < LIMIT_S + MARGIN_S
