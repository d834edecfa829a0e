"""The GPU's side of a run: power, energy, memory, utilisation and temperature, sampled
while the load runs (NVML on this machine, an NVIDIA DCGM exporter's page for a server
elsewhere, ``amdsmi`` for AMD), and energy per output token (docs/gpu.md).

Imports only ``errors`` and ``specs`` (and third-party libraries); one job a module:

- :mod:`.readings`: one GPU at one instant, the shape every source produces;
- :mod:`.nvml`: NVML loaded once per process, and one read of the chosen GPUs;
- :mod:`.amd`: the same through ``amdsmi`` (optional);
- :mod:`.dcgm`: a DCGM exporter's page as one read of its GPUs;
- :mod:`.sampler`: the 10 Hz daemon thread around and during a run;
- :mod:`.local`: ``--llm-gpu``, resolved once per session;
- :mod:`.energy`: the arithmetic (counter deltas, power integrated, the HTML series);
- :mod:`.run_figures`: every source's reads as the run's ``gpu`` block;
- :mod:`.figures`: that block (``runs[].gpu``).
"""

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
