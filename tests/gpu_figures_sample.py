"""A run's ``gpu`` block for the SLO, baseline, history and report tests, built with the
shared :class:`~pytest_llmperf.gpu.figures.GpuFigures` (as a producer would leave it):
two GPUs sampled together at 10 Hz for 2 s, both with an energy counter, the server's
output tokens counted."""

from __future__ import annotations

from pytest_llmperf.gpu.figures import (
    EnergySource,
    GpuDevice,
    GpuFigures,
    GpuSeries,
    TokenSource,
)


def device(index: int, *, power: float, memory: float, energy: float | None = None) -> GpuDevice:
    """GPU ``index``: power ramping from ``power - 50`` to ``power + 50`` W over 2 s."""
    t = [round(0.1 * k, 1) for k in range(21)]
    watts = [power - 50 + 5 * k for k in range(21)]
    return GpuDevice(
        id=str(index),
        source="nvml",
        name="NVIDIA H200",
        uuid=f"GPU-{index:08d}",
        samples=len(t),
        power_w_mean=power,
        power_w_max=power + 50,
        energy_j=energy if energy is not None else power * 2.0,
        energy_from=EnergySource.COUNTER,
        memory_used_mb_mean=memory - 100,
        memory_used_mb_max=memory,
        memory_total_mb=143_771.0,
        util_mean=0.5 + 0.2 * index,
        util_max=0.95,
        temperature_c_max=60.0 + 5 * index,
        sm_clock_mhz_mean=1980.0,
        series=GpuSeries(
            t_s=t,
            power_w=list(watts),
            memory_used_mb=[memory - 100 + 5 * k for k in range(21)],
            util=[0.5] * 21,
        ),
    )


def figures(*, output_tokens: float | None = 4000.0, power: float = 300.0) -> GpuFigures:
    """Two GPUs: 300 W and 200 W mean (500 W together, 1000 J over 2 s), 4000 output tokens
    (0.25 J per token), 41 000 MB the most any one used, 70 °C the hottest."""
    return GpuFigures(
        devices=[
            device(0, power=power, memory=30_000.0),
            device(1, power=power - 100, memory=41_000.0),
        ],
        sources=["nvml"],
        interval_s=0.1,
        power_w_max=2 * power - 100 + 80,
        output_tokens=output_tokens,
        output_tokens_from=TokenSource.SERVER if output_tokens else None,
    )
