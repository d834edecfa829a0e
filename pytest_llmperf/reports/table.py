"""Plain-text tables of SLO verdicts, for failure messages and the terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.reports.gpu_words import format_gpu_value
from pytest_llmperf.reports.time_split import (
    explains_time,
    metric_unit,
    scope_of,
    server_figures,
    split_lines,
    time_split,
)
from pytest_llmperf.slo.paired import PairedCheck
from pytest_llmperf.slo.regression import RegressionCheck, RegressionVerdict
from pytest_llmperf.slo.verdicts import SloVerdict, Verdict

__all__ = [
    "MARKS",
    "ab_table",
    "error_sample_lines",
    "format_change",
    "format_value",
    "regression_table",
    "stage_level",
    "stage_mark",
    "stage_where",
    "time_split_block",
    "verdict_model",
    "verdict_table",
    "verdict_where",
    "where_the_time_went",
]

MARKS: dict[str, str] = {  # by verdict, SLO or baseline (the two share "inconclusive")
    Verdict.PASS: "✓",
    Verdict.FAIL: "✗",
    Verdict.INCONCLUSIVE: "?",
    RegressionVerdict.REGRESSED: "✗",
    RegressionVerdict.IMPROVED: "↑",
    RegressionVerdict.UNCHANGED: "=",
}


_GPU_UNITS = ("W", "J", "MB", "C")


def format_value(value: float | None, unit: str) -> str:
    """``12.3 ms``, ``0.50%``, ``41.2 req/s``, ``1.50x`` (a ratio), ``3`` (a count:
    ``server.preemptions``; a gauge's mean keeps two decimals); ``-`` when nothing was
    measured."""
    if value is None:
        return "-"
    if unit == "fraction":
        return f"{value * 100:.2f}%"
    if unit == "count":
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"
    if unit == "ms":
        return f"{value:.1f} ms" if value >= 10 else f"{value:.3f} ms"
    if unit == "ratio":  # fleet.imbalance: max over mean, said as the grammar takes it
        return f"{value:.2f}x"
    if unit in _GPU_UNITS:  # 500 W, 0.25 J, 41000 MB, 65 °C: as the GPU tables say them
        return format_gpu_value(value, unit)
    return f"{value:.2f} {unit}"


def format_interval(v: Mapping[str, Any] | Any) -> str:
    """A percentile verdict's confidence interval: ``[20.5 ms, 23.0 ms] at 99%`` (an
    unbounded side ``∞``); ``""`` for a statistic judged as observed. ``v`` is a verdict
    or its dict."""
    get = v.get if isinstance(v, Mapping) else lambda k: getattr(v, k, None)
    interval, confidence = get("interval"), get("confidence")
    if not interval:
        return ""
    unit = str(get("unit") or "ms")
    lo, hi = interval
    upper = "∞" if hi is None else format_value(hi, unit)
    return f"[{format_value(lo, unit)}, {upper}] at {float(confidence or 0) * 100:g}%"


def format_change(change: float | None) -> str:
    """``+12.3%``; ``-`` when there is no comparison."""
    return "-" if change is None else f"{change * 100:+.1f}%"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _comparison_table(
    checks: Sequence[RegressionCheck | PairedCheck],
    sides: tuple[str, str],
    values: Sequence[tuple[float | None, float | None]],
    extra: tuple[str, Sequence[str]] | None = None,
) -> str:
    """Statistic, run, the two ``sides``' ``values``, change, allowed, p, ``extra``'s
    column, verdict (a row per check); then the tests used and each check's reason. A
    check of metric ``*`` is a note on its whole run (say, no baseline for it), not a row."""
    head = ("statistic", "run", *sides, "change", "allowed", "p")
    rows = [(*head, *((extra[0],) if extra else ()), "verdict")]
    notes: list[str] = []
    for i, c in enumerate(checks):
        if c.metric == "*":
            notes.append(f"  [{c.run}]: {c.verdict}: {c.reason}")
            continue
        first, second = values[i]
        unit = metric_unit(c.metric)  # a server metric's own unit (%, a count), else ms
        rows.append(
            (
                c.name,
                c.run,
                format_value(first, unit),
                format_value(second, unit),
                format_change(c.change),
                f"+{c.threshold * 100:g}%",
                "-" if c.p_value is None else f"{c.p_value:.3g}",
                *((extra[1][i],) if extra else ()),
                f"{MARKS.get(c.verdict, '')} {c.verdict.upper()}",
            )
        )
        if c.reason:
            notes.append(f"  {c.name} [{c.run}]: {c.reason}")
    lines = _table(rows) if len(rows) > 1 else []
    tests = sorted({c.test for c in checks if c.test})
    if tests:
        lines += ["", f"  test: {'; '.join(tests)}"]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


def regression_table(checks: Sequence[RegressionCheck]) -> str:
    """Baseline comparisons: statistic, run, baseline, current, change, threshold, p, verdict."""
    return _comparison_table(
        checks, ("baseline", "current"), [(c.baseline, c.current) for c in checks]
    )


def ab_table(checks: Sequence[PairedCheck]) -> str:
    """A/B comparisons: statistic, run, candidate, reference, change, allowed
    (``--llm-ab-threshold``), p, block pairs in which the candidate was slower (and
    their t-test's p), verdict (``--llm-reference-endpoint``)."""
    return _comparison_table(
        checks,
        ("candidate", "reference"),
        [(c.candidate, c.reference) for c in checks],
        ("blocks slower", [_blocks_slower(c) for c in checks]),
    )


def _blocks_slower(c: PairedCheck) -> str:
    pairs = f"{c.slower_blocks}/{len(c.block_log_ratios)}"
    return pairs if c.p_blocks is None else f"{pairs} (p {c.p_blocks:.2g})"


def stage_where(v: Mapping[str, Any]) -> str:
    """``stage 1: 40 req/s`` for a verdict dict judged on one stage, ``""`` otherwise."""
    if v.get("stage") is None:
        return ""
    load = v.get("stage_load") or ""
    return f"stage {v['stage']}" + (f": {load}" if load else "")


def verdict_model(v: Mapping[str, Any]) -> str:
    """The served model (an adapter, or the base model by name) a verdict dict was judged
    on alone (``llm_slo(..., per_model=True)``); ``""`` for a whole run's."""
    return str(v.get("model") or "")


def verdict_where(v: Mapping[str, Any]) -> str:
    """Where in its run a verdict dict was judged: ``stage 1: 40 req/s``, ``model
    sim-lora-1`` (both, comma-separated, for one model within one stage), ``replica 0``
    (a ``replica.*`` SLO judged on one replica's requests); ``""`` for a whole run's."""
    model = verdict_model(v)
    replica = str(v.get("replica") or "")  # replica.<metric>: judged on each replica alone
    parts = [
        stage_where(v),
        f"model {model}" if model else "",
        f"replica {replica}" if replica else "",
    ]
    return ", ".join(p for p in parts if p)


def stage_level(stage: Mapping[str, Any]) -> str:
    """A ``run["stages"]`` entry's planned load: ``40 req/s``, ``10→20 req/s``,
    ``concurrency 4``."""
    if stage.get("concurrency") is not None:
        return f"concurrency {stage['concurrency']}"
    if stage.get("rate_from") is not None and stage.get("rate_to") is not None:
        return f"{stage['rate_from']:.4g}→{stage['rate_to']:.4g} req/s"
    return f"{stage.get('planned_rate') or 0.0:.4g} req/s"


def stage_mark(verdicts: Sequence[Mapping[str, Any]]) -> str:
    """One stage's verdicts in a word: the worst of them (``fail``, ``inconclusive``, ``pass``);
    ``""`` when the stage was not judged."""
    names = {str(v["verdict"]) for v in verdicts}
    for worst in (Verdict.FAIL, Verdict.INCONCLUSIVE, Verdict.PASS):
        if worst.value in names:
            return worst.value
    return ""


def verdict_table(verdicts: Sequence[SloVerdict], runs: Sequence[Mapping[str, Any]] = ()) -> str:
    """A fixed-width table: SLO, run, observed, target, verdict, reason.

    Verdicts judged on one stage of a staged run add a ``stage`` column
    (``1: 40 req/s``) after the run; a table without them has none. Verdicts judged on
    one served model (``llm_slo(..., per_model=True)``) add a ``model`` column alike.

    ``runs`` (the runs' report dicts, ``RunResult.to_dict()``): a failing latency SLO
    (ttft, ttfo, e2e, ``server.*``) adds, once per run (or stage), where its time went
    (:func:`where_the_time_went`).
    """
    dicts = [v.to_dict() for v in verdicts]
    staged = any(v.stage is not None for v in verdicts)
    modelled = any(verdict_model(d) for d in dicts)
    head = ("SLO", "run", *(("stage",) if staged else ()), *(("model",) if modelled else ()))
    bounded = any(v.interval for v in verdicts)
    interval_head = ("interval",) if bounded else ()
    rows: list[tuple[str, ...]] = [(*head, "observed", *interval_head, "target", "verdict")]
    notes: list[str] = []
    for v, d in zip(verdicts, dicts, strict=True):
        op = v.expr.split()[1] if len(v.expr.split()) > 2 else ""
        stage = (stage_where(d).removeprefix("stage "),) if staged else ()
        model = (verdict_model(d),) if modelled else ()
        rows.append(
            (
                v.expr,
                v.run,
                *stage,
                *model,
                format_value(v.observed, v.unit),
                *((format_interval(v) or "-",) if bounded else ()),
                f"{op} {format_value(v.target, v.unit)}".strip(),
                f"{MARKS.get(v.verdict, '')} {v.verdict.upper()}",
            )
        )
        if v.reason:
            where = f" [{place}]" if (place := verdict_where(d)) else ""
            notes.append(f"  {v.expr} [{v.run}]{where}: {v.reason}")
    lines = _table(rows)
    if notes:
        lines += ["", *notes]
    split = where_the_time_went(dicts, runs)
    if split:
        lines += ["", "Where the time went:", *split]
    return "\n".join(lines)


def where_the_time_went(
    verdicts: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]]
) -> list[str]:
    """For each run (or stage) with a failing latency SLO (verdict dicts), once: the
    client's TTFT p50 and p99 against the server's queue and prefill (or, with the
    server's per-request timings, client queue, server queue and engine) and the
    remainder, and the run's key server figures; or why the server said nothing.

    Each as :func:`time_split_block` writes it, indented two.
    """
    by_label = {str(r.get("label") or ""): r for r in runs}
    seen: set[tuple[str, Any]] = set()
    lines: list[str] = []
    for v in verdicts:
        key = (str(v.get("run") or ""), v.get("stage"))
        if v.get("verdict") != Verdict.FAIL or key in seen or key[0] not in by_label:
            continue
        if not explains_time(str(v.get("expr") or "")) or verdict_model(v):
            continue  # a model's share of a run has no time split of its own
        seen.add(key)
        where = f"[{key[0]}]" + (f" [{stage_where(v)}]" if key[1] is not None else "")
        block = time_split_block(where, scope_of(by_label[key[0]], key[1]))
        lines += ["  " + line for line in block]
    return lines


