"""GPU memory per process, through NVML where it is present.

NVML (``pynvml``, the ``nvidia-ml-py`` package: ``pip install pytest-llmperf[gpu]``)
is initialised once per process; when it cannot be (not installed, no driver, no
GPU), :func:`gpu_note` says why and every reading is None.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterable
from typing import Any

__all__ = ["gpu_memory_mb", "gpu_note"]

_lock = threading.Lock()
_state: dict[str, Any] = {}  # "nvml": the module, or "note": why there is none


def _nvml() -> Any:
    with _lock:
        if "nvml" in _state or "note" in _state:
            return _state.get("nvml")
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            _state["note"] = "no NVML (pip install pytest-llmperf[gpu])"
            return None
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except Exception as exc:
            _state["note"] = f"NVML did not start: {exc}"
            return None
        if not count:
            _state["note"] = "NVML sees no GPU"
            return None
        _state["nvml"] = nvml
        return nvml


def gpu_note() -> str | None:
    """Why GPU memory is not measured (None when it is)."""
    _nvml()
    note = _state.get("note")
    return None if note is None else str(note)


def gpu_memory_mb(pids: Iterable[int]) -> float | None:
    """GPU memory used by ``pids`` on every GPU, in MB (2**20 bytes); None without NVML."""
    nvml = _nvml()
    if nvml is None:
        return None
    wanted = set(pids)
    used = 0
    try:
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            procs = list(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
            with contextlib.suppress(Exception):
                procs += list(nvml.nvmlDeviceGetGraphicsRunningProcesses(handle))
            for proc in procs:
                if proc.pid in wanted and proc.usedGpuMemory:
                    used += int(proc.usedGpuMemory)
    except Exception:
        return None
    return used / 2**20
