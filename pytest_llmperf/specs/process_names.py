"""The names of the metrics of the server process the gate started (``startup.ready_s``,
``server.rss_max_mb``, …).

Here, in the low package, like :mod:`.server_names`: the SLO grammar (:mod:`.slo`)
parses ``startup.ready_s < 90s`` at collection, the verdicts, baselines, reports and
history read the values from a run's ``server_process`` block (``runs[].server_process``,
written by the plugin from :mod:`pytest_llmperf.managed_server`), and all of them look
the names up here: one table.

Each is one value per run (no statistic): ``startup.*`` from ``server_process["startup"]``
(the server this run measured: spawn -> ready, spawn -> the first token of one streamed
one-token request sent when ready), ``server.*`` from ``server_process["resources"]``
(the process tree sampled over the run). MB are mebibytes (2**20 bytes), GB 1024 MB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PROCESS_METRICS",
    "STARTUP_METRICS",
    "ProcessMetric",
    "format_process_value",
    "process_metric",
    "process_value",
]


@dataclass(frozen=True)
class ProcessMetric:
    """One process metric: where its value is in the ``server_process`` block, its
    canonical unit and the units an SLO may write (unit -> factor to the canonical one;
    ``""`` = no unit written, read in the canonical unit)."""

    name: str
    section: str  # "startup" or "resources"
    key: str
    unit: str  # canonical: "s", "MB" or "ms"
    units: Mapping[str, float]
    about: str

    @property
    def is_startup(self) -> bool:
        return self.section == "startup"


_SECONDS = {"s": 1.0, "ms": 1e-3, "": 1.0}
_MEGABYTES = {"MB": 1.0, "GB": 1024.0, "": 1.0}
_MILLISECONDS = {"ms": 1.0, "us": 1e-3, "µs": 1e-3, "s": 1e3, "": 1.0}


def _metric(
    name: str, section: str, unit: str, units: Mapping[str, float], about: str
) -> ProcessMetric:
    # the block's keys are the names' own: startup.ready_s -> startup["ready_s"]
    return ProcessMetric(name, section, name.partition(".")[2], unit, units, about)


PROCESS_METRICS: dict[str, ProcessMetric] = {
    m.name: m
    for m in (
        _metric("startup.ready_s", "startup", "s", _SECONDS, "spawn to ready"),
        _metric(
            "startup.first_token_s",
            "startup",
            "s",
            _SECONDS,
            "spawn to the first token of one streamed one-token request sent when ready",
        ),
        _metric(
            "server.rss_max_mb", "resources", "MB", _MEGABYTES, "largest RSS of the process tree"
        ),
        _metric(
            "server.rss_growth_mb",
            "resources",
            "MB",
            _MEGABYTES,
            "RSS of the process tree at the run's end minus at its start",
        ),
        _metric(
            "server.gpu_mem_max_mb",
            "resources",
            "MB",
            _MEGABYTES,
            "largest GPU memory used by the tree's processes (NVML)",
        ),
        _metric("server.cpu_s", "resources", "s", _SECONDS, "CPU time (user+system) of the tree"),
        _metric(
            "server.cpu_ms_per_output_token",
            "resources",
            "ms",
            _MILLISECONDS,
            "the tree's CPU time over the run's output tokens",
        ),
    )
}
# compared against a baseline by default (the resources only when named in a threshold)
STARTUP_METRICS = tuple(name for name, m in PROCESS_METRICS.items() if m.is_startup)


def process_metric(name: str) -> ProcessMetric | None:
    """The process metric called ``name``, None for any other name."""
    return PROCESS_METRICS.get(name)


def process_value(block: Mapping[str, Any] | None, name: str) -> float | None:
    """The value of process metric ``name`` in a run's ``server_process`` block, None
    where the block, its section or the value is missing (a URL the gate did not start,
    no GPU, no output tokens)."""
    metric = PROCESS_METRICS[name]
    section = (block or {}).get(metric.section)
    if not isinstance(section, Mapping):
        return None
    value = section.get(metric.key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def format_process_value(name: str, value: float | None) -> str:
    """``41.2 s``, ``830 MB``, ``1.9 ms``; ``-`` when absent."""
    if value is None:
        return "-"
    unit = PROCESS_METRICS[name].unit
    if unit == "MB":
        return f"{value:.0f} MB" if abs(value) >= 100 else f"{value:.1f} MB"
    if unit == "s":
        return f"{value:.1f} s" if abs(value) >= 10 else f"{value:.2f} s"
    return f"{value:.3g} {unit}"
