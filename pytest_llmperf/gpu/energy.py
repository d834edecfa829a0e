"""The arithmetic: a run's reads of its GPUs as :class:`~.figures.GpuDevice`\\ s.

Per GPU, over the reads of one run (its first to its last):

- energy: the GPU's own counter where it has one, as the sum of the differences of
  consecutive reads (``last - first`` while the counter only rises); a difference that
  goes down is a counter reset (a driver reload, a reboot of the exporter's host): that
  interval's energy is taken from its power instead, and the notes say so. No counter:
  power integrated over the reads, trapezoid by trapezoid (at 10 Hz this is within a
  percent of the counter for a load that changes over seconds; a read's power is itself
  an average over the GPU's own window);
- power: the time-weighted mean (the trapezoids' area over the time they span) and the
  largest read; memory used: mean and largest; utilisation: mean and largest;
  temperature: largest; SM clock: mean;
- a series for the HTML time axis, averaged down to at most :data:`SERIES_POINTS`
  points (memory's largest in each bucket, so a peak is never averaged away).

The GPUs together (:class:`~.figures.GpuFigures`): the largest summed power at one read
is computed here, where the GPUs of one source were read together.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from pytest_llmperf.gpu.figures import EnergySource, GpuDevice, GpuSeries
from pytest_llmperf.gpu.readings import GpuId, GpuReading, GpuTick

__all__ = [
    "SERIES_POINTS",
    "counter_energy_j",
    "device_figures",
    "downsample",
    "integrated_energy_j",
    "summed_power_max",
    "tick_devices",
]

SERIES_POINTS = 300


def integrated_energy_j(points: Sequence[tuple[int, float | None]]) -> float | None:
    """Power ``(at_ns, watts)`` integrated by trapezoids, in joules (None: fewer than two
    reads with a power; a read without one is skipped)."""
    known = [(t, p) for t, p in points if p is not None]
    if len(known) < 2:
        return None
    return math.fsum(
        (p0 + p1) / 2.0 * (t1 - t0) / 1e9 for (t0, p0), (t1, p1) in itertools.pairwise(known)
    )


def counter_energy_j(
    readings: Sequence[GpuReading],
) -> tuple[float | None, int]:
    """The energy counter's rise over ``readings``, in joules, and how many resets it had
    (a reset interval is bridged by its power: module docstring). None: fewer than two
    reads of the counter."""
    known = [r for r in readings if r.energy_j is not None]
    if len(known) < 2:
        return None, 0
    total = 0.0
    resets = 0
    for a, b in itertools.pairwise(known):
        assert a.energy_j is not None and b.energy_j is not None
        step = b.energy_j - a.energy_j
        if step >= 0:
            total += step
            continue
        resets += 1
        bridged = integrated_energy_j([(a.at_ns, a.power_w), (b.at_ns, b.power_w)])
        total += bridged or 0.0
    return total, resets


def downsample(
    readings: Sequence[GpuReading], t0_ns: int, points: int = SERIES_POINTS
) -> GpuSeries:
    """The series of ``readings`` in seconds since ``t0_ns``, at most ``points`` long: each
    bucket of consecutive reads as one point (power and utilisation: the mean; memory:
    the largest)."""
    size = max(1, math.ceil(len(readings) / points))
    out = GpuSeries()
    for k in range(0, len(readings), size):
        chunk = readings[k : k + size]
        out.t_s.append(round(math.fsum(r.at_ns - t0_ns for r in chunk) / len(chunk) / 1e9, 3))
        out.power_w.append(_mean([r.power_w for r in chunk], 2))
        out.util.append(_mean([r.util for r in chunk], 4))
        used = [r.memory_used_mb for r in chunk if r.memory_used_mb is not None]
        out.memory_used_mb.append(round(max(used), 1) if used else None)
    return out


def _mean(values: Sequence[float | None], digits: int) -> float | None:
    known = [v for v in values if v is not None]
    return round(math.fsum(known) / len(known), digits) if known else None


def device_figures(
    gpu: GpuId, readings: Sequence[GpuReading], t0_ns: int, notes: list[str]
) -> GpuDevice:
    """One GPU over ``readings`` (time order), its series from ``t0_ns``; what a reader
    should know about it is appended to ``notes``."""
    where = f"GPU {gpu.id}" + (f" on {gpu.host}" if gpu.host else "")
    out = GpuDevice(id=gpu.id, source=gpu.source, name=gpu.name, uuid=gpu.uuid, host=gpu.host)
    out.samples = len(readings)
    power = [(r.at_ns, r.power_w) for r in readings]
    area = integrated_energy_j(power)
    known_power = [p for _, p in power if p is not None]
    if area is not None:
        span = [t for t, p in power if p is not None]
        out.power_w_mean = area / ((span[-1] - span[0]) / 1e9) if span[-1] > span[0] else None
    if out.power_w_mean is None and known_power:
        out.power_w_mean = math.fsum(known_power) / len(known_power)
    out.power_w_max = max(known_power) if known_power else None
    energy, resets = counter_energy_j(readings)
    if energy is not None:
        out.energy_j, out.energy_from = energy, EnergySource.COUNTER
        if resets:
            notes.append(
                f"{where}: its energy counter went back {resets} time(s) during the run "
                "(a reset): those intervals' energy is integrated from power"
            )
    elif area is not None:
        out.energy_j, out.energy_from = area, EnergySource.POWER
        notes.append(f"{where}: no energy counter: energy is power integrated over the reads")
    used = [r.memory_used_mb for r in readings if r.memory_used_mb is not None]
    if used:
        out.memory_used_mb_mean = math.fsum(used) / len(used)
        out.memory_used_mb_max = max(used)
    totals = [r.memory_total_mb for r in readings if r.memory_total_mb is not None]
    out.memory_total_mb = totals[-1] if totals else None
    util = [r.util for r in readings if r.util is not None]
    if util:
        out.util_mean, out.util_max = math.fsum(util) / len(util), max(util)
    temps = [r.temperature_c for r in readings if r.temperature_c is not None]
    out.temperature_c_max = max(temps) if temps else None
    clocks = [r.sm_clock_mhz for r in readings if r.sm_clock_mhz is not None]
    out.sm_clock_mhz_mean = math.fsum(clocks) / len(clocks) if clocks else None
    if readings:
        out.series = downsample(readings, t0_ns)
    return out


def tick_devices(ticks: Sequence[GpuTick], t0_ns: int, notes: list[str]) -> list[GpuDevice]:
    """Every GPU read in ``ticks`` (one source, time order), in the order first read."""
    per: dict[GpuId, list[GpuReading]] = {}
    for tick in ticks:
        for gpu, reading in tick.readings.items():
            per.setdefault(gpu, []).append(reading)
    return [device_figures(gpu, readings, t0_ns, notes) for gpu, readings in per.items()]


def summed_power_max(ticks: Sequence[GpuTick]) -> float | None:
    """The largest power of the GPUs together at one tick (only ticks where every GPU of
    the source gave its power: a missing one would make a sum that lies)."""
    gpus = {gpu for tick in ticks for gpu in tick.readings}
    sums = [
        math.fsum(r.power_w for r in tick.readings.values() if r.power_w is not None)
        for tick in ticks
        if set(tick.readings) == gpus and all(r.power_w is not None for r in tick.readings.values())
    ]
    return max(sums) if sums else None
