"""One read of a server's ``/metrics`` page, parsed into what the run's deltas need.

The page is Prometheus' text exposition format, parsed by ``prometheus_client``'s
own parser (:func:`prometheus_client.parser.text_string_to_metric_families`):
servers write that format in subtly different ways (vLLM through
``prometheus_client`` itself, llama.cpp and TGI by hand or through Rust's
``metrics`` exporter), and a maintained parser reads them all as Prometheus does.
Nothing here parses a sample line itself.

A :class:`Scrape` keeps each metric per label set (a counter that goes
backwards in one label set is how two processes behind one URL show) and offers
sums over label sets, which is what a run's numbers are: vLLM's ``engine`` and
``model_name`` labels split one server's counts, they do not name different
things. It also keeps the process's identity where the page says it:
``process_start_time_seconds`` and the values of labels that name a process
(``instance``, ``pid``, ``engine``, ...).

A body that is not Prometheus text (an HTML error page, JSON, an empty body,
binary) is a :class:`ScrapeFailure` with a reason a person can act on, never an
exception: a scrape never fails or slows the run.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "IDENTITY_LABELS",
    "PROCESS_START",
    "HistogramSeries",
    "LabelSet",
    "Scrape",
    "ScrapeFailure",
    "flatten",
    "parse_scrape",
]

LabelSet = tuple[tuple[str, str], ...]  # a series' labels, sorted by name ("le" excluded)

PROCESS_START = "process_start_time_seconds"
# Labels whose values name a process: two scrapes that disagree on one of them (each
# having it) are not the same process's. model_name is not one (two workers serve the
# same model, and SGLang's tokenizer metrics only get it with the first request).
IDENTITY_LABELS = ("instance", "pid", "engine", "hostname", "pod")
_REASON_LIMIT = 160  # characters of a parser's message kept in a reason


@dataclass(frozen=True, slots=True)
class HistogramSeries:
    """One Prometheus histogram: cumulative counts per upper bound, its sum and count.

    ``bounds`` ascend and end with ``inf`` (the ``+Inf`` bucket, which always
    holds ``count``); ``cumulative[i]`` is the number of observations ``<=
    bounds[i]``. Units are the server's (seconds for latencies).
    """

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    sum: float
    count: float

    @classmethod
    def combined(cls, parts: Iterable[HistogramSeries]) -> HistogramSeries | None:
        """The histogram of all observations of ``parts`` (label sets of one metric).

        Counts add at each bound; where the label sets' bounds differ (they do
        not on any server we know), only the bounds all of them have are kept,
        so every cumulative count stays exact.
        """
        items = list(parts)
        if not items:
            return None
        if len(items) == 1:
            return items[0]
        shared = set(items[0].bounds)
        for h in items[1:]:
            shared &= set(h.bounds)
        bounds = tuple(sorted(shared))
        cumulative = tuple(sum(h.cumulative[h.bounds.index(b)] for h in items) for b in bounds)
        return cls(bounds, cumulative, sum(h.sum for h in items), sum(h.count for h in items))


@dataclass(frozen=True, slots=True)
class ScrapeFailure:
    """A scrape that gave no numbers: ``reason`` says why, for the report."""

    reason: str


@dataclass(frozen=True)
class Scrape:
    """One ``/metrics`` page, read at ``at_ns`` (``time.monotonic_ns()`` once the body was in).

    ``counters`` by sample name as the parser names it (always ending in
    ``_total``: the parser adds it to a counter that lacks it, as TGI's and
    llama.cpp's ``n_tokens_max`` do), ``gauges`` by name, ``histograms`` by
    family name (``vllm:time_to_first_token_seconds``); each maps a label set
    to its value. A summary's ``_sum`` and ``_count`` are counters.
    ``process_start`` holds the ``process_start_time_seconds`` values the page
    exports (empty: none), ``identity`` the ``(label, value)`` pairs of
    :data:`IDENTITY_LABELS` on the series kept. ``dropped_lines`` counts lines
    the parser could not read on an otherwise good page.
    """

    at_ns: int
    counters: Mapping[str, Mapping[LabelSet, float]] = field(default_factory=dict)
    gauges: Mapping[str, Mapping[LabelSet, float]] = field(default_factory=dict)
    histograms: Mapping[str, Mapping[LabelSet, HistogramSeries]] = field(default_factory=dict)
    process_start: tuple[float, ...] = ()
    identity: frozenset[tuple[str, str]] = frozenset()
    dropped_lines: int = 0

    @property
    def names(self) -> set[str]:
        """Every metric name on the page (counter sample names, gauges, histogram families)."""
        return {*self.counters, *self.gauges, *self.histograms}

    def counter(self, name: str, *, without: Collection[tuple[str, str]] = ()) -> float | None:
        """``name`` summed over its label sets (``name`` with or without ``_total``), None
        when the page lacks it; label sets holding any ``(label, value)`` of ``without`` are
        left out (vLLM's aborted requests in ``vllm:request_success_total``)."""
        series = self.counter_series(name)
        if series is None:
            return None
        return sum(v for labels, v in series.items() if not _excluded(labels, without))

    def counter_series(self, name: str) -> Mapping[LabelSet, float] | None:
        """``name``'s value per label set (``name`` with or without ``_total``)."""
        found = self.counters.get(name)
        if found is None and not name.endswith("_total"):
            found = self.counters.get(name + "_total")
        return found

    def gauge(self, name: str, combine: str = "sum") -> float | None:
        """``name`` over its label sets: ``"sum"`` (requests running on every engine) or
        ``"mean"`` (a usage fraction per engine); None when the page lacks it."""
        series = self.gauges.get(name)
        if not series:
            return None
        values = list(series.values())
        return sum(values) / len(values) if combine == "mean" else sum(values)

    def histogram(self, name: str) -> HistogramSeries | None:
        """``name``'s observations over all its label sets, None when the page lacks it."""
        series = self.histograms.get(name)
        return HistogramSeries.combined(series.values()) if series else None

    def only(self, names: Collection[str]) -> Scrape:
        """This scrape with just the metrics ``names`` (a known family's mapping keeps a few
        dozen series of a page of thousands); the identity is that of the series kept,
        as when the page is parsed with ``keep``, so such scrapes compare alike."""
        keep = set(names) | {n + "_total" for n in names}
        counters = {k: v for k, v in self.counters.items() if k in keep}
        gauges = {k: v for k, v in self.gauges.items() if k in keep}
        histograms = {k: v for k, v in self.histograms.items() if k in keep}
        return Scrape(
            at_ns=self.at_ns,
            counters=counters,
            gauges=gauges,
            histograms=histograms,
            process_start=self.process_start,
            identity=_identity(counters, gauges, histograms),
            dropped_lines=self.dropped_lines,
        )


def _identity(*kinds: Mapping[str, Mapping[LabelSet, object]]) -> frozenset[tuple[str, str]]:
    """The ``(label, value)`` pairs of :data:`IDENTITY_LABELS` on any series of ``kinds``."""
    return frozenset(
        pair
        for kind in kinds
        for series in kind.values()
        for labels in series
        for pair in labels
        if pair[0] in IDENTITY_LABELS
    )


def _excluded(labels: LabelSet, without: Collection[tuple[str, str]]) -> bool:
    return any(pair in without for pair in labels)


def parse_scrape(
    body: bytes | str, at_ns: int, *, keep: Collection[str] | None = None
) -> Scrape | ScrapeFailure:
    """``body`` (a ``/metrics`` response) as a :class:`Scrape`, or why it is not one.

    Never raises: a body that is not Prometheus text is a :class:`ScrapeFailure`
    saying what it looks like (``not Prometheus text (an HTML page)``). A page
    the parser rejects as a whole is read family by family, then line by line,
    keeping what parses; it is a scrape only if it has samples and fewer
    unreadable lines than samples.

    ``keep`` (metric names, as a family's mapping names them): only those
    metrics (and ``process_start_time_seconds``) are handed to the parser, the
    other lines dropped by their leading name alone. A vLLM page is mostly
    metrics no mapping reads; the sampler parses it every second, in the
    process that also sends the load.
    """
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
    except UnicodeDecodeError:
        return ScrapeFailure("not Prometheus text (not UTF-8 text)")
    try:
        if keep is not None:
            kept = _select(text, keep)
            if kept is not None:
                text = kept
        return _parse(text, at_ns)
    except Exception as exc:  # a parser bug must not reach the run: say what happened
        return ScrapeFailure(f"not Prometheus text (the parser failed: {_short(repr(exc))})")


def _parse(text: str, at_ns: int) -> Scrape | ScrapeFailure:
    head = text.lstrip()[:1]
    if not head:
        return ScrapeFailure("not Prometheus text (an empty body)")
    if head == "<":
        return ScrapeFailure("not Prometheus text (an HTML or XML page)")
    if head in "{[" and _is_json(text):  # (a UTF-8 quoted metric name also starts with "{")
        return ScrapeFailure("not Prometheus text (JSON)")
    if "\x00" in text:
        return ScrapeFailure("not Prometheus text (binary data)")
    builder = _Builder(at_ns)
    try:
        builder.add_all(text_string_to_metric_families(text))
    except ValueError as exc:
        builder = _Builder(at_ns)
        why = _short(str(exc))
        _lenient(text, builder)
        if builder.samples == 0 or builder.dropped >= builder.samples:
            return ScrapeFailure(f"not Prometheus text ({why})")
    if builder.samples == 0:
        return ScrapeFailure("not Prometheus text (no samples)")
    return builder.build()


_HOLD_NS = 1_000_000  # the longest the parse holds the GIL at once

_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info")


def _select(text: str, keep: Collection[str]) -> str | None:
    """The lines of ``text`` about metrics in ``keep`` (by each line's leading name, its
    sample suffix removed), comments about them included; None when nothing would be
    left (the page is then parsed whole, and says what it is)."""
    names = {*keep, PROCESS_START}
    names |= {n.removesuffix("_total") for n in keep}
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE") and not _wanted(parts[2], names):
                continue
        elif line and not line.startswith("{"):
            end = len(line)
            for stop in ("{", " ", "\t"):
                at = line.find(stop)
                if 0 <= at < end:
                    end = at
            if not _wanted(line[:end], names):
                continue
        out.append(line)
    return "\n".join(out) + "\n" if any(not x.startswith("#") for x in out if x) else None


def _wanted(name: str, names: set[str]) -> bool:
    return name in names or any(
        name.endswith(suffix) and name[: -len(suffix)] in names for suffix in _SUFFIXES
    )


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _lenient(text: str, builder: _Builder) -> None:
    """Parse ``text`` a family block at a time, and a failing block a line at a time (each
    line under its block's ``# TYPE`` line), keeping every sample that parses."""
    for header, lines in _blocks(text):
        try:
            builder.add_all(text_string_to_metric_families("\n".join(header + lines) + "\n"))
            continue
        except ValueError:
            pass
        for line in lines:
            try:
                families = list(text_string_to_metric_families("\n".join([*header, line]) + "\n"))
            except ValueError:
                builder.dropped += 1
                continue
            builder.add_all(families)


def _blocks(text: str) -> Iterator[tuple[list[str], list[str]]]:
    """``(comment lines, sample lines)`` per family: a block starts at each ``# HELP`` or
    ``# TYPE`` line that follows a sample line."""
    header: list[str] = []
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if lines:
                yield header, lines
                header, lines = [], []
            if line.startswith(("# HELP", "# TYPE")):
                header.append(line)
            continue
        lines.append(line)
    if header or lines:
        yield header, lines


class _Builder:
    """Collects parsed families into a :class:`Scrape`."""

    def __init__(self, at_ns: int) -> None:
        self.at_ns = at_ns
        self.counters: dict[str, dict[LabelSet, float]] = {}
        self.gauges: dict[str, dict[LabelSet, float]] = {}
        # family -> label set -> (bucket bounds and counts, sum, count)
        self.hist: dict[str, dict[LabelSet, _Hist]] = {}
        self.process_start: list[float] = []
        self.samples = 0
        self.dropped = 0

    def add_all(self, families: Iterable[object]) -> None:
        # The parser reads the page lazily, a family at a time. Every millisecond of it,
        # the GIL goes to the run's event loop (sleep(0) releases it; ~70 µs, so not after
        # every family): a vLLM page's 3-5 ms parse never stalls the loop at once.
        since = time.perf_counter_ns()
        for family in families:
            self.add(family)
            if time.perf_counter_ns() - since > _HOLD_NS:
                time.sleep(0)
                since = time.perf_counter_ns()

    def add(self, family: object) -> None:
        kind = getattr(family, "type", "unknown")
        name: str = getattr(family, "name", "")
        for sample in getattr(family, "samples", ()):
            s_name: str = sample.name
            labels: dict[str, str] = dict(sample.labels)
            value = float(sample.value)
            self.samples += 1
            if s_name.endswith("_created") or math.isnan(value):
                continue  # a series' creation time (not a measurement), or no value
            if kind == "histogram" and s_name[len(name) :] in ("_bucket", "_sum", "_count"):
                self._histogram(name, s_name[len(name) :], labels, value)
            elif s_name == PROCESS_START:
                self.process_start.append(value)
            elif (
                kind == "counter" or s_name.endswith("_total") or _summary_total(kind, name, s_name)
            ):
                _put(self.counters, s_name, labels, value)
            elif kind in ("summary", "gaugehistogram"):
                continue  # quantiles over the server's own window, gauge histograms: not ours
            else:
                _put(self.gauges, s_name, labels, value)

    def _histogram(self, name: str, suffix: str, labels: dict[str, str], value: float) -> None:
        le = labels.pop("le", None)
        key = _key(labels)
        hist = self.hist.setdefault(name, {}).setdefault(key, _Hist())
        if suffix == "_bucket":
            if le is not None:
                hist.buckets[_bound(le)] = value
        elif suffix == "_sum":
            hist.total = value
        else:
            hist.count = value

    def build(self) -> Scrape:
        histograms: dict[str, dict[LabelSet, HistogramSeries]] = {}
        for name, per_labels in self.hist.items():
            for key, h in per_labels.items():
                series = h.series()
                if series is not None:
                    histograms.setdefault(name, {})[key] = series
        return Scrape(
            at_ns=self.at_ns,
            counters=self.counters,
            gauges=self.gauges,
            histograms=histograms,
            process_start=tuple(sorted(self.process_start)),
            identity=_identity(self.counters, self.gauges, histograms),
            dropped_lines=self.dropped,
        )


@dataclass
class _Hist:
    buckets: dict[float, float] = field(default_factory=dict)
    total: float = 0.0
    count: float | None = None

    def series(self) -> HistogramSeries | None:
        if not self.buckets and self.count is None:
            return None
        count = self.count if self.count is not None else self.buckets.get(math.inf, 0.0)
        buckets = dict(self.buckets)
        buckets.setdefault(math.inf, count)
        bounds = tuple(sorted(buckets))
        return HistogramSeries(bounds, tuple(buckets[b] for b in bounds), self.total, count)


def _bound(le: str) -> float:
    try:
        return float(le)  # "+Inf" parses as inf
    except ValueError:
        return math.inf


def _key(labels: Mapping[str, str]) -> LabelSet:
    return tuple(sorted(labels.items()))


def _summary_total(kind: str, name: str, sample: str) -> bool:
    """A summary's ``_sum`` or ``_count``: counters (its quantiles are not)."""
    return kind == "summary" and sample[len(name) :] in ("_sum", "_count")


def _put(
    into: dict[str, dict[LabelSet, float]], name: str, labels: dict[str, str], value: float
) -> None:
    into.setdefault(name, {})[_key(labels)] = value


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 1] + "…"


def flatten(scrape: Scrape) -> dict[str, float]:
    """Every sample name's value summed over its label sets (a histogram as its ``_sum``
    and ``_count``; ``process_start_time_seconds`` as itself): the flat view that
    :mod:`pytest_llmperf.analysis.server_metrics` has always offered."""
    out: dict[str, float] = {}
    for kind in (scrape.counters, scrape.gauges):
        for name, series in kind.items():
            out[name] = out.get(name, 0.0) + sum(series.values())
    for name, per_labels in scrape.histograms.items():
        out[name + "_sum"] = sum(h.sum for h in per_labels.values())
        out[name + "_count"] = sum(h.count for h in per_labels.values())
    if scrape.process_start:
        out[PROCESS_START] = scrape.process_start[0]
    return out
