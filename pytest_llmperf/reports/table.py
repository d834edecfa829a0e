"""Plain-text tables of SLO verdicts, for failure messages and the terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
    "verdict_table",
    "verdict_where",
]

MARKS: dict[str, str] = {  # by verdict, SLO or baseline (the two share "inconclusive")
    Verdict.PASS: "✓",
    Verdict.FAIL: "✗",
    Verdict.INCONCLUSIVE: "?",
    RegressionVerdict.REGRESSED: "✗",
    RegressionVerdict.IMPROVED: "↑",
    RegressionVerdict.UNCHANGED: "=",
}


def format_value(value: float | None, unit: str) -> str:
    """``12.3 ms``, ``0.50%``, ``41.2 req/s``; ``-`` when nothing was measured."""
    if value is None:
        return "-"
    if unit == "fraction":
        return f"{value * 100:.2f}%"
    if unit == "ms":
        return f"{value:.1f} ms" if value >= 10 else f"{value:.3f} ms"
    return f"{value:.2f} {unit}"


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
        rows.append(
            (
                c.name,
                c.run,
                format_value(first, "ms"),
                format_value(second, "ms"),
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


def verdict_where(v: Mapping[str, Any]) -> str:
    """``stage 1: 40 req/s`` for a verdict dict judged on one stage, ``""`` otherwise."""
    if v.get("stage") is None:
        return ""
    load = v.get("stage_load") or ""
    return f"stage {v['stage']}" + (f": {load}" if load else "")


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


def verdict_table(verdicts: Sequence[SloVerdict]) -> str:
    """A fixed-width table: SLO, run, observed, target, verdict, reason.

    Verdicts judged on one stage of a staged run add a ``stage`` column
    (``1: 40 req/s``) after the run; a table without them has none.
    """
    staged = any(v.stage is not None for v in verdicts)
    head = ("SLO", "run", "stage") if staged else ("SLO", "run")
    rows: list[tuple[str, ...]] = [(*head, "observed", "target", "verdict")]
    notes: list[str] = []
    for v in verdicts:
        op = v.expr.split()[1] if len(v.expr.split()) > 2 else ""
        stage = ("" if v.stage is None else v.where.removeprefix("stage "),) if staged else ()
        rows.append(
            (
                v.expr,
                v.run,
                *stage,
                format_value(v.observed, v.unit),
                f"{op} {format_value(v.target, v.unit)}".strip(),
                f"{MARKS.get(v.verdict, '')} {v.verdict.upper()}",
            )
        )
        if v.reason:
            where = f" [{v.where}]" if v.where else ""
            notes.append(f"  {v.expr} [{v.run}]{where}: {v.reason}")
    lines = _table(rows)
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


def error_sample_lines(samples: Sequence[Mapping[str, Any]], *, run: str = "") -> list[str]:
    """One line per distinct failure, in the server's words: ``http_error x12: HTTP 422: ...``."""
    where = f"{run}: " if run else ""
    lines = []
    for s in samples:
        status = f"HTTP {s['status']}: " if s.get("status") else ""
        lines.append(f"{where}{s['kind']} x{s['count']}: {status}{s['message']}")
    return lines
