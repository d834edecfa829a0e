"""A run's GPUs on the HTML report's time axis: each GPU's power and memory used over the
run, a line per GPU, from the block's ``devices[].series`` (seconds since the run started,
downsampled by the producer to a few hundred points).

The lines reuse :func:`~pytest_llmperf.svg.line_chart`, as the server's and a fleet's
gauges do (:func:`~.fleet_plots.page_series_plots`), with a staged run's stages as bands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.reports.plots import run_timeline, stage_bands
from pytest_llmperf.svg import Series

__all__ = ["device_points", "gpu_plots"]


def device_points(device: Mapping[str, Any], key: str) -> list[tuple[float, float]]:
    """One GPU's ``series[key]`` as plot points (a time whose value was not read, or a
    malformed or non-finite sample of a report read back from JSON, left out)."""
    series = device.get("series")
    if not isinstance(series, Mapping):
        return []
    out = []
    for t, v in zip(series.get("t_s") or (), series.get(key) or (), strict=False):
        try:
            x, y = float(t), float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(x) and math.isfinite(y):
            out.append((x, y))
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _name(device: Mapping[str, Any]) -> str:
    host = f" on {device['host']}" if device.get("host") else ""
    return f"GPU {device.get('id', '?')}{host}"


def gpu_plots(
    block: Mapping[str, Any] | None, *, stages: Sequence[Mapping[str, Any]] = ()
) -> list[str]:
    """Power (W) and memory used (MB) per GPU over the run (memory from 0 to the GPUs'
    capacity where each said it); none without a block or without series (a producer
    that kept none)."""
    if not isinstance(block, Mapping):
        return []
    devices = [d for d in block.get("devices") or () if isinstance(d, Mapping)]
    bands = stage_bands(stages)
    totals = [_number(d.get("memory_total_mb")) for d in devices]
    # memory against the largest GPU's capacity, where every GPU said its own: how full
    memory_range = (0.0, max(t for t in totals if t)) if totals and all(totals) else None
    charts = []
    for key, title, y_label, y_range in (
        ("power_w", "GPU power, per GPU", "W", None),
        ("memory_used_mb", "GPU memory used, per GPU", "MB", memory_range),
    ):
        series = [Series(_name(d), pts) for d in devices if (pts := device_points(d, key))]
        kind = f"gpu-{key.replace('_', '-')}"
        chart = run_timeline(
            series, title=title, y_label=y_label, kind=kind, y_range=y_range, bands=bands
        )
        if chart is not None:
            charts.append(chart)
    return charts
