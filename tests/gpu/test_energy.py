"""The arithmetic on known series: the energy counter against power integrated, a counter
reset, the series for the HTML, the GPUs together, the tokens energy per token divides by."""

from __future__ import annotations

import pytest

from pytest_llmperf.gpu.energy import (
    counter_energy_j,
    device_figures,
    downsample,
    integrated_energy_j,
    summed_power_max,
)
from pytest_llmperf.gpu.figures import EnergySource, TokenSource
from pytest_llmperf.gpu.readings import GpuId, GpuReading, GpuTick
from pytest_llmperf.gpu.run_figures import SourceReads, run_figures

MS = 1_000_000


def ramp(n: int = 101, *, counter: bool = True) -> list[GpuReading]:
    """10 s at 10 Hz, power rising linearly from 100 W to 300 W; the counter (J) is its
    exact integral, 100 t + 10 t**2."""
    out = []
    for k in range(n):
        t = k / 10
        out.append(
            GpuReading(
                at_ns=k * 100 * MS,
                power_w=100 + 20 * t,
                energy_j=(1e4 + 100 * t + 10 * t * t) if counter else None,
                memory_used_mb=1000 + k,
                util=0.5,
            )
        )
    return out


def test_integration_of_a_linear_ramp_is_exact_and_matches_the_counter() -> None:
    readings = ramp()
    exact = 100 * 10 + 10 * 10**2  # 2000 J
    assert integrated_energy_j([(r.at_ns, r.power_w) for r in readings]) == pytest.approx(exact)
    assert counter_energy_j(readings) == (pytest.approx(exact), 0)


def test_integration_skips_missing_reads_and_needs_two() -> None:
    assert integrated_energy_j([(0, 100.0)]) is None
    assert integrated_energy_j([(0, 100.0), (MS * 500, None), (MS * 1000, 100.0)]) == 100.0
    assert counter_energy_j(ramp(1)) == (None, 0)


def test_a_counter_reset_is_bridged_by_power() -> None:
    readings = [
        GpuReading(0, power_w=100.0, energy_j=500.0),
        GpuReading(1000 * MS, power_w=100.0, energy_j=600.0),
        GpuReading(2000 * MS, power_w=300.0, energy_j=5.0),  # reset: 200 J bridged
        GpuReading(3000 * MS, power_w=300.0, energy_j=305.0),
    ]
    assert counter_energy_j(readings) == (pytest.approx(100 + 200 + 300), 1)


def test_a_device_prefers_its_counter_and_falls_back_to_power() -> None:
    gpu = GpuId("0", "nvml", "H100")
    notes: list[str] = []
    with_counter = device_figures(gpu, ramp(), 0, notes)
    assert with_counter.energy_from is EnergySource.COUNTER and not notes
    without = device_figures(gpu, ramp(counter=False), 0, notes)
    assert without.energy_from is EnergySource.POWER
    assert without.energy_j == pytest.approx(2000.0)
    assert notes == ["GPU 0: no energy counter: energy is power integrated over the reads"]
    assert without.power_w_mean == pytest.approx(200.0)  # time-weighted
    assert without.power_w_max == pytest.approx(300.0)
    assert without.memory_used_mb_max == 1100 and without.util_mean == 0.5
    assert without.samples == 101


def test_the_series_is_downsampled_keeping_memory_peaks() -> None:
    readings = ramp(1000)
    series = downsample(readings, 0, points=100)
    assert len(series.t_s) == 100
    assert series.t_s[0] == pytest.approx(0.45)  # the mean time of its ten reads
    assert series.memory_used_mb[0] == 1009  # the largest of its bucket
    assert series.power_w[0] == pytest.approx(100 + 20 * 0.45)
    assert len(downsample(readings[:5], 0).t_s) == 5  # a short series is kept whole


def test_the_summed_peak_counts_only_ticks_where_every_gpu_read() -> None:
    a, b = GpuId("0", "nvml"), GpuId("1", "nvml")
    ticks = [
        GpuTick(0, {a: GpuReading(0, power_w=100.0), b: GpuReading(0, power_w=100.0)}),
        GpuTick(1, {a: GpuReading(1, power_w=400.0), b: GpuReading(1, power_w=None)}),
        GpuTick(2, {a: GpuReading(2, power_w=150.0), b: GpuReading(2, power_w=120.0)}),
    ]
    assert summed_power_max(ticks) == 270.0


def test_energy_per_token_divides_by_the_servers_count_else_the_clients() -> None:
    gpu = GpuId("0", "nvml", uuid="GPU-1")
    reads = [SourceReads("nvml", [GpuTick(r.at_ns, {gpu: r}) for r in ramp()], 0.1)]
    server = run_figures(reads, 0, server_tokens=4000, client_tokens=3000)
    assert server is not None and server.output_tokens_from is TokenSource.SERVER
    assert server.energy_per_output_token_j == pytest.approx(0.5)
    client = run_figures(reads, 0, server_tokens=None, client_tokens=3000)
    assert client is not None and client.output_tokens_from is TokenSource.CLIENT
    assert client.energy_per_output_token_j == pytest.approx(2000 / 3000)
    none = run_figures(reads, 0, server_tokens=0, client_tokens=0)
    assert none is not None and none.energy_per_output_token_j is None


def test_one_gpu_read_by_two_sources_counts_once_and_nothing_read_is_no_block() -> None:
    local = GpuId("0", "nvml", uuid="GPU-1")
    remote = GpuId("0", "dcgm", uuid="GPU-1", host="me")
    sources = [
        SourceReads("nvml", [GpuTick(r.at_ns, {local: r}) for r in ramp()], 0.1),
        SourceReads("dcgm http://me:9400/metrics", [GpuTick(r.at_ns, {remote: r}) for r in ramp()]),
    ]
    figures = run_figures(sources, 0, stages=True)
    assert figures is not None and [d.source for d in figures.devices] == ["nvml"]
    assert figures.energy_j == pytest.approx(2000.0)
    assert any("also read by an earlier source" in n for n in figures.notes)
    assert "the GPU figures are the whole run's (not per stage)" in figures.notes
    assert run_figures([SourceReads("nvml")], 0) is None
    failed = run_figures([SourceReads("dcgm http://x/metrics", notes=["gpu page x: 404"])], 0)
    assert failed is not None and failed.devices == [] and failed.notes == ["gpu page x: 404"]
    assert failed.to_dict()["energy_j"] is None
