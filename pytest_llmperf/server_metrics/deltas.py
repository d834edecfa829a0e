"""A run's own numbers from scrapes of cumulative metrics: deltas, bucket percentiles, gauges.

A server's counters and histograms count from its start; the run's share is
the difference between a scrape before and one after it. For a histogram that
difference is taken per bucket, which gives the run's own distribution — but
only to within a bucket: a percentile is reported at the upper bound of the
bucket its rank falls in (conservative: the true value is at most that), with
the bucket's lower bound beside it (``pN_lo``), and ``bucket_ms`` is the
width of the p50's bucket. The mean is exact (Δsum / Δcount); the maximum is
the upper bound of the highest bucket that gained observations.

All of that holds only between two scrapes of the same process: behind a load
balancer each scrape may be a different worker, and differences between two
workers' counters are nonsense (vLLM's router alternates: generation tokens
read 9461, then 1282). :func:`not_one_process` says why a sequence of scrapes
is not one process's, so the caller reports none rather than wrong ones.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Sequence

from pytest_llmperf.server_metrics.exposition import HistogramSeries, Scrape

__all__ = [
    "PERCENTILES",
    "bucket_rows",
    "counter_delta",
    "gauge_stats",
    "histogram_delta",
    "latency_stats",
    "not_one_process",
]

# The percentiles a latency summary carries, by their stat names.
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
)
_EPS = 1e-9  # counters arrive as floats: a difference this small is rounding, not a reset


def not_one_process(scrapes: Sequence[Scrape]) -> str | None:
    """Why ``scrapes`` (in time order) are not all of one process, None when they are.

    Not one process: ``process_start_time_seconds`` differs (or only some
    scrapes export it); a label that names a process (``instance``, ``pid``,
    ``engine``, ...) has different values in two scrapes that both have it; a
    counter or a histogram's count in some label set goes down from one scrape
    to the next (a restart, or another worker).
    """
    for a, b in itertools.pairwise(scrapes):
        why = _differ(a, b)
        if why is not None:
            return why
    return None


def _differ(a: Scrape, b: Scrape) -> str | None:
    if a.process_start != b.process_start:
        if not a.process_start or not b.process_start:
            return "process_start_time_seconds is exported by some scrapes and not others"
        return (
            f"process_start_time_seconds changed from {_fmt(a.process_start)} "
            f"to {_fmt(b.process_start)}"
        )
    labels_a = _by_label(a.identity)
    labels_b = _by_label(b.identity)
    for label in sorted(labels_a.keys() & labels_b.keys()):
        if labels_a[label] != labels_b[label]:
            return (
                f"label {label} was {','.join(sorted(labels_a[label]))}, "
                f"then {','.join(sorted(labels_b[label]))}"
            )
    for name, series in b.counters.items():
        before = a.counters.get(name)
        if not before:
            continue
        for labels, value in series.items():
            old = before.get(labels)
            if old is not None and value < old - _EPS * max(1.0, abs(old)):
                return f"{name} went backwards, from {old:g} to {value:g}"
    for name, hists in b.histograms.items():
        earlier = a.histograms.get(name)
        if not earlier:
            continue
        for labels, h in hists.items():
            old_h = earlier.get(labels)
            if old_h is not None and h.count < old_h.count - _EPS * max(1.0, old_h.count):
                return f"{name}_count went backwards, from {old_h.count:g} to {h.count:g}"
    return None


def _by_label(identity: frozenset[tuple[str, str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for label, value in identity:
        out.setdefault(label, set()).add(value)
    return out


def _fmt(values: tuple[float, ...]) -> str:
    return ",".join(f"{v:.3f}" for v in values)


def counter_delta(
    start: Scrape,
    end: Scrape,
    names: Sequence[str],
    without: Collection[tuple[str, str]] = (),
) -> float | None:
    """``end - start`` of the counters ``names`` summed, None when any is on neither page.

    A name on the end page only (a counter a server creates at its first use)
    counts from 0.
    """
    total = 0.0
    for name in names:
        after = end.counter(name, without=without)
        if after is None:
            return None
        before = start.counter(name, without=without)
        total += after - (before or 0.0)
    return max(0.0, total)


def histogram_delta(start: Scrape, end: Scrape, name: str) -> HistogramSeries | None:
    """The observations ``name`` gained between ``start`` and ``end`` (per bucket), None
    when the end page lacks it. Bounds both pages have are kept (a histogram on the end
    page only counts from zero)."""
    after = end.histogram(name)
    if after is None:
        return None
    before = start.histogram(name)
    if before is None:
        return after
    earlier = dict(zip(before.bounds, before.cumulative, strict=True))
    pairs = [(b, c) for b, c in zip(after.bounds, after.cumulative, strict=True) if b in earlier]
    bounds = tuple(b for b, _ in pairs)
    cumulative = tuple(max(0.0, c - earlier[b]) for b, c in pairs)
    return HistogramSeries(
        bounds, cumulative, max(0.0, after.sum - before.sum), max(0.0, after.count - before.count)
    )


def histogram_sum_delta(start: Scrape, end: Scrape, name: str) -> float | None:
    """The run's delta of histogram ``name``'s ``_sum`` (None when the end page lacks it)."""
    delta = histogram_delta(start, end, name)
    return None if delta is None else delta.sum


def latency_stats(delta: HistogramSeries, scale: float = 1000.0) -> tuple[dict[str, float], str]:
    """The run's latency summary from its bucket deltas (seconds × ``scale``: ms).

    Returns ``{"count", "mean", "p50", "p50_lo", …, "p99.9", "max", "max_lo",
    "bucket_ms"}`` and a note (empty when none). A percentile is nearest rank
    (rank ``ceil(q·n)``, as the client's percentiles) reported at the upper bound
    of the bucket that rank falls in, ``pN_lo`` that bucket's lower bound; a
    rank in the ``+Inf`` bucket has no upper bound, so that percentile (and the
    max) is left out and the note says so. ``count`` 0: only the count.
    """
    n = delta.count
    out: dict[str, float] = {"count": float(round(n))}
    if n <= 0:
        return out, ""
    out["mean"] = round(delta.sum / n * scale, 3)
    beyond: list[str] = []
    for stat, q in PERCENTILES:
        index = _rank_bucket(delta, max(1.0, math.ceil(q / 100.0 * n - _EPS)))
        if index is None or math.isinf(delta.bounds[index]):
            beyond.append(stat)
            continue
        lo, hi = _edges(delta, index)
        out[stat] = round(hi * scale, 3)
        out[f"{stat}_lo"] = round(lo * scale, 3)
        if stat == "p50":
            out["bucket_ms"] = round((hi - lo) * scale, 3)
    top = _top_bucket(delta)
    if top is not None and not math.isinf(delta.bounds[top]):
        lo, hi = _edges(delta, top)
        out["max"] = round(hi * scale, 3)
        out["max_lo"] = round(lo * scale, 3)
    elif top is not None:
        beyond.append("max")
    note = ""
    if beyond:
        last = max((b for b in delta.bounds if not math.isinf(b)), default=0.0)
        note = (
            f"{', '.join(beyond)} beyond the last finite bucket (> {last * scale:g} ms): "
            "no upper bound to report"
        )
    return out, note


def bucket_rows(delta: HistogramSeries, scale: float = 1000.0) -> list[list[float]]:
    """The delta as ``[[upper bound × scale, observations in that bucket], …]`` (ascending;
    the last bound is ``inf``): :attr:`ServerMetrics.buckets`, from which any percentile an
    SLO names is read."""
    rows: list[list[float]] = []
    previous = 0.0
    for bound, cum in zip(delta.bounds, delta.cumulative, strict=True):
        upper = bound * scale if math.isinf(bound) else round(bound * scale, 6)
        rows.append([upper, float(round(max(0.0, cum - previous)))])
        previous = max(previous, cum)
    return rows


def _rank_bucket(delta: HistogramSeries, rank: float) -> int | None:
    for i, cum in enumerate(delta.cumulative):
        if cum >= rank - _EPS:
            return i
    return None


def _top_bucket(delta: HistogramSeries) -> int | None:
    """The highest bucket that holds an observation of the delta."""
    previous = 0.0
    top = None
    for i, cum in enumerate(delta.cumulative):
        if cum > previous + _EPS:
            top = i
        previous = max(previous, cum)
    return top


def _edges(delta: HistogramSeries, index: int) -> tuple[float, float]:
    hi = delta.bounds[index]
    lo = delta.bounds[index - 1] if index else min(0.0, hi)
    return lo, hi


def gauge_stats(
    samples: Sequence[tuple[int, float]], t0_ns: int
) -> tuple[dict[str, float], list[list[float]]]:
    """``{"max", "mean", "min"}`` of a gauge's samples ``(at_ns, value)`` and its series
    ``[[t_s, value], …]`` with ``t_s`` seconds since ``t0_ns``. Empty when no samples."""
    if not samples:
        return {}, []
    values = [v for _, v in samples]
    low, high = min(values), max(values)
    # Rounded for the report, then held inside [min, max]: the rounded mean of equal
    # samples fell below their minimum (0.003908 < 0.0039081…, seen on vLLM).
    mean = min(max(round(math.fsum(values) / len(values), 6), low), high)
    stats = {"max": high, "mean": mean, "min": low}
    series = [[round((at - t0_ns) / 1e9, 3), v] for at, v in samples]
    return stats, series
