"""Where a run's time went: the client's TTFT beside the server's own view of it.

Read from a run's report dict (the JSON report's ``runs[]`` entry, or one of its
``stages[]``), so every report (the failure table, the terminal summary, JUnit,
HTML) says the same thing from the same data:

- :func:`time_split`: the client's TTFT split into parts. Per request when the
  server returned its own timings (``run["ttft_split"]``: client queue, server
  queue, engine, and the network/other remainder of each request, summarised);
  else from the server's histograms (``run["server_metrics"]``: queue and
  prefill time over the run), the remainder being the client's TTFT less those
  at each statistic. Means add up (a mean of sums is the sum of means);
  percentiles of parts need not (each part has its own distribution), and a
  histogram's percentile is bucket-bounded, so a remainder may even come out
  negative: the reports say which source they used.
- :func:`server_figures`: a run's key server figures in a few words each
  (server TTFT p50/p99, queue p99, KV-cache max, preemptions, prefix-cache hit
  rate, speculative acceptance), and :func:`server_head` / :func:`cache_reset_word`.
- :func:`format_server_value`: one server metric's statistic in its unit
  (ms, a fraction as %, a count as an integer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.server_metrics.cache_reset import reset_said
from pytest_llmperf.specs.gpu_names import GPU_METRICS
from pytest_llmperf.specs.process_names import PROCESS_METRICS
from pytest_llmperf.specs.server_names import COMMON_METRICS
from pytest_llmperf.specs.slo import parse_slo

__all__ = [
    "SPLIT_METRICS",
    "SplitPart",
    "TimeSplit",
    "bounded_ms",
    "cache_reset_note",
    "cache_reset_word",
    "explains_time",
    "format_server_value",
    "metric_unit",
    "ms_figure",
    "scope_of",
    "server_figures",
    "server_head",
    "split_lines",
    "time_split",
]

SPLIT_METRICS = ("ttft", "ttfo", "e2e")  # client latencies whose failure the split explains
_SPLIT_STATS = ("mean", "p50", "p99")  # what the HTML shows; the terminal shows p50 and p99
# per-request split (run["ttft_split"]): key, label
_PER_REQUEST_PARTS = (
    ("client_queue", "client queue"),
    ("server_queue", "server queue"),
    ("engine", "engine"),
    ("remainder", "network/other"),
)
# from the server's histograms: metric, key, label
_HISTOGRAM_PARTS = (
    ("server.queue_time", "server_queue", "server queue"),
    ("server.prefill_time", "prefill", "prefill"),
)


@dataclass(frozen=True)
class SplitPart:
    """One part of the TTFT: its key (``server_queue``), label and value (ms) per statistic."""

    key: str
    label: str
    values: Mapping[str, float | None]


@dataclass(frozen=True)
class TimeSplit:
    """A run's (or stage's) TTFT and its parts, per statistic (``mean``, ``p50``, ``p99``)."""

    per_request: bool  # from the responses' own timings; else from the server's histograms
    count: int  # requests split (per request) or the server's TTFT-side observations
    ttft: Mapping[str, float | None]  # the client's TTFT (ms)
    parts: tuple[SplitPart, ...]
    server_ttft: Mapping[str, float | None]  # the server's own TTFT, when it has one
    notes: tuple[str, ...] = ()  # what the figures leave out (a server without queue times)

    @property
    def source(self) -> str:
        """``per request, n=1200`` (the server's own timings of each request) /
        ``server histograms, bucket-bounded, n=1200``."""
        if self.per_request:
            return f"per request, n={self.count}"
        return f"server histograms, bucket-bounded, n={self.count}"

    @property
    def stats(self) -> tuple[str, ...]:
        return _SPLIT_STATS


def time_split(run: Mapping[str, Any]) -> TimeSplit | None:
    """``run``'s TTFT split (a run's or a stage's report dict), None when the server said
    nothing that splits it (no per-request timings, no queue or prefill histogram)."""
    split = run.get("ttft_split")
    if isinstance(split, Mapping) and split.get("count"):
        parts = tuple(
            SplitPart(key, label, _stats(split.get(key)))
            for key, label in _PER_REQUEST_PARTS
            if isinstance(split.get(key), Mapping)
        )
        if parts:
            return TimeSplit(
                per_request=True,
                count=int(split["count"]),
                ttft=_stats(split.get("ttft")),
                parts=parts,
                server_ttft=_server_stats(run, "server.ttft"),
                notes=_per_request_notes(split),
            )
    metrics = (run.get("server_metrics") or {}).get("metrics") or {}
    found = [(m, k, label) for m, k, label in _HISTOGRAM_PARTS if isinstance(metrics.get(m), dict)]
    client = _stats((run.get("metrics") or {}).get("ttft"))
    if not found or all(v is None for v in client.values()):
        return None
    pieces = [SplitPart(key, label, _stats(metrics[m])) for m, key, label in found]
    remainder = {
        s: (
            None
            if client[s] is None or any(p.values[s] is None for p in pieces)
            else float(client[s] or 0.0) - sum(float(p.values[s] or 0.0) for p in pieces)
        )
        for s in _SPLIT_STATS
    }
    pieces.append(SplitPart("remainder", "client/network", remainder))
    return TimeSplit(
        per_request=False,
        count=int(metrics[found[0][0]].get("count") or 0),
        ttft=client,
        parts=tuple(pieces),
        server_ttft=_server_stats(run, "server.ttft"),
    )


def _per_request_notes(split: Mapping[str, Any]) -> tuple[str, ...]:
    """What a per-request split's figures leave out, in words."""
    count = int(split.get("count") or 0)
    notes = []
    queued = split.get("server_queue_reported")
    if not isinstance(split.get("server_queue"), Mapping):
        notes.append("the server reports no queue time: its queue wait is in network/other")
    elif queued is not None and int(queued) < count:
        notes.append(
            f"{count - int(queued)} of {count} requests without a server queue time: "
            "their queue wait is in network/other"
        )
    if negative := int(split.get("remainder_negative") or 0):
        notes.append(
            f"{negative} request(s) whose server-side parts overran the client's TTFT "
            "(the clocks disagree): their network/other counts as 0"
        )
    return tuple(notes)


def _stats(entry: Any) -> dict[str, float | None]:
    entry = entry if isinstance(entry, Mapping) else {}
    out: dict[str, float | None] = {}
    for s in _SPLIT_STATS:
        value = entry.get(s)
        out[s] = None if value is None else float(value)
    return out


def _server_stats(run: Mapping[str, Any], name: str) -> dict[str, float | None]:
    metrics = (run.get("server_metrics") or {}).get("metrics") or {}
    return _stats(metrics.get(name))


def ms_figure(value: float | None) -> str:
    """A compact millisecond figure (the unit is said once, at the end of the line)."""
    if value is None:
        return "-"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def split_lines(split: TimeSplit, stats: Sequence[str] = ("p50", "p99")) -> list[str]:
    """The split as a sum, names over figures (ms), one row per statistic::

          ttft = server queue + prefill + client/network
    p50   39.6 =         5.00 +    25.0 +           9.60
    p99  131.0 =         50.0 +    60.0 +           21.0
    """
    names = ["ttft", *(p.label for p in split.parts)]
    rows = [
        [ms_figure(split.ttft.get(s)), *(ms_figure(p.values.get(s)) for p in split.parts)]
        for s in stats
    ]
    widths = [max(len(c) for c in (name, *(r[i] for r in rows))) for i, name in enumerate(names)]
    left = max((len(s) for s in stats), default=0)

    def line(head: str, cells: Sequence[str]) -> str:
        first = cells[0].rjust(widths[0])
        rest = " + ".join(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))
        return f"{head.ljust(left)}  {first} = {rest}"

    return [line("", names), *(line(s, r) for s, r in zip(stats, rows, strict=True))]


