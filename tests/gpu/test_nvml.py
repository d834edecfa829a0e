"""NVML: the sampler driven by a double of pynvml's functions (nvml_double.py: the real
library cannot run here, there is no GPU), ``--llm-gpu``'s choices, and the path with the
real pynvml on a machine without a GPU: one note, no failure, no slowdown."""

from __future__ import annotations

import importlib
import threading
import time

import pytest
from nvml_double import DoubleGpu, nvml_double

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.gpu import nvml
from pytest_llmperf.gpu.figures import EnergySource, TokenSource
from pytest_llmperf.gpu.local import local_gpus
from pytest_llmperf.gpu.nvml import open_nvml, shared_nvml
from pytest_llmperf.gpu.run_figures import local_reads, run_figures
from pytest_llmperf.gpu.sampler import GpuSampler
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec


def two_gpus() -> list[DoubleGpu]:
    return [
        DoubleGpu(300.0, uuid="GPU-a", used_mb=30000.0),
        DoubleGpu(100.0, energy=False, uuid="GPU-b", name="Tesla T4", util_pct=80),
    ]


def wait_for_ticks(sampler: GpuSampler, n: int) -> None:
    """Until the sampler has ``n`` reads (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + 10
    while len(sampler.recording.ticks) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_the_sampler_reads_every_gpu_in_its_own_thread_and_asks_a_missing_field_once() -> None:
    module = nvml_double(two_gpus())
    local = local_gpus("auto", nvml=open_nvml(module))
    assert [g.name for g in local.gpus] == ["NVIDIA H100 80GB HBM3", "Tesla T4"]
    assert local.note.startswith("NVML, 2 GPUs (0: NVIDIA H100 80GB HBM3, 1: Tesla T4)")
    local.interval_s = 0.02
    sampler = local.sampler()
    assert sampler is not None
    sampler.start()
    wait_for_ticks(sampler, 6)
    recording = sampler.stop()
    ticks = len(recording.ticks)
    assert ticks >= 6 and recording.failures == 0
    assert "llmperf-gpu" in module.threads  # read off the caller's thread
    assert threading.current_thread().name in module.threads  # start() and stop()'s reads
    # GPU b has no counter: asked once, never again; GPU a every read
    assert module.calls["nvmlDeviceGetTotalEnergyConsumption"] == ticks + 1
    assert recording.cpu_s_per_read is not None and recording.cpu_s >= 0
    figures = run_figures([local_reads(recording, "nvml")], recording.started_ns)
    assert figures is not None and figures.sources == ["nvml"]
    a, b = figures.devices
    span_a = (a.series.t_s[-1] - a.series.t_s[0]) if a.series else 0.0
    assert span_a > 0
    assert a.energy_from is EnergySource.COUNTER
    assert a.energy_j == pytest.approx(300.0 * span_a, rel=0.05, abs=1.0)
    assert b.energy_from is EnergySource.POWER
    assert b.energy_j == pytest.approx(100.0 * span_a, rel=0.05, abs=1.0)
    assert (a.power_w_mean, b.power_w_mean) == (pytest.approx(300.0), pytest.approx(100.0))
    assert a.memory_used_mb_max == pytest.approx(30000.0) and b.util_mean == pytest.approx(0.8)
    assert a.temperature_c_max == 55 and a.sm_clock_mhz_mean == 1755
    assert figures.power_w_max == pytest.approx(400.0)  # read together: the summed peak


def test_a_read_that_raises_is_counted_never_raised() -> None:
    calls = []

    def read():  # type: ignore[no-untyped-def]
        calls.append(1)
        raise RuntimeError("GPU lost")

    sampler = GpuSampler(read, interval_s=0.01)
    sampler.start()
    recording = sampler.stop()
    assert recording.ticks == [] and recording.failures == len(calls) >= 2
    assert recording.failure == "RuntimeError('GPU lost')"
    reads = local_reads(recording, "nvml")
    assert reads.notes[0].startswith(f"nvml: {len(calls)} of {len(calls)} reads failed")


def test_indexes_choose_gpus_and_a_missing_one_is_a_usage_error_naming_it() -> None:
    load = open_nvml(nvml_double(two_gpus()))
    assert [g.id for g in local_gpus("1", nvml=load).gpus] == ["1"]
    assert [g.id for g in local_gpus("1,0", nvml=load).gpus] == ["0", "1"]
    with pytest.raises(LlmPerfUsageError) as err:
        local_gpus("0,3", nvml=load)
    assert "--llm-gpu" in str(err.value) and "no GPU 3 here: NVML sees 2" in str(err.value)
    with pytest.raises(LlmPerfUsageError, match=r"--llm-gpu.*got 'x1'"):
        local_gpus("x1", nvml=load)
    off = local_gpus("off", nvml=load)
    assert off.gpus == [] and off.sampler() is None


def test_nvml_that_does_not_start_is_one_note() -> None:
    load = open_nvml(nvml_double(two_gpus(), fail_init="Driver Not Loaded"))
    assert load.nvml is None and load.note == "NVML did not start: Driver Not Loaded"
    assert open_nvml(nvml_double([])).note == "NVML sees no GPU"
    local = local_gpus("0", nvml=load)  # no NVML at all: a note, not an error
    assert local.sampler() is None and "NVML did not start" in local.note


def test_the_real_pynvml_without_a_gpu_is_one_note_and_costs_nothing() -> None:
    """This machine has no NVIDIA driver: the shared loader says so without importing
    pynvml; the real pynvml itself fails to start with its own words."""
    real = importlib.import_module("pynvml")
    assert open_nvml(real).nvml is None
    began = time.perf_counter()
    fresh = nvml._load()  # what the first call of a process does (shared_nvml caches it)
    took = time.perf_counter() - began
    assert fresh.nvml is None and fresh.note is not None
    assert took < 0.5  # loosely: it is a failed dlopen (~0.1 ms), not an import
    assert shared_nvml() is shared_nvml()  # loaded once per process
    local = local_gpus("auto")
    assert local.gpus == [] and local.sampler() is None
    assert local.note.startswith("none on this machine (")


def spec(requests: int) -> RunSpec:
    load = LoadSpec.parse("concurrency", {"concurrency": 4})
    return RunSpec("synthetic", {"input_tokens": 8, "output_tokens": 4}, 0, load, requests)


@pytest.mark.asyncio
async def test_a_run_reads_its_gpus_and_a_run_without_gpus_is_no_slower() -> None:
    double = local_gpus("auto", nvml=open_nvml(nvml_double(two_gpus())))
    none = local_gpus("auto")  # the real path here: no GPU
    async with SimServer("fixed", ttft_ms=2.0, itl_ms=0.5) as sim:
        endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(10))
        with_gpus = await LoadRun(endpoint, spec(8), gpus=double).execute()
        off = await LoadRun(endpoint, spec(20), gpus=local_gpus("off")).execute()
        auto = await LoadRun(endpoint, spec(20), gpus=none).execute()
    gpu = with_gpus.gpu
    assert gpu is not None and len(gpu.devices) == 2 and gpu.sources == ["nvml"]
    assert gpu.devices[0].samples >= 2  # the reads at the run's start and end at least
    assert gpu.output_tokens_from is TokenSource.CLIENT  # no server metrics given
    assert gpu.output_tokens == with_gpus.accumulator.output_tokens == 32
    assert with_gpus.to_dict()["gpu"]["energy_per_output_token_j"] is not None
    assert off.gpu is None and auto.gpu is None and "gpu" not in auto.to_dict()
    assert auto.duration_s < 2 * off.duration_s + 1.0  # loosely: nothing is sampled
