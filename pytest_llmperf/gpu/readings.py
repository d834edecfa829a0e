"""One GPU at one instant: :class:`GpuReading`, what every source produces.

NVML (this machine), an NVIDIA DCGM exporter's page (another machine) and ``amdsmi``
name their fields differently and in different units; each source converts to this one
shape (watts, joules, MB = 2**20 bytes, a fraction, degrees Celsius, MHz) so that the
arithmetic of :mod:`.energy` is written once. A field the source does not give is None.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GpuId", "GpuReading", "GpuTick"]


@dataclass(frozen=True, slots=True)
class GpuId:
    """Which GPU: ``id`` as its source names it (NVML's index, DCGM's ``gpu`` label),
    ``source`` (``"nvml"``, ``"dcgm"``, ``"amdsmi"``), the model ``name``, ``uuid`` and
    ``host`` where known (a DCGM page's ``Hostname``, else the page's name)."""

    id: str
    source: str
    name: str = ""
    uuid: str | None = None
    host: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """Tells one GPU from another across sources and hosts."""
        return (self.source, self.host or "", self.uuid or self.id)


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU's figures at ``at_ns`` (monotonic ns). ``energy_j``: the GPU's own energy
    counter (joules since some origin: a difference is what counts), None where the GPU
    has none."""

    at_ns: int
    power_w: float | None = None
    energy_j: float | None = None
    memory_used_mb: float | None = None
    memory_total_mb: float | None = None
    util: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None


@dataclass(frozen=True, slots=True)
class GpuTick:
    """Every GPU of one source read together (one NVML tick, one exporter scrape): the
    readings by :class:`GpuId`, so that the GPUs' power adds up at one instant."""

    at_ns: int
    readings: dict[GpuId, GpuReading]