def explains_time(expr: str) -> bool:
    """Whether a failing SLO ``expr`` is one the time split explains: a client latency
    (ttft, ttfo, e2e) or any of the server's own metrics."""
    try:
        slo = parse_slo(expr)
    except LlmPerfUsageError:  # a foreign report's or ruleset's: not ours to read
        return False
    return slo.metric in SPLIT_METRICS or slo.is_server


def scope_of(run: Mapping[str, Any], stage: Any) -> Mapping[str, Any]:
    """The report dict a verdict was judged on: the run's, or (``stage`` not None) the
    stage's own (its metrics and server metrics; the per-request split is the run's)."""
    if stage is None:
        return run
    for entry in run.get("stages") or ():
        if entry.get("index") == stage:
            return {"ttft_split": None, **entry}
    return run


def metric_unit(metric: str) -> str:
    """The unit a metric's values are in: ``ms`` for latencies (a client's or the
    server's), ``fraction`` or ``count`` for the server's others, ``s``, ``MB`` or ``ms``
    for the server process's (``startup.ready_s``, ``server.rss_max_mb``), ``W``, ``J``,
    ``MB``, ``fraction`` or ``C`` for the GPUs' (``gpu.power_w.mean``)."""
    if metric in PROCESS_METRICS:
        return PROCESS_METRICS[metric].unit
    if metric in GPU_METRICS:
        return GPU_METRICS[metric].unit
    return COMMON_METRICS[metric][1] if metric in COMMON_METRICS else "ms"


def format_server_value(metric: str, value: float | None) -> str:
    """``40.0 ms``, ``93.5%``, ``3``; ``-`` when absent (an unknown name: as it came)."""
    if value is None:
        return "-"
    unit = COMMON_METRICS[metric][1] if metric in COMMON_METRICS else ""
    if unit == "ms":
        return f"{value:.1f} ms" if value >= 10 else f"{value:.3f} ms"
    if unit == "fraction":
        return f"{value * 100:.1f}%"
    if float(value).is_integer():
        return f"{value:.0f}"
    return f"{value:.2f}" if unit == "count" else f"{value:.4g}"


