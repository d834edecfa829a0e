"""A run's GPU figures (``runs[].gpu``): each GPU's own, and the GPUs together.

Produced after the run from samples taken during it (NVML on this machine, an NVIDIA
DCGM exporter's page or ``amdsmi``: docs/gpu.md), read by the SLO verdicts, baselines,
history and every report through the names of :mod:`pytest_llmperf.specs.gpu_names`.
How the GPUs are put together: power and energy summed (a deployment's draw adds up);
memory, temperature: the worst single GPU (a limit is per device); utilisation: the mean
over the GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "EnergySource",
    "GpuDevice",
    "GpuFigures",
    "GpuSeries",
    "TokenSource",
    "energy_per_token",
]


class EnergySource(StrEnum):
    """Where a GPU's energy over the run came from."""

    COUNTER = "counter"  # the GPU's own energy counter (NVML total energy, DCGM's mJ counter)
    POWER = "power"  # power samples integrated over time (trapezoids), no counter


class TokenSource(StrEnum):
    """Whose count of output tokens ``energy_per_output_token_j`` divides by."""

    SERVER = "server"  # the server's own generation-token counter over the run
    CLIENT = "client"  # the client's usage totals (the server counts none)


@dataclass
class GpuSeries:
    """One GPU's samples for the HTML time axis: seconds from the run's start, and the
    values at those times (downsampled to a few hundred points; None: not read then)."""

    t_s: list[float] = field(default_factory=list)
    power_w: list[float | None] = field(default_factory=list)
    memory_used_mb: list[float | None] = field(default_factory=list)
    util: list[float | None] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "t_s": list(self.t_s),
            "power_w": list(self.power_w),
            "memory_used_mb": list(self.memory_used_mb),
            "util": list(self.util),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuSeries:
        return cls(
            t_s=[float(t) for t in data.get("t_s") or ()],
            power_w=list(data.get("power_w") or ()),
            memory_used_mb=list(data.get("memory_used_mb") or ()),
            util=list(data.get("util") or ()),
        )


@dataclass
class GpuDevice:
    """One GPU over one run. ``id``: as its source names it (NVML's index ``"0"``, DCGM's
    ``gpu`` label, with ``host`` where a page names one); ``source``: ``"nvml"``,
    ``"dcgm"`` or ``"amdsmi"``; utilisation is a fraction (0..1); MB are 2**20 bytes.
    A figure its source does not give (or too few samples to say) is None."""

    id: str
    source: str
    name: str = ""
    uuid: str | None = None
    host: str | None = None
    samples: int = 0
    power_w_mean: float | None = None
    power_w_max: float | None = None
    energy_j: float | None = None
    energy_from: EnergySource | None = None
    memory_used_mb_mean: float | None = None
    memory_used_mb_max: float | None = None
    memory_total_mb: float | None = None
    util_mean: float | None = None
    util_max: float | None = None
    temperature_c_max: float | None = None
    sm_clock_mhz_mean: float | None = None
    series: GpuSeries | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "name": self.name,
            "uuid": self.uuid,
            "host": self.host,
            "samples": self.samples,
            "power_w": {"mean": self.power_w_mean, "max": self.power_w_max},
            "energy_j": self.energy_j,
            "energy_from": self.energy_from.value if self.energy_from else None,
            "memory_used_mb": {"mean": self.memory_used_mb_mean, "max": self.memory_used_mb_max},
            "memory_total_mb": self.memory_total_mb,
            "util": {"mean": self.util_mean, "max": self.util_max},
            "temperature_c": {"max": self.temperature_c_max},
            "sm_clock_mhz": {"mean": self.sm_clock_mhz_mean},
            "series": self.series.to_dict() if self.series is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuDevice:
        def part(key: str, stat: str) -> float | None:
            value = (data.get(key) or {}).get(stat)
            return None if value is None else float(value)

        energy_from = data.get("energy_from")
        series = data.get("series")
        return cls(
            id=str(data["id"]),
            source=str(data.get("source") or ""),
            name=str(data.get("name") or ""),
            uuid=data.get("uuid"),
            host=data.get("host"),
            samples=int(data.get("samples") or 0),
            power_w_mean=part("power_w", "mean"),
            power_w_max=part("power_w", "max"),
            energy_j=None if data.get("energy_j") is None else float(data["energy_j"]),
            energy_from=EnergySource(energy_from) if energy_from else None,
            memory_used_mb_mean=part("memory_used_mb", "mean"),
            memory_used_mb_max=part("memory_used_mb", "max"),
            memory_total_mb=(
                None if data.get("memory_total_mb") is None else float(data["memory_total_mb"])
            ),
            util_mean=part("util", "mean"),
            util_max=part("util", "max"),
            temperature_c_max=part("temperature_c", "max"),
            sm_clock_mhz_mean=part("sm_clock_mhz", "mean"),
            series=GpuSeries.from_dict(series) if series else None,
        )


