"""``--llm-gpu=auto|off|INDEXES``: which GPUs of this machine every run samples.

Resolved once per session (:func:`local_gpus`): ``off`` reads nothing; ``auto`` every
GPU NVML sees, else (no NVIDIA GPU) every GPU ``amdsmi`` sees where it is installed;
``0,1`` those GPUs (an index the machine does not have is a
:class:`~pytest_llmperf.errors.LlmPerfUsageError` naming it, raised once NVML answers).
No library, no driver or no GPU is never a failure: :attr:`LocalGpus.note` says why,
once (the session's header), and the runs have no ``gpu`` block from this machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.gpu.amd import shared_amdsmi
from pytest_llmperf.gpu.nvml import NvmlLoad, shared_nvml
from pytest_llmperf.gpu.readings import GpuId, GpuTick
from pytest_llmperf.gpu.sampler import DEFAULT_INTERVAL_S, GpuSampler

__all__ = ["OPTION", "LocalGpus", "local_gpus"]

OPTION = "--llm-gpu"


@dataclass
class LocalGpus:
    """This machine's GPUs to sample in every run: ``gpus`` (empty: none), through
    ``read`` (one tick of all of them), and ``note`` (why none, or what is read)."""

    gpus: list[GpuId] = field(default_factory=list)
    read: Callable[[], GpuTick] | None = None
    note: str = ""
    interval_s: float = DEFAULT_INTERVAL_S
    source: str = ""  # "nvml" or "amdsmi"

    def sampler(self) -> GpuSampler | None:
        """A new sampler for one run (None: nothing to sample)."""
        if self.read is None or not self.gpus:
            return None
        return GpuSampler(self.read, interval_s=self.interval_s)


def local_gpus(option: str, *, nvml: NvmlLoad | None = None, amd: Any = None) -> LocalGpus:
    """The GPUs ``option`` chooses (module docstring). ``nvml`` / ``amd``: loaded already
    (the tests' doubles); by default the process's shared loaders."""
    text = option.strip().lower()
    if text == "off":
        return LocalGpus(note="off (--llm-gpu=off)")
    wanted = None if text == "auto" else _indexes(text)
    load = nvml if nvml is not None else shared_nvml()
    if load.nvml is not None:
        return _chosen(load.nvml, wanted, option, "NVML", "nvml")
    amd_load = amd if amd is not None else shared_amdsmi()
    if amd_load.amd is not None:
        return _chosen(amd_load.amd, wanted, option, "amdsmi", "amdsmi")
    why = load.note or "no NVML"
    if amd_load.note and not amd_load.note.startswith("no amdsmi"):
        why += f"; {amd_load.note}"
    return LocalGpus(note=f"none on this machine ({why})")


def _chosen(lib: Any, wanted: list[int] | None, option: str, how: str, source: str) -> LocalGpus:
    """The GPUs ``wanted`` (None: every one) of a library that answered (NVML's or
    amdsmi's: ``count``, ``identify(i)``, ``reader(indexes)``)."""
    chosen = list(range(lib.count)) if wanted is None else wanted
    missing = [i for i in chosen if i >= lib.count]
    if missing:
        raise LlmPerfUsageError(
            f"no GPU {', '.join(map(str, missing))} here: {how} sees {lib.count} "
            f"(indexes 0..{lib.count - 1}), got {option!r}",
            where=OPTION,
        )
    gpus = [lib.identify(i) for i in chosen]
    return LocalGpus(gpus, lib.reader(chosen), _said(how, gpus), source=source)


def _said(how: str, gpus: list[GpuId]) -> str:
    names = ", ".join(f"{g.id}: {g.name or '?'}" for g in gpus)
    return f"{how}, {len(gpus)} GPU{'s' if len(gpus) != 1 else ''} ({names}) every 0.1 s"


def _indexes(text: str) -> list[int]:
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise LlmPerfUsageError(
            f"expected auto, off or GPU indexes such as 0,1, got {text!r}", where=OPTION
        )
    return sorted({int(p) for p in parts})