def time_split_block(where: str, run: Mapping[str, Any], *, figures: bool = True) -> list[str]:
    """``where`` (``[run0]``) and ``run``'s TTFT split in ms, p50 and p99 (names over
    figures), then (``figures``) its key server figures; or why there is none. Nothing
    when the server's metrics were off::

        [run0] (ms; server histograms, bucket-bounded, n=1200):
                  ttft = server queue + prefill + client/network
            p50   39.6 =         5.00 +    25.0 +           9.60
            p99  131.0 =         50.0 +    60.0 +           21.0
          server: ttft p50 40.0 p99 120.0 ms, queue p99 50.0 ms, KV max 93.5%, …
    """
    split = time_split(run)
    server = run.get("server_metrics")
    said = server_figures(server) if server else []
    if split is not None:
        tail = [f"  server: {', '.join(said)}"] if said and figures else []
        rows = [f"  {line}" for line in split_lines(split)]
        notes = [f"  ({note})" for note in split.notes]
        return [f"{where} (ms; {split.source}):", *rows, *notes, *tail]
    if server is None:  # --llm-server-metrics off: the header said so
        return []
    if said:
        return [f"{where}: no queue or prefill time to split ttft; server: {', '.join(said)}"]
    why = server.get("missing") or "the server exported none of them"
    return [f"{where}: no server metrics to split ttft ({why})"]


def error_sample_lines(samples: Sequence[Mapping[str, Any]], *, run: str = "") -> list[str]:
    """One line per distinct failure, in the server's words: ``http_error x12: HTTP 422: ...``."""
    where = f"{run}: " if run else ""
    lines = []
    for s in samples:
        status = f"HTTP {s['status']}: " if s.get("status") else ""
        lines.append(f"{where}{s['kind']} x{s['count']}: {status}{s['message']}")
    return lines
