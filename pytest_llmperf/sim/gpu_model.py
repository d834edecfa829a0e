"""The simulator's GPUs: power, energy, memory, utilisation and temperature from its load.

A profile with ``gpus: N`` pretends its engines run on N GPUs (a multiple of its
engines: each engine's share of them runs that engine, as tensor parallelism would) and
serves what NVIDIA's DCGM exporter would say about them (dcgm_page.py), so the plugin's
remote GPU path (a page with the ``gpu`` role) can be tested end to end without a GPU.

The figures follow the engine's own state, read every :data:`TICK_S` of the
simulator's clock (the event loop's monotonic time, the one its tokens are planned on)
by a timer of its own: never on a request's or a token's path, and not at all without
GPUs. At each tick, for each engine:

- *busy*: it has a running request (its GPUs execute kernels);
- *fill*: running requests over its batch capacity (``max_num_seqs``), at most 1;
- *power* (W): ``gpu_idle_w`` when not busy; busy,
  ``gpu_idle_w + (gpu_max_w - gpu_idle_w) * (BUSY_SHARE + (1 - BUSY_SHARE) * fill)``:
  a GPU decoding one sequence already draws a good part of its range (decode is bound by
  memory bandwidth, whatever the batch), a full batch draws ``gpu_max_w``;
- *energy* (the counter, mJ): the integral of that power over the simulator's clock,
  piecewise constant between ticks (and from the last tick to the moment it is read), on
  top of a seeded energy "since boot", as the real counter starts wherever the GPU's
  uptime left it: only its differences mean anything;
- *utilisation* (%): the share of the last second's ticks in which the engine was busy
  (DCGM's "GPU utilization" is the share of the sample period a kernel ran);
- *memory used* (MiB): ``gpu_weights_mb`` (weights, CUDA graphs, the runtime) plus
  ``gpu_kv_mb`` times the engine's KV-cache usage; free = ``gpu_memory_mb`` - used;
- *temperature* (C): rising from :data:`AMBIENT_C` towards ``+ HEAT_C`` at full power,
  with a thermal lag of :data:`THERMAL_TAU_S`; *SM clock*: boost when busy, idle clock
  otherwise.

Each GPU is slightly different (power within ±2 %, a few hundred MiB more or less
memory, a few degrees), drawn from the simulator's seed: the same seed, the same GPUs
(UUIDs included).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .profiles import Profile
from .streams import BackendStats

__all__ = [
    "AMBIENT_C",
    "BUSY_SHARE",
    "GPU_PROFILE_KEYS",
    "HEAT_C",
    "THERMAL_TAU_S",
    "TICK_S",
    "UTIL_WINDOW_S",
    "GpuMeter",
    "SimGpu",
    "gpu_power_w",
    "refuse_in_virtual_time",
]

TICK_S = 0.01  # how often the engines' load is read (100 Hz of the simulator's clock)
UTIL_WINDOW_S = 1.0  # utilisation: share of this last stretch the engine was busy
BUSY_SHARE = 0.4  # a busy GPU's draw with one sequence, as a share of its idle-to-max range
AMBIENT_C = 32.0  # an idle GPU's temperature
HEAT_C = 40.0  # what full power adds to it, once settled
THERMAL_TAU_S = 3.0  # thermal lag (time constant)
IDLE_SM_CLOCK_MHZ = 345  # an H100's SM clock at rest ...
BOOST_SM_CLOCK_MHZ = 1980  # ... and at work
MEM_CLOCK_MHZ = 2619  # HBM3's, constant
# the profile keys of the GPUs (docs/simulator.md, "GPU page"); a virtual-time run refuses
# a profile that sets gpus (it serves no pages)
GPU_PROFILE_KEYS = (
    "gpus",
    "gpu_name",
    "gpu_idle_w",
    "gpu_max_w",
    "gpu_memory_mb",
    "gpu_weights_mb",
    "gpu_kv_mb",
)


def gpu_power_w(profile: Profile, stats: BackendStats) -> float:
    """The power one of an engine's GPUs draws (before its own ±2 %) in that state."""
    idle = profile.gpu_idle_w
    if stats.running <= 0:
        return idle
    fill = min(1.0, stats.running / profile.max_num_seqs)
    return idle + (profile.gpu_max_w - idle) * (BUSY_SHARE + (1.0 - BUSY_SHARE) * fill)


@dataclass
class SimGpu:
    """One simulated GPU: who it is, its own deviation, and its figures as of the last tick."""

    index: int
    engine: int  # which engine (page order) it runs
    uuid: str
    pci_bus_id: str
    power_scale: float  # this GPU's draw relative to the model's (0.98 .. 1.02)
    memory_extra_mb: float  # what it uses beyond the model's (its share of the runtime)
    temp_offset_c: float
    energy_mj: float  # the counter as of the last tick (mJ, since "boot")
    power_w: float = 0.0
    memory_used_mb: float = 0.0
    util_pct: float = 0.0
    temperature_c: float = AMBIENT_C
    sm_clock_mhz: int = IDLE_SM_CLOCK_MHZ


