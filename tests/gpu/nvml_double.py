"""A double of pynvml: a module object with the function names NVML's Python binding
has (``nvmlInit``, ``nvmlDeviceGetPowerUsage``, ...), in its units (mW, mJ, bytes, %).

The real library cannot run where these tests run: there is no GPU and no driver. Each
GPU's power is set by the test; its energy counter rises with the monotonic clock at
that power (as the GPU's own counter does), or raises NVML's "not supported" error (a
GPU before Volta). The calls are counted, and the threads that made them kept.
"""

from __future__ import annotations

import threading
import time
import types
from collections import Counter
from dataclasses import dataclass, field


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # pynvml's name
    pass


@dataclass
class DoubleGpu:
    power_w: float
    energy: bool = True
    used_mb: float = 2048.0
    total_mb: float = 81559.0
    util_pct: int = 40
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    start_mj: float = 5e9
    since: float = field(default_factory=time.monotonic)


def nvml_double(gpus: list[DoubleGpu], *, fail_init: str | None = None) -> types.ModuleType:
    """A module object standing for pynvml with ``gpus``; ``fail_init``: nvmlInit raises."""
    m = types.ModuleType("pynvml_double")
    calls: Counter[str] = Counter()
    threads: set[str] = set()
    lock = threading.Lock()

    def counted(name: str):  # type: ignore[no-untyped-def]
        def wrap(fn):  # type: ignore[no-untyped-def]
            def call(*args):  # type: ignore[no-untyped-def]
                with lock:
                    calls[name] += 1
                    threads.add(threading.current_thread().name)
                return fn(*args)

            setattr(m, name, call)
            return fn

        return wrap

    @counted("nvmlInit")
    def _init() -> None:
        if fail_init:
            raise NVMLError(fail_init)

    @counted("nvmlDeviceGetCount")
    def _count() -> int:
        return len(gpus)

    @counted("nvmlDeviceGetHandleByIndex")
    def _handle(i: int) -> DoubleGpu:
        return gpus[i]

    @counted("nvmlDeviceGetName")
    def _name(g: DoubleGpu) -> str:
        return g.name

    @counted("nvmlDeviceGetUUID")
    def _uuid(g: DoubleGpu) -> str:
        return g.uuid

    @counted("nvmlDeviceGetUtilizationRates")
    def _util(g: DoubleGpu) -> types.SimpleNamespace:
        return types.SimpleNamespace(gpu=g.util_pct, memory=10)

    @counted("nvmlDeviceGetMemoryInfo")
    def _memory(g: DoubleGpu) -> types.SimpleNamespace:
        used, total = int(g.used_mb * 2**20), int(g.total_mb * 2**20)
        return types.SimpleNamespace(used=used, total=total, free=total - used)

    @counted("nvmlDeviceGetPowerUsage")
    def _power(g: DoubleGpu) -> int:
        return int(g.power_w * 1000)

    @counted("nvmlDeviceGetTotalEnergyConsumption")
    def _energy(g: DoubleGpu) -> int:
        if not g.energy:
            raise NVMLError_NotSupported("Not Supported")
        return int(g.start_mj + g.power_w * (time.monotonic() - g.since) * 1000)

    @counted("nvmlDeviceGetTemperature")
    def _temp(g: DoubleGpu, sensor: int) -> int:
        assert sensor == m.NVML_TEMPERATURE_GPU
        return 55

    @counted("nvmlDeviceGetClockInfo")
    def _clock(g: DoubleGpu, kind: int) -> int:
        assert kind == m.NVML_CLOCK_SM
        return 1755

    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    m.NVMLError_NotSupported = NVMLError_NotSupported  # type: ignore[attr-defined]
    m.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    m.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    m.calls = calls  # type: ignore[attr-defined]
    m.threads = threads  # type: ignore[attr-defined]
    return m
