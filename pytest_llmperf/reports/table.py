"""Plain-text tables of SLO verdicts, for failure messages and the terminal."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_llmperf.slo.verdicts import SloVerdict

__all__ = ["MARKS", "format_value", "verdict_table"]

MARKS = {"pass": "✓", "fail": "✗", "inconclusive": "?"}


def format_value(value: float | None, unit: str) -> str:
    """``12.3 ms``, ``0.50%``, ``41.2 req/s``; ``-`` when nothing was measured."""
    if value is None:
        return "-"
    if unit == "fraction":
        return f"{value * 100:.2f}%"
    if unit == "ms":
        return f"{value:.1f} ms" if value >= 10 else f"{value:.3f} ms"
    return f"{value:.2f} {unit}"


def verdict_table(verdicts: Sequence[SloVerdict]) -> str:
    """A fixed-width table: SLO, run, observed, target, verdict, reason."""
    rows = [("SLO", "run", "observed", "target", "verdict")]
    notes: list[str] = []
    for v in verdicts:
        op = v.expr.split()[1] if len(v.expr.split()) > 2 else ""
        rows.append(
            (
                v.expr,
                v.run,
                format_value(v.observed, v.unit),
                f"{op} {format_value(v.target, v.unit)}".strip(),
                f"{MARKS.get(v.verdict, '')} {v.verdict.upper()}",
            )
        )
        if v.reason:
            notes.append(f"  {v.expr} [{v.run}]: {v.reason}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)
