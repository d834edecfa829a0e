"""The GPU figures of a session group (``--llm-ruleset`` targets judged over a session's
gated runs merged per endpoint and model: :mod:`.session`): the runs' ``gpu`` blocks as one.

Merged per GPU (the same source, id and host): energy and samples add, power and
utilisation means are weighted by each run's samples, the maxima are the largest; the
output tokens add. So ``energy_per_output_token_j`` over a session is its GPU energy over
the tokens of the same runs, whichever runs read no GPU (those add neither: said in the
notes), and ``gpu.power_w.mean`` the GPUs' mean draw over the sampled time. The series
are dropped (the runs' time axes do not line up).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_llmperf.gpu.figures import EnergySource, GpuDevice, GpuFigures, TokenSource

__all__ = ["merge_gpu_blocks"]


def _weighted(pairs: list[tuple[float | None, int]]) -> float | None:
    """The samples-weighted mean, None where a run lacks the value or nothing was sampled."""
    total = sum(n for _, n in pairs)
    if not pairs or any(v is None for v, _ in pairs) or total <= 0:
        return None
    return sum((v or 0.0) * n for v, n in pairs) / total


def _largest(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return max(found) if found else None


def _total(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(v or 0.0 for v in values)


def _merge_device(parts: list[GpuDevice]) -> GpuDevice:
    first = parts[0]
    weights = [d.samples for d in parts]
    sources = {d.energy_from for d in parts}
    return GpuDevice(
        id=first.id,
        source=first.source,
        name=first.name,
        uuid=first.uuid,
        host=first.host,
        samples=sum(weights),
        power_w_mean=_weighted([(d.power_w_mean, d.samples) for d in parts]),
        power_w_max=_largest(d.power_w_max for d in parts),
        energy_j=_total([d.energy_j for d in parts]),
        energy_from=(
            EnergySource.COUNTER
            if sources == {EnergySource.COUNTER}
            else EnergySource.POWER
            if EnergySource.POWER in sources
            else None
        ),  # integrated for some run: said as integrated
        memory_used_mb_mean=_weighted([(d.memory_used_mb_mean, d.samples) for d in parts]),
        memory_used_mb_max=_largest(d.memory_used_mb_max for d in parts),
        memory_total_mb=_largest(d.memory_total_mb for d in parts),
        util_mean=_weighted([(d.util_mean, d.samples) for d in parts]),
        util_max=_largest(d.util_max for d in parts),
        temperature_c_max=_largest(d.temperature_c_max for d in parts),
        sm_clock_mhz_mean=_weighted([(d.sm_clock_mhz_mean, d.samples) for d in parts]),
    )


def merge_gpu_blocks(blocks: Iterable[Mapping[str, Any] | None]) -> GpuFigures | None:
    """The session's ``gpu`` block from its runs' (the JSON form; None: a run that read no
    GPU); None when no run read one."""
    given = list(blocks)
    read = [GpuFigures.from_dict(dict(b)) for b in given if isinstance(b, Mapping)]
    if not read:
        return None
    devices: dict[tuple[str, str, str | None], list[GpuDevice]] = {}
    for figures in read:
        for d in figures.devices:
            devices.setdefault((d.source, d.id, d.host), []).append(d)
    tokens = [f.output_tokens for f in read]
    whose = {f.output_tokens_from for f in read}
    peaks = [f.power_w_max for f in read]
    notes = list(dict.fromkeys(n for f in read for n in f.notes))
    if len(read) < len(given):
        notes.append(
            f"{len(given) - len(read)} of {len(given)} merged runs read no GPU: "
            "their energy and tokens are not in these figures"
        )
    total_tokens = None if any(not t for t in tokens) else _total(tokens)
    return GpuFigures(
        devices=[_merge_device(parts) for parts in devices.values()],
        sources=list(dict.fromkeys(s for f in read for s in f.sources)),
        interval_s=read[0].interval_s,
        power_w_max=None if any(p is None for p in peaks) else _largest(peaks),
        output_tokens=total_tokens,
        output_tokens_from=(
            None
            if total_tokens is None
            else TokenSource.SERVER
            if whose == {TokenSource.SERVER}
            else TokenSource.CLIENT
        ),
        notes=notes,
    )
