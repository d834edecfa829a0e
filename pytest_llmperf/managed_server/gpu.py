"""GPU memory per process, through NVML where it is present.

NVML (``pynvml``, the ``nvidia-ml-py`` package: ``pip install pytest-llmperf[gpu]``)
is the process's one NVML (:func:`pytest_llmperf.gpu.nvml.shared_nvml`, also what
``--llm-gpu`` samples through), started once; when it cannot be (not installed, no
driver, no GPU), :func:`gpu_note` says why and every reading is None.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from pytest_llmperf.gpu.nvml import shared_nvml

__all__ = ["gpu_memory_mb", "gpu_note"]


def gpu_note() -> str | None:
    """Why GPU memory is not measured (None when it is)."""
    return shared_nvml().note


def gpu_memory_mb(pids: Iterable[int]) -> float | None:
    """GPU memory used by ``pids`` on every GPU, in MB (2**20 bytes); None without NVML."""
    lib = shared_nvml().nvml
    if lib is None:
        return None
    nvml = lib.module
    wanted = set(pids)
    used = 0
    try:
        for i in range(lib.count):
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