def _sum(values: list[float | None]) -> float | None:
    """The sum where every GPU gave a value (a missing one would make a sum that lies)."""
    return None if not values or any(v is None for v in values) else sum(v for v in values if v)


def energy_per_token(energy_j: float | None, output_tokens: float | None) -> float | None:
    """Joules per output token (None: no energy, or no token was generated)."""
    if energy_j is None or not output_tokens or output_tokens <= 0:
        return None
    return energy_j / output_tokens


@dataclass
class GpuFigures:
    """A run's ``gpu`` block: the GPUs together (the names of
    :mod:`~pytest_llmperf.specs.gpu_names`), each GPU, where they were read
    (``sources``: ``"nvml"``, ``"dcgm http://host:9400/metrics"``), the sampling interval
    and ``notes`` a reader should know (a GPU with no energy counter, a page that failed).

    ``power_w_max``: the largest summed power at one sample, given by the producer where
    its GPUs are sampled together (one NVML tick, one exporter scrape); None: the sum of
    the GPUs' own maxima is used (an upper bound, said in ``notes``)."""

    devices: list[GpuDevice] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    interval_s: float | None = None
    power_w_max: float | None = None
    output_tokens: float | None = None
    output_tokens_from: TokenSource | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def power_w_mean(self) -> float | None:
        return _sum([d.power_w_mean for d in self.devices])

    @property
    def power_w_peak(self) -> float | None:
        """``gpu.power_w.max``: :attr:`power_w_max`, else the sum of the GPUs' maxima."""
        if self.power_w_max is not None:
            return self.power_w_max
        return _sum([d.power_w_max for d in self.devices])

    @property
    def energy_j(self) -> float | None:
        return _sum([d.energy_j for d in self.devices])

    @property
    def memory_used_mb_max(self) -> float | None:
        values = [d.memory_used_mb_max for d in self.devices if d.memory_used_mb_max is not None]
        return max(values) if values else None

    @property
    def util(self) -> float | None:
        values = [d.util_mean for d in self.devices if d.util_mean is not None]
        return sum(values) / len(values) if values else None

    @property
    def temperature_c_max(self) -> float | None:
        values = [d.temperature_c_max for d in self.devices if d.temperature_c_max is not None]
        return max(values) if values else None

    @property
    def energy_per_output_token_j(self) -> float | None:
        return energy_per_token(self.energy_j, self.output_tokens)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report's ``runs[].gpu`` (the key paths of ``specs/gpu_names.py``)."""
        return {
            "power_w": {"mean": self.power_w_mean, "max": self.power_w_peak},
            "energy_j": self.energy_j,
            "memory_used_mb": {"max": self.memory_used_mb_max},
            "util": self.util,
            "temperature_c": {"max": self.temperature_c_max},
            "energy_per_output_token_j": self.energy_per_output_token_j,
            "output_tokens": self.output_tokens,
            "output_tokens_from": (
                self.output_tokens_from.value if self.output_tokens_from else None
            ),
            "power_w_max_sampled": self.power_w_max,
            "interval_s": self.interval_s,
            "sources": list(self.sources),
            "devices": [d.to_dict() for d in self.devices],
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuFigures:
        """Back from :meth:`to_dict` (the derived figures are computed again)."""
        tokens_from = data.get("output_tokens_from")
        return cls(
            devices=[GpuDevice.from_dict(d) for d in data.get("devices") or ()],
            sources=[str(s) for s in data.get("sources") or ()],
            interval_s=data.get("interval_s"),
            power_w_max=data.get("power_w_max_sampled"),
            output_tokens=data.get("output_tokens"),
            output_tokens_from=TokenSource(tokens_from) if tokens_from else None,
            notes=[str(n) for n in data.get("notes") or ()],
        )
