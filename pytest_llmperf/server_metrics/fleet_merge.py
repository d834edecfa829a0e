"""Several pages' summaries as one: a fleet's ``whole`` and each role's pool.

Each page was summarised on its own, under the one-process rule
(:mod:`.summarise`); here their numbers are put together, never their scrapes:

- counters (``server.requests``, tokens, preemptions): summed;
- ratios (``server.prefix_cache_hit_rate``, ``server.spec_decode_acceptance``):
  recomputed from the summed numerators and denominators each page keeps beside its
  summary (:attr:`~.summary.ServerMetrics.parts`), so a busy replica weighs as much as
  its lookups; a ratio only some page's mean says (SGLang's acceptance gauge): the mean;
- latency histograms: merged bucket by bucket where the pages' bounds agree (the
  percentiles then read off the merged buckets, the mean from the exact sums); bounds
  that differ: a note, and the metric left out (a percentile of mixed buckets would be
  a guess);
- gauges, one rule by unit: a count (``server.running``, ``server.waiting``) is the
  fleet's total, so its ``mean`` is the sum of the pages' means, its ``max`` the sum of
  their maxima (an upper bound: the pages' peaks need not coincide) and its ``min`` the
  sum of their minima (a lower bound); a fraction (``server.kv_cache_usage``) is per
  engine, so its ``mean`` is the mean of the pages' means and its ``max``/``min`` the
  largest and smallest of theirs. The series: sample k of every page together (the
  pages are sampled on one clock, each at the same interval), summed or averaged by
  the same rule.

The whole is every replica, prefill and decode page (a router's counters would count
each request a second time). A disaggregated fleet (prefill and decode pages) takes each
name from the pages where its phase runs (:data:`PREFILL_SIDE`: queue, prefill, prompt
tokens and prefix-cache hits from the prefill pages; requests, TTFT, ITL, e2e, decode,
KV transfer and generated tokens from the decode pages; replica pages on both sides),
so that a request served by both pools counts once; gauges and preemptions over every
page. An unknown family's own metrics (``raw``) are not merged (their kinds are unknown).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_llmperf.server_metrics.deltas import bucket_rows, latency_stats
from pytest_llmperf.server_metrics.exposition import HistogramSeries
from pytest_llmperf.server_metrics.fleet import FleetMetrics, PageMetrics
from pytest_llmperf.server_metrics.summary import (
    COMMON_METRICS,
    MetricKind,
    ServerFamily,
    ServerMetrics,
)
from pytest_llmperf.specs.fleet_names import ENGINE_ROLES, PageRole

__all__ = ["PREFILL_SIDE", "PREFIX_HIT_RATE", "fleet_metrics", "merge_pages"]

PREFIX_HIT_RATE = "server.prefix_cache_hit_rate"
# a disaggregated fleet's names that the prefill side says (the rest: the decode side)
PREFILL_SIDE = frozenset(
    {"server.queue_time", "server.prefill_time", "server.prompt_tokens", PREFIX_HIT_RATE}
)
_PREEMPTIONS = "server.preemptions"
_REQUESTS = "server.requests"
_WHOLE_ROLES = (PageRole.REPLICA, PageRole.PREFILL, PageRole.DECODE)  # a router's: not added


def fleet_metrics(
    pages: Sequence[PageMetrics], *, discovered: str | None = None, notes: Sequence[str] = ()
) -> FleetMetrics:
    """The fleet of ``pages`` (in the order given): each role's pool, the ``whole`` (every
    replica, prefill and decode page: a router's counters would count each request a
    second time), the prefix-cache hit rate over the whole and each page's requests."""
    out = FleetMetrics(pages=list(pages), discovered=discovered, notes=list(notes))
    for role in ENGINE_ROLES:  # a gpu page is never an engine's (gpu_pages.py)
        members = [p for p in pages if p.role is role]
        if members:
            out.roles[role.value] = merge_pages(members, f"{role.value} pool")
    counted = [p for p in pages if p.role in _WHOLE_ROLES]
    out.whole = merge_pages(counted, "fleet")
    roles = {p.role for p in counted}
    if PageRole.PREFILL in roles and PageRole.DECODE in roles:
        _by_phase(out.whole, counted)
        out.notes.append(
            "disaggregated: the whole takes each name from the pages where its phase runs "
            "(queue, prefill, prompt tokens, prefix-cache hits: prefill and replica pages; "
            "requests, TTFT, ITL, e2e, decode, KV transfer, generated tokens: decode and "
            "replica pages), so a request served by both pools counts once; gauges and "
            "preemptions: every page"
        )
    rate = out.whole.stat(PREFIX_HIT_RATE, None)
    out.prefix_hit_rate = rate
    for page in pages:
        value = page.metrics.stat(_REQUESTS, None)
        if value is not None:
            out.requests[page.name] = value
    missing = [p for p in pages if p.metrics.missing is not None]
    for page in missing:
        out.notes.append(f"{page.role.value} {page.name}: no numbers ({page.metrics.missing})")
    return out


