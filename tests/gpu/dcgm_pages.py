"""Pages in an NVIDIA DCGM exporter's format, for tests.

As dcgm-exporter writes them (NVIDIA/dcgm-exporter: its README's example and
``etc/default-counters.csv``): a ``# HELP`` and ``# TYPE`` line per field, the energy
counter typed ``counter`` (mJ since boot, no ``_total`` suffix), every other field a
gauge, one series per GPU labelled ``gpu``, ``UUID``, ``pci_bus_id``, ``device``,
``modelName``, ``Hostname`` and ``DCGM_FI_DRIVER_VERSION``.
"""

from __future__ import annotations

from dataclasses import dataclass

# (field, type, help) in default-counters.csv's order and words
FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
)
BLANK = 9223372036854775794  # what the exporter's README shows for a field with no value


@dataclass
class DcgmGpu:
    """One GPU's values on a page; ``energy_mj`` None: a GPU without the counter."""

    gpu: str
    uuid: str
    host: str
    power_w: float
    energy_mj: float | None
    util_pct: float = 50.0
    fb_used: float = 1000.0
    fb_free: float = 80000.0
    temp_c: float = 60.0
    sm_clock: float = 1980.0
    model: str = "NVIDIA H100 80GB HBM3"

    def value(self, field: str) -> float | None:
        return {
            "DCGM_FI_DEV_SM_CLOCK": self.sm_clock,
            "DCGM_FI_DEV_MEM_CLOCK": 2619.0,
            "DCGM_FI_DEV_MEMORY_TEMP": BLANK,
            "DCGM_FI_DEV_GPU_TEMP": self.temp_c,
            "DCGM_FI_DEV_POWER_USAGE": self.power_w,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": self.energy_mj,
            "DCGM_FI_DEV_GPU_UTIL": self.util_pct,
            "DCGM_FI_DEV_FB_FREE": self.fb_free,
            "DCGM_FI_DEV_FB_USED": self.fb_used,
        }[field]


def dcgm_page(gpus: list[DcgmGpu]) -> str:
    """The exporter's page for ``gpus``."""
    lines: list[str] = []
    for field, kind, about in FIELDS:
        lines += [f"# HELP {field} {about}", f"# TYPE {field} {kind}"]
        for g in gpus:
            value = g.value(field)
            if value is None:
                continue
            labels = (
                f'gpu="{g.gpu}",UUID="{g.uuid}",pci_bus_id="00000000:{18 + int(g.gpu):02X}:00.0",'
                f'device="nvidia{g.gpu}",modelName="{g.model}",Hostname="{g.host}",'
                'DCGM_FI_DRIVER_VERSION="550.54.15"'
            )
            number = f"{value:g}" if value != BLANK else str(BLANK)
            lines.append(f"{field}{{{labels}}} {number}")
    return "\n".join(lines) + "\n"
