"""The simulator's GPUs as NVIDIA's DCGM exporter writes them (``GET /llmperf/dcgm/metrics``).

A server on another machine or in Kubernetes has its GPUs read by dcgm-exporter, a
Prometheus page of ``DCGM_FI_*`` fields; the plugin reads that page as a server-metrics
page with the ``gpu`` role (docs/gpu.md). The simulator serves the same page for its
simulated GPUs (gpu_model.py) so that path runs end to end without one.

The page keeps the exporter's shape: the fields of its ``default-counters.csv`` that a
GPU of this kind reports, in that file's order, each with the exporter's ``# HELP``
(the CSV's help text) and ``# TYPE`` lines, then one sample per GPU labelled ``gpu``
(its index on the host), ``UUID``, ``pci_bus_id``, ``device`` (``nvidia<i>``),
``modelName`` and ``Hostname``. Integer fields are written as integers; power, a
floating-point field, with six decimals, as the exporter's Go formatting does. Units are
the exporter's: W, mJ (the energy counter, "since boot"), %, MiB, C, MHz.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .gpu_model import MEM_CLOCK_MHZ, SimGpu

__all__ = ["DCGM_FIELDS", "DCGM_PATH", "DcgmField", "render_dcgm"]

DCGM_PATH = "/llmperf/dcgm/metrics"


@dataclass(frozen=True)
class DcgmField:
    """One ``DCGM_FI_*`` field: its Prometheus type, help text and value for a GPU (given
    the GPU and its memory's total, MiB)."""

    name: str
    kind: str  # gauge | counter
    help: str
    value: Callable[[SimGpu, float], float]
    decimals: bool = False  # a floating-point field: six decimals (else an integer)


def _fb_free(gpu: SimGpu, total_mb: float) -> float:
    return round(total_mb) - round(gpu.memory_used_mb)


DCGM_FIELDS: tuple[DcgmField, ...] = (
    DcgmField(
        "DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda g, _: g.sm_clock_mhz
    ),
    DcgmField(
        "DCGM_FI_DEV_MEM_CLOCK",
        "gauge",
        "Memory clock frequency (in MHz).",
        lambda g, _: MEM_CLOCK_MHZ,
    ),
    DcgmField(
        "DCGM_FI_DEV_GPU_TEMP",
        "gauge",
        "GPU temperature (in C).",
        lambda g, _: round(g.temperature_c),
    ),
    DcgmField(
        "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda g, _: g.power_w, True
    ),
    DcgmField(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        lambda g, _: int(g.energy_mj),
    ),
    DcgmField(
        "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda g, _: round(g.util_pct)
    ),
    DcgmField("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", _fb_free),
    DcgmField(
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
        lambda g, _: round(g.memory_used_mb),
    ),
)


def _labels(gpu: SimGpu, host_index: int, model_name: str, hostname: str) -> str:
    return (
        f'gpu="{host_index}",UUID="{gpu.uuid}",pci_bus_id="{gpu.pci_bus_id}",'
        f'device="nvidia{host_index}",modelName="{model_name}",Hostname="{hostname}"'
    )


def render_dcgm(
    gpus: Sequence[SimGpu], model_name: str, memory_total_mb: float, hostname: str
) -> str:
    """The exporter's page for ``gpus`` (one host: ``gpu`` labels 0, 1, … in order)."""
    labels = [_labels(g, i, model_name, hostname) for i, g in enumerate(gpus)]
    lines: list[str] = []
    for f in DCGM_FIELDS:
        lines.append(f"# HELP {f.name} {f.help}")
        lines.append(f"# TYPE {f.name} {f.kind}")
        for gpu, label in zip(gpus, labels, strict=True):
            value = f.value(gpu, memory_total_mb)
            text = f"{value:.6f}" if f.decimals else str(int(value))
            lines.append(f"{f.name}{{{label}}} {text}")
    return "\n".join(lines) + "\n"