def _gpus(profile: Profile, engines: int, seed: int) -> list[SimGpu]:
    """The profile's GPUs, ``gpus // engines`` to an engine in turn, drawn from ``seed``."""
    rng = random.Random(f"llmperf-sim-gpus:{seed}")
    per_engine = profile.gpus // engines
    out = []
    for i in range(profile.gpus):
        raw = f"{rng.getrandbits(128):032x}"
        uuid = f"GPU-{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"
        out.append(
            SimGpu(
                index=i,
                engine=i // per_engine,
                uuid=uuid,
                pci_bus_id=f"{i // 14:08X}:{0x18 + 0x10 * (i % 14):02X}:00.0",
                power_scale=rng.uniform(0.98, 1.02),
                memory_extra_mb=float(rng.randrange(0, 384)),
                temp_offset_c=rng.uniform(-3.0, 3.0),
                energy_mj=float(rng.randrange(10**9, 10**10)),  # 1 to 10 MJ since boot
            )
        )
    return out


class _EngineLoad:
    """One engine's busy ticks over the utilisation window (idle before the simulator
    started, as a GPU at rest was)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.ticks: deque[bool] = deque([False] * window, maxlen=window)
        self.busy = 0

    def add(self, busy: bool) -> float:
        """Count this tick; the busy share of the window (0..1)."""
        self.busy += busy - self.ticks[0]
        self.ticks.append(busy)
        return self.busy / self.window


class GpuMeter:
    """The GPUs of one simulator, kept up to date by a timer while it serves.

    ``engine_stats`` gives each engine's state in page order (fleet.py's
    ``engine_stats``). :meth:`read` brings the energy counters up to the moment of
    reading, so a scrape between two ticks is exact for the power of the last tick.
    """

    def __init__(
        self,
        profile: Profile,
        engine_stats: Callable[[], Sequence[BackendStats]],
        engines: int,
        seed: int,
    ) -> None:
        if profile.gpus % engines:
            raise ValueError(f"gpus={profile.gpus} is not a multiple of the {engines} engines")
        self.profile = profile
        self.engine_stats = engine_stats
        self.gpus = _gpus(profile, engines, seed)
        window = max(1, round(UTIL_WINDOW_S / TICK_S))
        self.loads = [_EngineLoad(window) for _ in range(engines)]
        self.last_t: float | None = None  # loop time the counters are accrued to
        self.last_tick: float | None = None  # loop time of the last tick
        self._handle: asyncio.TimerHandle | None = None
        self.tick(None)

    # -- the timer ---------------------------------------------------------
    def start(self) -> None:
        """Tick every :data:`TICK_S` in the running loop, from now on."""
        loop = asyncio.get_running_loop()
        self.last_t = self.last_tick = loop.time()
        self._handle = loop.call_later(TICK_S, self._on_timer)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _on_timer(self) -> None:
        loop = asyncio.get_running_loop()
        self.tick(loop.time())
        self._handle = loop.call_later(TICK_S, self._on_timer)

    # -- the model ---------------------------------------------------------
    def _accrue(self, now: float | None) -> None:
        """Add each GPU's last power times the time since the last tick to its counter."""
        if now is None or self.last_t is None:
            return
        dt = max(0.0, now - self.last_t)
        for gpu in self.gpus:
            gpu.energy_mj += gpu.power_w * dt * 1000.0
        self.last_t = now

    def tick(self, now: float | None) -> None:
        """Accrue energy up to ``now`` (loop time; None: the first state, no time passed),
        then read the engines' state and set every GPU's figures from it."""
        dt = 0.0 if now is None or self.last_tick is None else max(0.0, now - self.last_tick)
        self._accrue(now)
        if now is not None:
            self.last_tick = now
        p = self.profile
        stats = list(self.engine_stats())
        utils = [load.add(s.running > 0) for load, s in zip(self.loads, stats, strict=True)]
        span = p.gpu_max_w - p.gpu_idle_w
        settle = 1.0 - math.exp(-dt / THERMAL_TAU_S)
        for gpu in self.gpus:
            s = stats[gpu.engine]
            gpu.power_w = gpu_power_w(p, s) * gpu.power_scale
            gpu.util_pct = 100.0 * utils[gpu.engine]
            gpu.memory_used_mb = min(
                p.gpu_memory_mb, p.gpu_weights_mb + gpu.memory_extra_mb + p.gpu_kv_mb * s.kv_usage
            )
            gpu.sm_clock_mhz = BOOST_SM_CLOCK_MHZ if s.running > 0 else IDLE_SM_CLOCK_MHZ
            share = (gpu.power_w - p.gpu_idle_w) / span if span > 0 else 0.0
            target = AMBIENT_C + gpu.temp_offset_c + HEAT_C * max(0.0, share)
            if now is None:
                gpu.temperature_c = target
            else:
                gpu.temperature_c += (target - gpu.temperature_c) * settle

    def read(self, now: float) -> list[SimGpu]:
        """The GPUs, their counters brought up to ``now`` (loop time)."""
        self._accrue(now)
        return self.gpus


def refuse_in_virtual_time(profile: Profile) -> None:
    """A virtual-time run serves no pages, so it has nowhere to show GPUs: a profile with
    ``gpus`` is refused there (ValueError naming the keys) rather than silently unmetered."""
    if profile.gpus:
        keys = ", ".join(GPU_PROFILE_KEYS)
        raise ValueError(
            f"profile {profile.name!r}: gpus={profile.gpus}: the simulated GPUs ({keys}) "
            "are read from the real-time simulator's DCGM page (SimServer, python -m "
            "pytest_llmperf.sim); a virtual-time run has no pages: set gpus=0"
        )
