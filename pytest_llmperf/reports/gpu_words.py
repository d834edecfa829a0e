"""A run's GPU figures (``runs[].gpu``, docs/gpu.md) in words and cells, for every report.

Each report reads the JSON form of the block (the key paths of
:mod:`pytest_llmperf.specs.gpu_names`) and shows it its own way, from these helpers, so
that every report says the same number:

- :func:`gpu_parts`: the terminal's one line, as clauses
  (``gpu [run0]: 2 GPUs (nvml), power 500 W mean, 580 W max, energy 1000 J, 0.25 J/token,
  memory max 41000 MB, util 60.0%``);
- :func:`gpu_markdown`: the Markdown's table of one run, the GPUs together then one row
  per GPU;
- :func:`gpu_rows`: the HTML's table rows (the same cells);
- :func:`gpu_properties`: JUnit's ``llm_gpu[<name>][<run>]`` properties.

A run with no block (no GPU read) gets nothing from any of them (``[]``, ``""``): the
GPU sampler says once why it read none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.gfm import code, table, text
from pytest_llmperf.specs.gpu_names import GPU_METRICS, gpu_value

__all__ = [
    "GPU_HEADER",
    "format_gpu_value",
    "gpu_cells",
    "gpu_markdown",
    "gpu_parts",
    "gpu_properties",
    "gpu_rows",
]

GPU_HEADER = (
    "GPU",
    "power mean",
    "power max",
    "energy",
    "J/token",
    "memory max",
    "util",
    "temp max",
    "samples",
)
_SHOWN_UNIT = {"C": "°C"}


def format_gpu_value(value: float | None, unit: str) -> str:
    """``500 W``, ``41.5 W``, ``0.25 J``, ``0.0123 J``, ``41000 MB``, ``60.0%``, ``65 °C``;
    ``-`` when not measured. Three significant figures below 100, none lost above."""
    if value is None:
        return "-"
    if unit == "fraction":
        return f"{value * 100:.1f}%"
    size = abs(value)
    if size >= 100:
        figure = f"{value:.0f}"
    elif size >= 10:
        figure = f"{value:.1f}"
    elif size >= 1:
        figure = f"{value:.2f}"
    else:
        figure = f"{value:.3g}"
    return f"{figure} {_SHOWN_UNIT.get(unit, unit)}"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _figure(block: Mapping[str, Any], name: str) -> str:
    return format_gpu_value(gpu_value(block, name), GPU_METRICS[name].unit)


def _devices(block: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [d for d in block.get("devices") or () if isinstance(d, Mapping)]


def _sources(block: Mapping[str, Any]) -> str:
    """``nvml``, ``dcgm`` (each source's first word, once)."""
    words = [str(s).split(" ", 1)[0] for s in block.get("sources") or ()]
    return ", ".join(dict.fromkeys(w for w in words if w))


def _tokens_from(block: Mapping[str, Any]) -> str:
    source = block.get("output_tokens_from")
    return {"server": "server's tokens", "client": "client's tokens"}.get(str(source), "")


def gpu_parts(block: Mapping[str, Any] | None, label: str = "") -> list[str]:
    """The terminal's ``gpu [run0]:`` line as its clauses (broken at a clause): GPUs, power
    mean and max, energy, J per output token, memory max, utilisation, then the block's
    notes; ``[]`` without a block."""
    if not isinstance(block, Mapping):
        return []
    devices = _devices(block)
    names = list(dict.fromkeys(str(d.get("name") or "") for d in devices if d.get("name")))
    what = f"{len(devices)} GPU{'s' if len(devices) != 1 else ''}"
    about = ", ".join(x for x in (", ".join(names), _sources(block)) if x)
    head = f"gpu [{label}]: " if label else "gpu: "
    parts = [f"{head}{what}" + (f" ({about})" if about else "")]
    parts.append(
        f"power {_figure(block, 'gpu.power_w.mean')} mean, {_figure(block, 'gpu.power_w.max')} max"
    )
    per_token = _figure(block, "energy_per_output_token_j")
    whose = _tokens_from(block)
    parts.append(f"energy {_figure(block, 'gpu.energy_j')}")
    parts.append(f"{per_token}/token" + (f" ({whose})" if whose and per_token != "-" else ""))
    parts.append(f"memory max {_figure(block, 'gpu.memory_used_mb.max')}")
    parts.append(f"util {_figure(block, 'gpu.util')}")
    parts.extend(f"note: {n}" for n in block.get("notes") or ())
    return parts


def _stat(device: Mapping[str, Any], key: str, stat: str) -> float | None:
    entry = device.get(key)
    return _num(entry.get(stat)) if isinstance(entry, Mapping) else None


def gpu_cells(block: Mapping[str, Any] | None) -> list[list[str]]:
    """The rows of :data:`GPU_HEADER`: the GPUs together first (``all``: power and energy
    summed, memory and temperature the worst GPU's, utilisation the mean), then each GPU
    (its id, with its host where a page named one); ``[]`` without a block."""
    if not isinstance(block, Mapping):
        return []
    devices = _devices(block)
    samples = sum(int(_num(d.get("samples")) or 0) for d in devices)
    rows = [
        [
            "all" if len(devices) != 1 else _device_name(devices[0]),
            _figure(block, "gpu.power_w.mean"),
            _figure(block, "gpu.power_w.max"),
            _figure(block, "gpu.energy_j"),
            _figure(block, "energy_per_output_token_j"),
            _figure(block, "gpu.memory_used_mb.max"),
            _figure(block, "gpu.util"),
            _figure(block, "gpu.temperature_c.max"),
            str(samples),
        ]
    ]
    if len(devices) < 2:
        return rows
    for d in devices:
        energy = format_gpu_value(_num(d.get("energy_j")), "J")
        if d.get("energy_from") == "power" and energy != "-":
            energy += " (integrated)"
        rows.append(
            [
                _device_name(d),
                format_gpu_value(_stat(d, "power_w", "mean"), "W"),
                format_gpu_value(_stat(d, "power_w", "max"), "W"),
                energy,
                "",
                format_gpu_value(_stat(d, "memory_used_mb", "max"), "MB"),
                format_gpu_value(_stat(d, "util", "mean"), "fraction"),
                format_gpu_value(_stat(d, "temperature_c", "max"), "C"),
                str(int(_num(d.get("samples")) or 0)),
            ]
        )
    return rows


def _device_name(device: Mapping[str, Any]) -> str:
    """``GPU 0 (NVIDIA H200)``, ``GPU 3 on node-a``."""
    name = f"GPU {device.get('id', '?')}"
    if device.get("host"):
        name += f" on {device['host']}"
    if device.get("name"):
        name += f" ({device['name']})"
    return name


def gpu_rows(block: Mapping[str, Any] | None) -> list[list[str]]:
    """The HTML's GPU table rows (:data:`GPU_HEADER`'s columns): :func:`gpu_cells`."""
    return gpu_cells(block)


def gpu_markdown(nodeid: str, run: Mapping[str, Any]) -> str:
    """One run's GPU table in Markdown: a head naming the test, run and sources, the table,
    then the block's notes; ``""`` without a block."""
    block = run.get("gpu")
    rows = gpu_cells(block)
    if not rows or not isinstance(block, Mapping):
        return ""
    label = text(run.get("label") or "-")
    head = f"{code(nodeid, cell=False)} [{label}]"
    sources = "; ".join(str(s) for s in block.get("sources") or ())
    if sources:
        head += f" ({text(sources)})"
    cells = [[text(c) for c in row] for row in rows]
    body = head + ":\n\n" + table(list(GPU_HEADER), cells, right=tuple(range(1, 9))) + "\n"
    for note in block.get("notes") or ():
        body += f"\n- {text(str(note))}"
    return body + ("\n" if block.get("notes") else "")


def gpu_properties(runs: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """JUnit's properties: ``llm_gpu[<name>][<run>]`` for each GPU figure a run measured
    (``llm_gpu[energy_per_output_token_j][run0]`` = ``0.25 J``)."""
    out: list[tuple[str, str]] = []
    for i, run in enumerate(runs):
        block = run.get("gpu")
        if not isinstance(block, Mapping):
            continue
        label = str(run.get("label") or f"run{i}")
        for name, metric in GPU_METRICS.items():
            value = gpu_value(block, name)
            if value is not None:
                out.append((f"llm_gpu[{name}][{label}]", format_gpu_value(value, metric.unit)))
    return out
