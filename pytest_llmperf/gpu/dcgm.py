"""An NVIDIA DCGM exporter's Prometheus page as one read of its GPUs.

dcgm-exporter (NVIDIA/dcgm-exporter, ``etc/default-counters.csv``) writes one series per
GPU and field, labelled ``gpu`` (the index on its host), ``UUID``, ``device``
(``nvidia0``), ``modelName``, ``Hostname`` and, in Kubernetes, the ``pod``, ``namespace``
and ``container`` using the GPU. The fields read here, in their units:

- ``DCGM_FI_DEV_POWER_USAGE``: power draw, W (gauge);
- ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``: energy since boot, mJ (counter; a GPU
  without the counter has no such series);
- ``DCGM_FI_DEV_GPU_UTIL``: utilisation, % (gauge);
- ``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE``: frame buffer used / free, MiB;
- ``DCGM_FI_DEV_GPU_TEMP``: temperature, degrees C; ``DCGM_FI_DEV_SM_CLOCK``: MHz.

A value DCGM writes for "no value" (its blank sentinels, near 2**63, as the exporter's
README shows for a memory temperature) is read as not given. The page is parsed by
``prometheus_client``'s parser (:func:`parse_dcgm`), or handed over as series already
parsed (:func:`dcgm_tick`: the fleet sampler's scrapes, name -> label set -> value).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client.parser import text_string_to_metric_families

from pytest_llmperf.gpu.readings import GpuId, GpuReading, GpuTick

__all__ = [
    "DCGM_FIELDS",
    "ENERGY",
    "FB_FREE",
    "FB_USED",
    "POWER",
    "SM_CLOCK",
    "TEMPERATURE",
    "UTIL",
    "dcgm_tick",
    "parse_dcgm",
]

POWER = "DCGM_FI_DEV_POWER_USAGE"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
TEMPERATURE = "DCGM_FI_DEV_GPU_TEMP"
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
DCGM_FIELDS = (POWER, ENERGY, UTIL, FB_USED, FB_FREE, TEMPERATURE, SM_CLOCK)
_BLANK = 9.0e18  # DCGM's blank values (DCGM_INT64_BLANK and neighbours) are above this

LabelSet = tuple[tuple[str, str], ...]
Series = Mapping[str, Mapping[LabelSet, float]]


def parse_dcgm(text: str, at_ns: int, *, page: str) -> GpuTick:
    """The GPUs of a DCGM exporter's page ``text`` read at ``at_ns`` (``page``: the host
    name where a series has no ``Hostname``). Raises ``ValueError`` for a page that is
    not Prometheus text."""
    series: dict[str, dict[LabelSet, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name.removesuffix("_total") if family.type == "counter" else sample.name
            key = tuple(sorted(sample.labels.items()))
            series.setdefault(name, {})[key] = float(sample.value)
    return dcgm_tick(series, at_ns, page=page)


def dcgm_tick(series: Series, at_ns: int, *, page: str) -> GpuTick:
    """The GPUs in ``series`` (metric name, with or without a counter's ``_total`` ->
    label set -> value) as one :class:`GpuTick`; GPUs with no field read here are left
    out. A GPU is told apart by its ``Hostname``, ``gpu`` and ``UUID`` labels; where one
    GPU has several series of a field (its users in Kubernetes), the first is read."""
    fields: dict[tuple[str, str, str], dict[str, float]] = {}
    labels_of: dict[tuple[str, str, str], Mapping[str, str]] = {}
    for name in DCGM_FIELDS:
        for labels, value in _series(series, name):
            found = dict(labels)
            key = (found.get("Hostname") or page, found.get("gpu", ""), found.get("UUID", ""))
            labels_of.setdefault(key, found)
            if value < _BLANK and value == value:  # NaN and DCGM's blanks: not given
                fields.setdefault(key, {}).setdefault(name, value)
    readings: dict[GpuId, GpuReading] = {}
    for key, got in fields.items():
        gpu = GpuId(
            id=key[1] or key[2] or "?",
            source="dcgm",
            name=labels_of[key].get("modelName", ""),
            uuid=key[2] or None,
            host=key[0],
        )
        readings[gpu] = _reading(got, at_ns)
    return GpuTick(at_ns, readings)


def _series(series: Series, name: str) -> Iterable[tuple[LabelSet, float]]:
    found: Mapping[LabelSet, float] | None = series.get(name)
    if found is None:
        found = series.get(name + "_total")
    return (found or {}).items()


def _reading(got: Mapping[str, float], at_ns: int) -> GpuReading:
    def get(name: str) -> float | None:
        return got.get(name)

    used, free = get(FB_USED), get(FB_FREE)
    util, energy = get(UTIL), get(ENERGY)
    return GpuReading(
        at_ns=at_ns,
        power_w=get(POWER),
        energy_j=None if energy is None else energy / 1000.0,
        memory_used_mb=used,
        memory_total_mb=None if used is None or free is None else used + free,
        util=None if util is None else util / 100.0,
        temperature_c=get(TEMPERATURE),
        sm_clock_mhz=get(SM_CLOCK),
    )