def server_head(server: Mapping[str, Any], *, scrapes: bool = False) -> str:
    """``vllm at http://h:8000/metrics`` (``scrapes``: ``, 12 scrapes``), or ``none (why)``."""
    if not server.get("metrics") and not server.get("raw"):
        return f"none ({server.get('missing') or 'the server exported none of them'})"
    family = server.get("family") or "unknown"
    where = f"{family} at {server.get('source') or '?'}"
    n = int(server.get("scrapes") or 0)
    return where + (f", {n} scrapes" if scrapes and n else "")


def bounded_ms(entry: Mapping[str, Any], stat: str) -> str:
    """One statistic of a server latency histogram: ``≤ 40.0 ms (bucket 20.0–40.0)`` where
    it comes from Prometheus bucket deltas (``{stat}_lo`` beside it: the value is only
    known to lie in that bucket, and is reported at its upper bound), ``21.5 ms``
    where it is exact to the histogram's resolution (per-request timings); ``- ms``
    when absent (beyond the last finite bucket)."""
    value = entry.get(stat)
    if value is None:
        return "- ms"
    hi, lo = ms_figure(float(value)), entry.get(f"{stat}_lo")
    if lo is None:
        return f"{hi} ms"
    return f"≤ {hi} ms (bucket {ms_figure(float(lo))}–{hi})"


def server_figures(server: Mapping[str, Any]) -> list[str]:
    """The key figures, a few words each: ``ttft p50 ≤ 40.0 ms (bucket 20.0–40.0), p99
    ≤ 160.0 ms (bucket 80.0–160.0)`` (percentiles of Prometheus histograms are bucket
    bounds, :func:`bounded_ms`), ``queue p99 ≤ 50.0 ms (…)``, ``KV max 93.5%``,
    ``preemptions 3``, ``prefix hits 41.0%``, …; then a partial view's missing reason,
    and an unknown family's raw metric count."""
    metrics = server.get("metrics") or {}
    out: list[str] = []

    def stat(name: str, s: str) -> float | None:
        entry = metrics.get(name)
        value = entry.get(s) if isinstance(entry, Mapping) else None
        return None if value is None else float(value)

    # A histogram that observed nothing in the run (an embeddings run's TTFT) says nothing.
    if stat("server.ttft", "count"):
        ttft = metrics["server.ttft"]
        # two parts: a line breaks between them, never inside a bucket
        out += [f"ttft p50 {bounded_ms(ttft, 'p50')}", f"p99 {bounded_ms(ttft, 'p99')}"]
    if stat("server.queue_time", "count"):
        out.append(f"queue p99 {bounded_ms(metrics['server.queue_time'], 'p99')}")
    if metrics.get("server.kv_cache_usage"):
        kv = stat("server.kv_cache_usage", "max")
        out.append(f"KV max {format_server_value('server.kv_cache_usage', kv)}")
    for name, word in (
        ("server.preemptions", "preemptions"),
        ("server.prefix_cache_hit_rate", "prefix hits"),
        ("server.spec_decode_acceptance", "spec accepted"),
    ):
        if metrics.get(name):
            out.append(f"{word} {format_server_value(name, stat(name, 'value'))}")
    if metrics and server.get("missing"):
        out.append(f"partial: {server['missing']}")
    raw = server.get("raw") or {}
    if raw:
        out.append(f"{len(raw)} raw metric(s) under the server's own names")
    return out


def cache_reset_note(reset: Mapping[str, Any] | None) -> str:
    """What the terminal and Markdown say of a run's cache reset: the reset done, or one
    not done with what to do about it, where that matters (``reset_said``: the server has
    a prefix cache, or the user set ``--llm-reset-cache``); ``""`` otherwise (a server
    with nothing to reset: the JSON, JUnit and HTML still record it)."""
    if not reset or not reset_said(reset):
        return ""
    word = cache_reset_word(reset)
    if reset.get("done"):
        return word
    if reset.get("prefix_cache") is False:
        return f"{word} (the server's prefix caching is off: nothing to reset)"
    return (
        f"{word}; so this run may reuse prefixes cached before it "
        "(--llm-reset-cache=off to accept a warm cache)"
    )


def cache_reset_word(reset: Mapping[str, Any] | None) -> str:
    """``cache reset (POST /reset_prefix_cache)`` / ``cache not reset: why`` (the prefix cache);
    ``""`` when ``--llm-reset-cache`` did not act on the run."""
    if not reset:
        return ""
    if reset.get("done"):
        how = reset.get("how")
        return "cache reset" + (f" ({how})" if how else "")
    why = reset.get("why") or reset.get("how") or "the server offers no reset"
    return f"cache not reset: {why}"
