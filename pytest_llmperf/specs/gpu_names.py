"""The names of a run's GPU figures (``gpu.power_w.mean``, ``gpu.energy_j``,
``energy_per_output_token_j``, ...): one table for the SLO grammar, verdicts, baselines,
history and reports.

Here, in the low package, like :mod:`.process_names`: the SLO grammar parses
``gpu.power_w.max < 700W`` at collection; every reader takes the value from a run's
``gpu`` block (``runs[].gpu``, :class:`pytest_llmperf.gpu.figures.GpuFigures`) by the
key path given here.

Each is one value per run (no statistic to choose). Power and energy are *the GPUs
together* (a deployment's draw adds up); memory, utilisation's peak and temperature are
*the worst single GPU* (a limit is per device: one GPU out of memory fails the server):

- ``gpu.power_w.mean``: the GPUs' mean power over the run, summed (W);
- ``gpu.power_w.max``: the largest summed power at one sample (W);
- ``gpu.energy_j``: energy over the run, summed (J; from the GPU's energy counter where it
  has one, else power integrated over the samples);
- ``gpu.memory_used_mb.max``: the most memory any one GPU used (MB = 2**20 bytes);
- ``gpu.util``: the GPUs' mean utilisation, averaged over the GPUs (a fraction);
- ``gpu.temperature_c.max``: the hottest GPU (degrees Celsius);
- ``energy_per_output_token_j``: ``gpu.energy_j`` over the output tokens the server
  generated in the run (its own counter; else the client's usage, said in the block).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "GPU_METRICS",
    "GpuMetric",
    "gpu_value",
    "gpu_values",
]


@dataclass(frozen=True)
class GpuMetric:
    """One GPU figure: its ``path`` of keys in ``runs[].gpu``, its canonical ``unit`` and
    the ``units`` an SLO may write (unit -> factor to the canonical one; ``""`` = none
    written, read in the canonical unit)."""

    name: str
    path: tuple[str, ...]
    unit: str  # canonical: "W", "J", "MB", "fraction", "C"
    units: Mapping[str, float]
    about: str


_WATTS = {"W": 1.0, "kW": 1000.0, "": 1.0}
_JOULES = {"J": 1.0, "kJ": 1e3, "mJ": 1e-3, "Wh": 3600.0, "kWh": 3.6e6, "": 1.0}
_MEGABYTES = {"MB": 1.0, "GB": 1024.0, "": 1.0}
_FRACTION = {"%": 0.01, "": 1.0}
_CELSIUS = {"C": 1.0, "": 1.0}

GPU_METRICS: dict[str, GpuMetric] = {
    m.name: m
    for m in (
        GpuMetric("gpu.power_w.mean", ("power_w", "mean"), "W", _WATTS, "mean power, GPUs summed"),
        GpuMetric(
            "gpu.power_w.max",
            ("power_w", "max"),
            "W",
            _WATTS,
            "largest power at one sample, GPUs summed",
        ),
        GpuMetric("gpu.energy_j", ("energy_j",), "J", _JOULES, "energy over the run, GPUs summed"),
        GpuMetric(
            "gpu.memory_used_mb.max",
            ("memory_used_mb", "max"),
            "MB",
            _MEGABYTES,
            "most memory used by any one GPU",
        ),
        GpuMetric("gpu.util", ("util",), "fraction", _FRACTION, "mean utilisation of the GPUs"),
        GpuMetric(
            "gpu.temperature_c.max",
            ("temperature_c", "max"),
            "C",
            _CELSIUS,
            "the hottest GPU's highest temperature",
        ),
        GpuMetric(
            "energy_per_output_token_j",
            ("energy_per_output_token_j",),
            "J",
            _JOULES,
            "GPU energy over the run per output token the server generated",
        ),
    )
}


def gpu_value(block: Mapping[str, Any] | None, name: str) -> float | None:
    """The value of GPU figure ``name`` in a run's ``gpu`` block (None: no block, or the
    figure was not measured, e.g. no energy counter and too few power samples)."""
    metric = GPU_METRICS[name]
    value: Any = block
    for key in metric.path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def gpu_values(block: Mapping[str, Any] | None) -> dict[str, float] | None:
    """Each GPU figure ``block`` measured, by name (``{"gpu.energy_j": 1000.0, ...}``: what
    a baseline file and the history keep of a run's ``gpu`` block); None without a block
    (no GPU read for the run)."""
    if not isinstance(block, Mapping):
        return None
    values = {name: gpu_value(block, name) for name in GPU_METRICS}
    return {name: value for name, value in values.items() if value is not None}
