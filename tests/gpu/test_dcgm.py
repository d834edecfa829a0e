"""An NVIDIA DCGM exporter's page, in its documented format (dcgm_pages.py), as GPU reads
and a run's GPU figures: several GPUs on two hosts, a counter reset, a GPU without the
energy counter, DCGM's blank value."""

from __future__ import annotations

import pytest
from dcgm_pages import BLANK, DcgmGpu, dcgm_page

from pytest_llmperf.gpu.dcgm import dcgm_tick, parse_dcgm
from pytest_llmperf.gpu.figures import EnergySource
from pytest_llmperf.gpu.readings import GpuTick
from pytest_llmperf.gpu.run_figures import SourceReads, run_figures
from pytest_llmperf.server_metrics.exposition import Scrape, parse_scrape

S = 1_000_000_000  # ns


def fleet(t_s: float, energy: dict[str, float | None], power: dict[str, float]) -> list[DcgmGpu]:
    """Two H100s on node-a, one A10 (no energy counter) on node-b."""
    return [
        DcgmGpu("0", "GPU-aaaa-0", "node-a", power["a0"], energy["a0"], fb_used=1000 + t_s),
        DcgmGpu("1", "GPU-aaaa-1", "node-a", power["a1"], energy["a1"], util_pct=90),
        DcgmGpu("0", "GPU-bbbb-0", "node-b", power["b0"], None, fb_used=500, model="NVIDIA A10"),
    ]


def test_a_page_reads_every_gpu_of_both_hosts_in_canonical_units() -> None:
    page = dcgm_page(fleet(0, {"a0": 7e9, "a1": 1e6}, {"a0": 300, "a1": 250.5, "b0": 60}))
    tick = parse_dcgm(page, 5 * S, page="exporter:9400")
    by = {(g.host, g.id): (g, r) for g, r in tick.readings.items()}
    assert set(by) == {("node-a", "0"), ("node-a", "1"), ("node-b", "0")}
    gpu, r = by["node-a", "0"]
    assert (gpu.source, gpu.uuid, gpu.name) == ("dcgm", "GPU-aaaa-0", "NVIDIA H100 80GB HBM3")
    assert r.power_w == 300 and r.energy_j == 7e6  # mJ -> J
    assert r.util == 0.5 and r.memory_used_mb == 1000 and r.memory_total_mb == 81000
    assert r.temperature_c == 60 and r.sm_clock_mhz == 1980 and r.at_ns == 5 * S
    gpu, r = by["node-b", "0"]
    assert gpu.name == "NVIDIA A10" and r.energy_j is None and r.power_w == 60


def test_the_fleet_samplers_parse_gives_the_same_reads() -> None:
    """What the ``gpu`` page role reads (server_metrics' parser: a counter as ``_total``)
    equals the DCGM module's own parse of the page."""
    page = dcgm_page(fleet(0, {"a0": 7e9, "a1": 1e6}, {"a0": 300, "a1": 250, "b0": 60}))
    scrape = parse_scrape(page, 5 * S)
    assert isinstance(scrape, Scrape)
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total" in scrape.counters
    via_scrape = dcgm_tick({**scrape.gauges, **scrape.counters}, 5 * S, page="exporter:9400")
    assert via_scrape == parse_dcgm(page, 5 * S, page="exporter:9400")


def test_a_blank_value_is_not_read_and_a_page_without_hostname_takes_the_pages_name() -> None:
    page = (
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-x"} 123.5\n'
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
        f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="GPU-x"}} {BLANK}\n'
    )
    ((gpu, r),) = parse_dcgm(page, 0, page="w1:9400").readings.items()
    assert gpu.host == "w1:9400" and r.power_w == 123.5 and r.temperature_c is None


def test_a_page_without_dcgm_fields_reads_no_gpu() -> None:
    assert parse_dcgm("# TYPE vllm:x counter\nvllm:x_total 3\n", 0, page="p").readings == {}


def test_a_run_over_the_pages_sums_power_and_energy_and_says_the_reset_and_the_integration() -> (
    None
):
    """Five scrapes one second apart: node-a GPU 0's counter rises 300 J a second, GPU 1's
    resets between the 3rd and 4th scrape (its host rebooted the exporter); node-b's GPU
    has no counter: its energy is its power integrated."""
    ticks: list[GpuTick] = []
    for k in range(5):
        a1 = 1e6 + 250e3 * k if k < 3 else 250e3 * (k - 3)  # mJ: back to 0 after the reset
        power = {"a0": 300.0, "a1": 250.0, "b0": 60.0 + 10 * k}
        page = dcgm_page(fleet(k, {"a0": 7e9 + 300e3 * k, "a1": a1}, power))
        ticks.append(parse_dcgm(page, (10 + k) * S, page="exporter:9400"))
    figures = run_figures(
        [SourceReads("dcgm http://exporter:9400/metrics", ticks, 1.0)],
        10 * S,
        server_tokens=2000,
        client_tokens=1990,
    )
    assert figures is not None
    by = {(d.host, d.id): d for d in figures.devices}
    a0, a1, b0 = by["node-a", "0"], by["node-a", "1"], by["node-b", "0"]
    assert a0.energy_from is EnergySource.COUNTER and a0.energy_j == pytest.approx(1200.0)
    # 2 rises of 250 J before the reset, 1 after, and the reset's second bridged by power
    assert a1.energy_from is EnergySource.COUNTER and a1.energy_j == pytest.approx(1000.0)
    # 60, 70, 80, 90, 100 W one second apart: trapezoids give 320 J
    assert b0.energy_from is EnergySource.POWER and b0.energy_j == pytest.approx(320.0)
    assert b0.power_w_mean == pytest.approx(80.0) and b0.power_w_max == 100.0
    assert any("node-a: its energy counter went back 1 time" in n for n in figures.notes)
    assert any("GPU 0 on node-b: no energy counter" in n for n in figures.notes)
    assert figures.energy_j == pytest.approx(2520.0)
    assert figures.power_w_mean == pytest.approx(300 + 250 + 80)
    assert figures.power_w_peak == pytest.approx(300 + 250 + 100)  # read together, at k=4
    assert figures.memory_used_mb_max == 1004.0  # the worst single GPU
    assert figures.util == pytest.approx((0.5 + 0.9 + 0.5) / 3)
    assert figures.energy_per_output_token_j == pytest.approx(2520.0 / 2000)
    out = figures.to_dict()
    assert out["output_tokens_from"] == "server" and out["energy_j"] == pytest.approx(2520.0)
    assert out["devices"][0]["series"]["t_s"] == [0.0, 1.0, 2.0, 3.0, 4.0]
