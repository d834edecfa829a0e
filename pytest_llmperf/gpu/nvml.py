"""NVML (``pynvml``, the ``nvidia-ml-py`` package: ``pip install pytest-llmperf[gpu]``),
loaded once per process, and one read of every chosen GPU.

:func:`shared_nvml` is the process's one loader (also used by
:mod:`pytest_llmperf.managed_server.gpu` for the server's GPU memory): the driver's
library is looked for first (``libnvidia-ml.so.1``, a ``dlopen`` that fails in
microseconds where there is no driver), so a machine without a GPU never imports
``pynvml``; when NVML cannot start, :attr:`NvmlLoad.note` says why, once, and nothing
fails. :class:`Nvml` wraps a loaded module; :func:`open_nvml` takes any module object
with pynvml's function names (the tests drive it with a double: no GPU there).

One read (:meth:`Nvml.read`) asks each GPU for utilisation, memory used and total,
power, the total energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ, Volta and
later), temperature and the SM clock; a field the GPU does not support is asked once,
then never again (an exception per tick would cost the sampler its budget).
"""

from __future__ import annotations

import ctypes
import importlib
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.gpu.readings import GpuId, GpuReading, GpuTick

__all__ = ["Nvml", "NvmlLoad", "open_nvml", "shared_nvml"]

_DRIVER_LIBRARY = "libnvidia-ml.so.1"  # what pynvml itself opens on Linux
_MB = 2**20


@dataclass
class Nvml:
    """A started NVML: ``module`` (pynvml or a double) and the GPUs it sees (``count``)."""

    module: Any
    count: int
    _unsupported: set[tuple[int, str]] = field(default_factory=set)

    def handle(self, index: int) -> Any:
        return self.module.nvmlDeviceGetHandleByIndex(index)

    def identify(self, index: int) -> GpuId:
        """GPU ``index``'s id, model name and UUID."""
        handle = self.handle(index)
        return GpuId(
            str(index),
            "nvml",
            _text(self._ask(index, "name", self.module.nvmlDeviceGetName, handle)),
            _text(self._ask(index, "uuid", self.module.nvmlDeviceGetUUID, handle)) or None,
        )

    def reader(self, indexes: Sequence[int]) -> Callable[[], GpuTick]:
        """A function that reads GPUs ``indexes`` together (one :class:`GpuTick`)."""
        gpus = [(self.identify(i), i, self.handle(i)) for i in indexes]

        def read() -> GpuTick:
            readings = {gpu: self._read_one(i, h) for gpu, i, h in gpus}
            return GpuTick(time.monotonic_ns(), readings)

        return read

    def _read_one(self, index: int, handle: Any) -> GpuReading:
        m = self.module
        util = self._ask(index, "util", m.nvmlDeviceGetUtilizationRates, handle)
        memory = self._ask(index, "memory", m.nvmlDeviceGetMemoryInfo, handle)
        power_mw = self._ask(index, "power", m.nvmlDeviceGetPowerUsage, handle)
        energy_mj = self._ask(index, "energy", m.nvmlDeviceGetTotalEnergyConsumption, handle)
        temp = self._ask(
            index, "temperature", m.nvmlDeviceGetTemperature, handle, m.NVML_TEMPERATURE_GPU
        )
        clock = self._ask(index, "sm_clock", m.nvmlDeviceGetClockInfo, handle, m.NVML_CLOCK_SM)
        return GpuReading(
            at_ns=time.monotonic_ns(),
            power_w=None if power_mw is None else power_mw / 1000.0,
            energy_j=None if energy_mj is None else energy_mj / 1000.0,
            memory_used_mb=None if memory is None else memory.used / _MB,
            memory_total_mb=None if memory is None else memory.total / _MB,
            util=None if util is None else util.gpu / 100.0,
            temperature_c=None if temp is None else float(temp),
            sm_clock_mhz=None if clock is None else float(clock),
        )

    def _ask(self, index: int, what: str, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)``, or None where GPU ``index`` does not give ``what`` (asked once)."""
        if (index, what) in self._unsupported:
            return None
        try:
            return call(*args)
        except Exception as exc:
            if _not_supported(self.module, exc):
                self._unsupported.add((index, what))
            return None

    def unsupported(self, index: int) -> list[str]:
        """The fields GPU ``index`` said it does not give (``["energy"]``: no counter)."""
        return sorted(w for i, w in self._unsupported if i == index)


def _not_supported(module: Any, exc: Exception) -> bool:
    kind = getattr(module, "NVMLError_NotSupported", None)
    return isinstance(kind, type) and isinstance(exc, kind)


def _text(value: Any) -> str:
    if isinstance(value, bytes):  # older pynvml returns bytes
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


@dataclass(frozen=True)
class NvmlLoad:
    """The outcome of loading NVML: ``nvml`` (None: not loaded) and ``note`` (why not)."""

    nvml: Nvml | None
    note: str | None = None


def open_nvml(module: Any) -> NvmlLoad:
    """Start NVML through ``module`` (pynvml, or any object with its function names)."""
    try:
        module.nvmlInit()
        count = int(module.nvmlDeviceGetCount())
    except Exception as exc:
        return NvmlLoad(None, f"NVML did not start: {exc}")
    if count <= 0:
        return NvmlLoad(None, "NVML sees no GPU")
    return NvmlLoad(Nvml(module, count))


_lock = threading.Lock()
_shared: list[NvmlLoad] = []


def shared_nvml() -> NvmlLoad:
    """This process's NVML, loaded on first call (module docstring); never raises."""
    with _lock:
        if not _shared:
            _shared.append(_load())
        return _shared[0]


def _load() -> NvmlLoad:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(_DRIVER_LIBRARY)
        except OSError:
            return NvmlLoad(None, f"no NVIDIA driver here ({_DRIVER_LIBRARY} not found)")
    try:
        module = importlib.import_module("pynvml")
    except ImportError:
        return NvmlLoad(None, "no NVML library (pip install pytest-llmperf[gpu])")
    return open_nvml(module)
