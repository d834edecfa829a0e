"""The GPU's side of a run: power, energy, memory, utilisation and temperature, sampled
while the load runs (NVML on this machine, an NVIDIA DCGM exporter's page for a server
elsewhere, ``amdsmi`` for AMD), and energy per output token (docs/gpu.md)."""

from pytest_llmperf.gpu.figures import (
    EnergySource,
    GpuDevice,
    GpuFigures,
    GpuSeries,
    TokenSource,
    energy_per_token,
)

__all__ = [
    "EnergySource",
    "GpuDevice",
    "GpuFigures",
    "GpuSeries",
    "TokenSource",
    "energy_per_token",
]
