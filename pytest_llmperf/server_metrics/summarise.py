"""A window of scrapes, turned into one :class:`ServerMetrics` under the common names.

The window is given by its two boundary scrapes (the one before it starts and
the one after it ends: counters and histograms are their differences) and
the samples taken inside it (gauges are their min/mean/max and series). The
family's row of :data:`~pytest_llmperf.server_metrics.families.MAPPINGS` says
which metric each common name comes from; a family the table does not know
keeps its own metric names in ``raw`` (counter deltas, last gauge values).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_llmperf.server_metrics.deltas import (
    bucket_rows,
    counter_delta,
    gauge_stats,
    histogram_delta,
    histogram_sum_delta,
    latency_stats,
    not_one_process,
)
from pytest_llmperf.server_metrics.exposition import Scrape
from pytest_llmperf.server_metrics.families import (
    MAPPINGS,
    Counter,
    Gauge,
    GaugeMean,
    Histogram,
    HistogramSum,
    Source,
)
from pytest_llmperf.server_metrics.summary import ServerFamily, ServerMetrics

__all__ = ["NOT_ONE_PROCESS_HINT", "RAW_LIMIT", "summarise_window"]

NOT_ONE_PROCESS_HINT = "point --llm-server-metrics=URL at one worker or at the router's own port"
RAW_LIMIT = 500  # raw metrics kept for an unknown family (a page may have thousands)
_RAW_SKIP = ("python_", "process_")  # the client library's own, not the server's


def summarise_window(
    source: str,
    family: ServerFamily,
    start: Scrape | None,
    end: Scrape | None,
    inside: Sequence[Scrape],
    t0_ns: int,
    *,
    missing: str | None = None,
    notes: Sequence[str] = (),
) -> ServerMetrics:
    """The server's metrics over a window.

    ``start``/``end``: the scrapes bounding it (None when there was none:
    then counters and latencies are absent and ``missing`` must say why);
    ``inside``: the samples taken during it, in time order (gauges); ``t0_ns``:
    the origin of the gauge series. No numbers at all when the scrapes are not
    one process's (``missing`` says why).
    """
    out = ServerMetrics(source=source, family=family, missing=missing)
    out.notes.extend(notes)
    chain = [s for s in (start, *inside, end) if s is not None]
    out.scrapes = len(chain)
    why = not_one_process(chain)
    if why is not None:
        out.missing = f"the server's metrics are not one process's ({why}); {NOT_ONE_PROCESS_HINT}"
        out.scrapes = 0
        return out
    mapping = MAPPINGS.get(family)
    if mapping is None:
        _raw(out, start, end, inside)
        return out
    for name, sources in mapping.items():
        for src in sources:
            if _fill(out, name, src, start, end, inside, t0_ns):
                break
    return out


def _fill(
    out: ServerMetrics,
    name: str,
    src: Source,
    start: Scrape | None,
    end: Scrape | None,
    inside: Sequence[Scrape],
    t0_ns: int,
) -> bool:
    """Put ``name`` from ``src`` into ``out``; False when the pages lack its metric."""
    if isinstance(src, Gauge):
        samples = [
            (s.at_ns, v) for s in inside if (v := s.gauge(src.metric, src.combine)) is not None
        ]
        if not samples:
            return False
        out.metrics[name], out.series[name] = gauge_stats(samples, t0_ns)
        return True
    if isinstance(src, GaugeMean):
        values = [v for s in inside if (v := s.gauge(src.metric, combine="mean")) is not None]
        if not values:
            return False
        out.metrics[name] = {"value": round(sum(values) / len(values), 6)}
        return True
    if start is None or end is None:
        return False
    if isinstance(src, Histogram):
        delta = histogram_delta(start, end, src.metric)
        if delta is None:
            return False
        stats, note = latency_stats(delta, src.scale)
        out.metrics[name] = stats
        out.buckets[name] = bucket_rows(delta, src.scale)
        out.parts[name] = (delta.sum * src.scale, delta.count)
        if note:
            out.notes.append(f"{name}: {note}")
        return True
    if isinstance(src, Counter):
        value = counter_delta(start, end, src.metrics, src.without)
        if value is None:
            return False
        out.metrics[name] = {"value": value}
        return True
    if isinstance(src, HistogramSum):
        value = histogram_sum_delta(start, end, src.metric)
        if value is None:
            return False
        out.metrics[name] = {"value": round(value, 6)}
        return True
    num = counter_delta(start, end, src.numerator)
    den = counter_delta(start, end, src.denominator)
    if num is None or den is None:
        return False
    out.parts[name] = (num, den)
    if den <= 0:  # the server has it, the window just gave nothing to divide
        if any(end.counter(n) for n in src.denominator):  # (never any: the feature is off)
            what = " + ".join(src.denominator)
            out.notes.append(f"{name}: no {src.counts} during the window ({what})")
        return True
    out.metrics[name] = {"value": round(num / den, 6)}
    return True


def _raw(
    out: ServerMetrics, start: Scrape | None, end: Scrape | None, inside: Sequence[Scrape]
) -> None:
    """An unknown family's own metrics: counter (and histogram count/sum) deltas, and each
    gauge's last value inside the window (else at the window's end)."""
    raw: dict[str, float] = {}
    if start is not None and end is not None:
        for name in end.counters:
            if not name.startswith(_RAW_SKIP):
                value = counter_delta(start, end, (name,))
                if value is not None:
                    raw[name] = value
        for name in end.histograms:
            delta = histogram_delta(start, end, name)
            if delta is not None:
                raw[name + "_count"] = delta.count
                raw[name + "_sum"] = round(delta.sum, 9)
    last = inside[-1] if inside else end
    if last is not None:
        for name in last.gauges:
            if not name.startswith(_RAW_SKIP):
                value = last.gauge(name)
                if value is not None:
                    raw[name] = value
    if len(raw) > RAW_LIMIT:
        out.notes.append(f"raw: the first {RAW_LIMIT} of {len(raw)} metrics kept (by name)")
        raw = dict(sorted(raw.items())[:RAW_LIMIT])
    out.raw = raw