def _by_phase(whole: ServerMetrics, pages: Sequence[PageMetrics]) -> None:
    """A disaggregated fleet's whole: each phase's names from the pages that run it
    (:data:`PREFILL_SIDE`; every other counter and histogram: the decode side)."""
    sides = {
        True: [p for p in pages if p.role in (PageRole.PREFILL, PageRole.REPLICA)],
        False: [p for p in pages if p.role in (PageRole.DECODE, PageRole.REPLICA)],
    }
    merged = {k: merge_pages(v, "fleet") for k, v in sides.items()}
    taken = [
        name
        for name, (kind, _) in COMMON_METRICS.items()
        if kind is not MetricKind.GAUGE and name != _PREEMPTIONS
    ]
    # a name's notes are its side's (bounds that differ across pools need not differ in one)
    whole.notes[:] = [n for n in whole.notes if not n.startswith(tuple(f"{t}:" for t in taken))]
    for name in taken:
        side = merged[name in PREFILL_SIDE]
        whole.notes.extend(n for n in side.notes if n.startswith(f"{name}:"))
        for table in (whole.metrics, whole.buckets, whole.parts):
            table.pop(name, None)
        if name in side.metrics:
            whole.metrics[name] = side.metrics[name]
        if name in side.buckets:
            whole.buckets[name] = side.buckets[name]
        if name in side.parts:
            whole.parts[name] = side.parts[name]


def merge_pages(pages: Sequence[PageMetrics], what: str) -> ServerMetrics:
    """``pages``' summaries as one :class:`ServerMetrics` (module docstring); ``what`` names it
    (its ``source``: ``"fleet"``, ``"decode pool"``)."""
    names = [f"{p.role.value} {p.name}" for p in pages]
    live = [p for p in pages if p.metrics.scrapes or p.metrics.metrics]
    families = {p.metrics.family for p in live}  # a page without numbers has no say
    family = families.pop() if len(families) == 1 else ServerFamily.UNKNOWN
    out = ServerMetrics(source=f"{what}: {', '.join(names)}" if names else what, family=family)
    out.scrapes = sum(p.metrics.scrapes for p in pages)
    for page, name in zip(pages, names, strict=True):
        if page.metrics.missing is not None and live:
            out.notes.append(f"{name}: {page.metrics.missing}")
    if not live:
        why = "; ".join(f"{n}: {p.metrics.missing}" for n, p in zip(names, pages, strict=True))
        out.missing = f"no page of the {what} had numbers" + (f" ({why})" if why else "")
        return out
    for name, (kind, unit) in COMMON_METRICS.items():
        having = [p for p in live if name in p.metrics.metrics]
        if not having:
            continue
        if kind is MetricKind.LATENCY:
            _latency(out, name, having)
        elif kind is MetricKind.GAUGE:
            _gauge(out, name, having, fraction=unit == "fraction")
        else:
            _value(out, name, having, fraction=unit == "fraction")
    return out


