"""The simulated GPUs' DCGM exporter page over loopback (``GET /llmperf/dcgm/metrics``).

Read with ``prometheus_client``'s own parser, as a scraper reads dcgm-exporter: the
default counters' names, types and labels, one sample per GPU; at rest the energy
counter rises by the idle power times the time between two reads (bracketed by the
client's monotonic clock); under load the power, utilisation and memory rise and the
counter rises faster; ``/llmperf/fleet`` lists the page with role ``gpu`` only where the
profile has GPUs.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_llmperf.sim import SimServer
from pytest_llmperf.sim.dcgm_page import DCGM_PATH

FIELDS = {
    "DCGM_FI_DEV_SM_CLOCK": "gauge",
    "DCGM_FI_DEV_MEM_CLOCK": "gauge",
    "DCGM_FI_DEV_GPU_TEMP": "gauge",
    "DCGM_FI_DEV_POWER_USAGE": "gauge",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
    "DCGM_FI_DEV_GPU_UTIL": "gauge",
    "DCGM_FI_DEV_FB_FREE": "gauge",
    "DCGM_FI_DEV_FB_USED": "gauge",
}
LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"}
POWER, ENERGY = "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


async def read_page(
    client: httpx.AsyncClient, url: str
) -> tuple[float, dict[str, dict[str, float]], float]:
    """(monotonic before, {field: {gpu: value}}, monotonic after) of one read."""
    before = time.monotonic()
    resp = await client.get(url + DCGM_PATH)
    after = time.monotonic()
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    values: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(resp.text):
        for sample in family.samples:
            values.setdefault(family.name, {})[sample.labels["gpu"]] = sample.value
    return before, values, after


@pytest.mark.asyncio
async def test_the_page_is_dcgm_exporters_default_counters_for_each_gpu_and_is_listed() -> None:
    async with SimServer("gpu-2", speedup=10) as sim, httpx.AsyncClient(timeout=30) as client:
        resp = await client.get(sim.url + DCGM_PATH)
        listing = (await client.get(sim.url + "/llmperf/fleet")).json()
    families = list(text_string_to_metric_families(resp.text))
    assert {f.name: f.type for f in families} == FIELDS
    assert [f.name for f in families] == list(FIELDS)  # default-counters.csv's order
    for family in families:
        assert family.documentation.endswith(")."), family.documentation  # "(in W)." etc.
        assert [s.labels["gpu"] for s in family.samples] == ["0", "1"]
        for s in family.samples:
            assert set(s.labels) == LABELS
            assert s.labels["modelName"] == "NVIDIA H100 80GB HBM3"
            assert s.labels["device"] == f"nvidia{s.labels['gpu']}"
            assert s.labels["UUID"].startswith("GPU-")
    text = resp.text
    assert f"# TYPE {ENERGY} counter\n" in text and f"# HELP {POWER} Power draw (in W).\n" in text
    free = {
        s.labels["gpu"]: s.value for f in families if f.name.endswith("FB_FREE") for s in f.samples
    }
    used = {
        s.labels["gpu"]: s.value for f in families if f.name.endswith("FB_USED") for s in f.samples
    }
    assert all(free[g] + used[g] == 81559 for g in ("0", "1"))
    assert listing["pages"] == [
        {"role": "replica", "name": "0", "metrics": "/metrics"},
        {"role": "gpu", "name": "dcgm", "metrics": DCGM_PATH},
    ]


@pytest.mark.asyncio
async def test_a_profile_without_gpus_lists_and_serves_no_gpu_page() -> None:
    async with SimServer("tiny", speedup=10) as sim, httpx.AsyncClient(timeout=30) as client:
        missing = await client.get(sim.url + DCGM_PATH)
        listing = (await client.get(sim.url + "/llmperf/fleet")).json()
    assert missing.status_code == 404
    assert [p["role"] for p in listing["pages"]] == ["replica"]


@pytest.mark.asyncio
async def test_at_rest_the_counter_rises_by_the_idle_power_times_the_time_between_reads() -> None:
    async with SimServer("gpu-2") as sim, httpx.AsyncClient(timeout=30) as client:
        b1, first, a1 = await read_page(client, sim.url)
        await asyncio.sleep(0.2)  # time passing is what is measured, not waited out
        b2, second, a2 = await read_page(client, sim.url)
    for gpu in ("0", "1"):
        watts = first[POWER][gpu]
        assert second[POWER][gpu] == watts  # nothing ran: the same idle draw
        assert 70 * 0.98 <= watts <= 70 * 1.02
        joules = (second[ENERGY][gpu] - first[ENERGY][gpu]) / 1000  # mJ on the page
        # the reads happened inside their requests: between the closest and farthest ends
        assert watts * (b2 - a1) - 0.002 <= joules <= watts * (a2 - b1) + 0.002
    assert first[POWER]["0"] != first[POWER]["1"]  # two GPUs, each its own


async def stream_tokens(
    client: httpx.AsyncClient, url: str, model: str, started: asyncio.Event, k: int
) -> None:
    """One streamed request of 96 tokens; ``started`` once 16 of its chunks are read."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"prompt {k} " * 50}],
        "max_tokens": 96,
        "ignore_eos": True,
        "stream": True,
    }
    chunks = 0
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            chunks += line.startswith("data: {")
            if chunks == 16:
                started.set()


@pytest.mark.asyncio
async def test_under_load_power_utilisation_memory_and_the_energy_rate_rise() -> None:
    async with SimServer("gpu-2", speedup=2) as sim, httpx.AsyncClient(timeout=30) as client:
        _, idle, _ = await read_page(client, sim.url)
        events = [asyncio.Event() for _ in range(16)]
        tasks = [
            asyncio.create_task(stream_tokens(client, sim.url, sim.profile.model, e, k))
            for k, e in enumerate(events)
        ]
        await asyncio.gather(*(e.wait() for e in events))  # every request running
        b1, busy, _ = await read_page(client, sim.url)
        await asyncio.gather(*tasks)
        _, done, a2 = await read_page(client, sim.url)
    for gpu in ("0", "1"):
        assert busy[POWER][gpu] > 3 * idle[POWER][gpu]  # 16 running: ~345 W against 70 W
        assert busy["DCGM_FI_DEV_GPU_UTIL"][gpu] > 0
        assert busy["DCGM_FI_DEV_FB_USED"][gpu] > idle["DCGM_FI_DEV_FB_USED"][gpu]
        assert busy["DCGM_FI_DEV_SM_CLOCK"][gpu] > idle["DCGM_FI_DEV_SM_CLOCK"][gpu]
        mean_w = (done[ENERGY][gpu] - busy[ENERGY][gpu]) / 1000 / (a2 - b1)
        assert mean_w > 1.5 * idle[POWER][gpu]  # the rest of the load: well above idle
