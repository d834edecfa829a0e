"""AMD GPUs through ``amdsmi`` (ROCm's Python binding, installed with ROCm; optional).

Where ``amdsmi`` imports and sees GPUs, ``--llm-gpu=auto`` samples them when there is no
NVIDIA GPU: power (``amdsmi_get_power_info``: the socket power, W), the energy counter
(``amdsmi_get_energy_count``: its accumulator times its resolution, µJ), memory
(``amdsmi_get_gpu_vram_usage``, MB), utilisation (``amdsmi_get_gpu_activity``'s
``gfx_activity``, %) and the edge temperature. Written from ROCm's documented API and
tested here only as far as the path without the library: no AMD GPU is at hand.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.gpu.readings import GpuId, GpuReading, GpuTick

__all__ = ["AmdLoad", "AmdSmi", "open_amdsmi", "shared_amdsmi"]


@dataclass
class AmdSmi:
    """A started amdsmi: ``module`` and its GPU ``handles``."""

    module: Any
    handles: list[Any]

    @property
    def count(self) -> int:
        return len(self.handles)

    def identify(self, index: int) -> GpuId:
        name = ""
        uuid = None
        with contextlib.suppress(Exception):
            info = self.module.amdsmi_get_gpu_asic_info(self.handles[index])
            name = str(info.get("market_name", ""))
        with contextlib.suppress(Exception):
            uuid = str(self.module.amdsmi_get_gpu_device_uuid(self.handles[index]))
        return GpuId(str(index), "amdsmi", name, uuid)

    def reader(self, indexes: Sequence[int]) -> Callable[[], GpuTick]:
        gpus = [(self.identify(i), self.handles[i]) for i in indexes]

        def read() -> GpuTick:
            return GpuTick(time.monotonic_ns(), {g: self._read_one(h) for g, h in gpus})

        return read

    def _read_one(self, handle: Any) -> GpuReading:
        m = self.module
        power = _ask(m, "amdsmi_get_power_info", handle)
        energy = _ask(m, "amdsmi_get_energy_count", handle)
        vram = _ask(m, "amdsmi_get_gpu_vram_usage", handle)
        activity = _ask(m, "amdsmi_get_gpu_activity", handle)
        temp = None
        kind = getattr(m, "AmdSmiTemperatureType", None)
        metric = getattr(m, "AmdSmiTemperatureMetric", None)
        if kind is not None and metric is not None:
            temp = _ask(m, "amdsmi_get_temp_metric", handle, kind.EDGE, metric.CURRENT)
        watts = None
        if isinstance(power, dict):
            watts = _number(power.get("current_socket_power"))
            if watts is None:
                watts = _number(power.get("average_socket_power"))
        joules = None
        if isinstance(energy, dict):
            count = _number(energy.get("energy_accumulator"))
            resolution = _number(energy.get("counter_resolution"))
            if count is not None and resolution is not None:
                joules = count * resolution / 1e6
        used = _number(vram.get("vram_used")) if isinstance(vram, dict) else None
        total = _number(vram.get("vram_total")) if isinstance(vram, dict) else None
        gfx = _number(activity.get("gfx_activity")) if isinstance(activity, dict) else None
        return GpuReading(
            at_ns=time.monotonic_ns(),
            power_w=watts,
            energy_j=joules,
            memory_used_mb=used,
            memory_total_mb=total,
            util=None if gfx is None else gfx / 100.0,
            temperature_c=_number(temp),
        )


def _ask(module: Any, name: str, *args: Any) -> Any:
    call = getattr(module, name, None)
    if call is None:
        return None
    try:
        return call(*args)
    except Exception:
        return None


def _number(value: Any) -> float | None:
    if isinstance(value, dict):
        value = value.get("value")
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class AmdLoad:
    """The outcome of loading amdsmi: ``amd`` (None: not loaded) and ``note`` (why not)."""

    amd: AmdSmi | None
    note: str | None = None


def open_amdsmi(module: Any) -> AmdLoad:
    """Start amdsmi through ``module`` and list its GPUs."""
    try:
        module.amdsmi_init()
        handles = list(module.amdsmi_get_processor_handles())
    except Exception as exc:
        return AmdLoad(None, f"amdsmi did not start: {exc}")
    if not handles:
        return AmdLoad(None, "amdsmi sees no GPU")
    return AmdLoad(AmdSmi(module, handles))


_lock = threading.Lock()
_shared: list[AmdLoad] = []


def shared_amdsmi() -> AmdLoad:
    """This process's amdsmi, loaded on first call; never raises, and never imports the
    module where it is not installed."""
    with _lock:
        if not _shared:
            _shared.append(_load())
        return _shared[0]


def _load() -> AmdLoad:
    if importlib.util.find_spec("amdsmi") is None:
        return AmdLoad(None, "no amdsmi (installed with ROCm)")
    try:
        module = importlib.import_module("amdsmi")
    except Exception as exc:  # its shared library missing raises more than ImportError
        return AmdLoad(None, f"amdsmi did not load: {exc}")
    return open_amdsmi(module)