def _latency(out: ServerMetrics, name: str, pages: Sequence[PageMetrics]) -> None:
    rows = [p.metrics.buckets.get(name) for p in pages]
    if any(r is None for r in rows):
        out.notes.append(f"{name}: a page has no buckets: left out of the {out.source}")
        return
    bounds = [tuple(float(u) for u, _ in r or ()) for r in rows]
    if len(set(bounds)) > 1:
        which = ", ".join(f"{p.role.value} {p.name}" for p in pages)
        out.notes.append(f"{name}: the pages' bucket bounds differ ({which}): not merged, left out")
        return
    upper = bounds[0]
    counts = [0.0] * len(upper)
    total_sum = 0.0
    total_count = 0.0
    for page, r in zip(pages, rows, strict=True):
        for i, (_, c) in enumerate(r or ()):
            counts[i] += float(c)
        s, n = page.metrics.parts.get(name) or _sum_count(page.metrics, name)
        total_sum += s
        total_count += n
    cumulative = tuple(_running(counts))
    merged = HistogramSeries(upper, cumulative, total_sum, total_count)
    stats, note = latency_stats(merged, 1.0)
    out.metrics[name] = stats
    out.buckets[name] = bucket_rows(merged, 1.0)
    out.parts[name] = (total_sum, total_count)
    if note:
        out.notes.append(f"{name}: {note}")


def _sum_count(metrics: ServerMetrics, name: str) -> tuple[float, float]:
    """A page's (sum in ms, count) from its summary (a page read back from JSON)."""
    entry = metrics.metrics.get(name, {})
    count = float(entry.get("count", 0.0))
    return float(entry.get("mean", 0.0)) * count, count


def _running(counts: Sequence[float]) -> list[float]:
    total = 0.0
    out = []
    for c in counts:
        total += c
        out.append(total)
    return out


def _gauge(out: ServerMetrics, name: str, pages: Sequence[PageMetrics], *, fraction: bool) -> None:
    stats = [p.metrics.metrics[name] for p in pages]

    def combine(values: list[float], pick: str) -> float:
        if not fraction:
            return round(math.fsum(values), 6)
        if pick == "mean":
            return round(math.fsum(values) / len(values), 6)
        return max(values) if pick == "max" else min(values)

    out.metrics[name] = {
        stat: combine([float(s[stat]) for s in stats if stat in s], stat)
        for stat in ("max", "mean", "min")
        if any(stat in s for s in stats)
    }
    series = [p.metrics.series.get(name) or [] for p in pages]
    length = min(len(s) for s in series)
    if length:
        points = []
        for k in range(length):
            at = math.fsum(s[k][0] for s in series) / len(series)
            values = [float(s[k][1]) for s in series]
            v = math.fsum(values) / len(values) if fraction else math.fsum(values)
            points.append([round(at, 3), round(v, 6)])
        out.series[name] = points


def _value(out: ServerMetrics, name: str, pages: Sequence[PageMetrics], *, fraction: bool) -> None:
    parts = [p.metrics.parts.get(name) for p in pages]
    if fraction and all(part is not None for part in parts):
        num = math.fsum(part[0] for part in parts if part is not None)
        den = math.fsum(part[1] for part in parts if part is not None)
        out.parts[name] = (num, den)
        if den > 0:
            out.metrics[name] = {"value": round(num / den, 6)}
        return
    values = [float(p.metrics.metrics[name].get("value", 0.0)) for p in pages]
    if fraction:  # a gauge's mean on some page (SGLang's acceptance rate): their mean
        out.metrics[name] = {"value": round(math.fsum(values) / len(values), 6)}
    else:
        out.metrics[name] = {"value": round(math.fsum(values), 6)}
