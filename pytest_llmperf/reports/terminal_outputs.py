"""The terminal summary's lines on a run's request paths and outputs (issue 28).

Under each run, after its stages: what the workload asked of the server beyond plain
text (``run0 asked for: structured output (schema output); greedy``), a line per served
model (``run0 model sim-lora-1: 16/16 ok (40% of requests), ttft p50 … p99 …, tpot …;
✓ pass``) like a staged run's per-stage lines (more than :data:`MAX_MODEL_LINES`
models: only those that did not pass), and each output comparison made
(``≠ run0 output_match 90.00%: 36/40 samples equal the baseline's`` and where the
mismatching samples part from it) or why one was not made (unless its verdict
says); after its failed requests, its invalid outputs in the validator's words. A run
with nothing of these gets no line: a plain run's summary is what it was. Every line
fits the terminal's width (:mod:`.line_breaks`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.reports.line_breaks import fit, wrap_parts
from pytest_llmperf.reports.model_view import issued_share, model_entries, model_mark
from pytest_llmperf.reports.output_words import (
    compare_head,
    compared_outputs,
    invalid_sample_lines,
    parting_words,
    path_parts,
    validity,
)
from pytest_llmperf.reports.table import MARKS, format_value

__all__ = ["MAX_MODEL_LINES", "MAX_PARTINGS", "invalid_lines", "output_lines", "valid_part"]

MAX_PARTINGS = 5  # mismatching samples named on the terminal (the JSON has the first 20)
MAX_MODEL_LINES = 8  # a run with more served models lists only those that did not pass


def valid_part(run: Mapping[str, Any]) -> str:
    """``valid 95.00% (2 invalid)`` (``valid 100.00%``) for figures of a run or merged
    group whose outputs were checked; ``""`` otherwise."""
    said = validity(run)
    if said is None:
        return ""
    invalid, _, rate = said
    return f"valid {format_value(rate, 'fraction')}" + (f" ({invalid} invalid)" if invalid else "")


def output_lines(
    run: Mapping[str, Any], slos: Sequence[Mapping[str, Any]], width: int | None
) -> list[str]:
    """What the run asked for, its per-model lines and its output comparisons."""
    label = str(run.get("label") or "")
    lines: list[str] = []
    asked = path_parts(run.get("workload") or {})
    if asked:
        lines += wrap_parts([f"{label} asked for: {asked[0]}", *asked[1:]], width, sep=";")
    models = model_entries(run)
    hidden = 0
    for model, entry in models:
        if len(models) > MAX_MODEL_LINES and model_mark(slos, run.get("label"), model) in (
            "pass",
            "",
        ):
            hidden += 1
            continue
        lines += _model_lines(label, model, entry, run, slos, width)
    if hidden:
        lines.append(f"    {label}: {hidden} more model(s) passed or were not judged")
    for name, match in compared_outputs(run):
        lines += _compare_lines(label, name, match, width)
    judged = {str(v.get("expr") or "").split(" ", 1)[0] for v in slos if v.get("run") == label}
    for name, why in (run.get("output_notes") or {}).items():
        if why and name not in judged:  # else its verdict's reason says so
            lines += _wrapped(f"? {label} {name} not measured: {why}", width, "    ")
    return lines


def _model_lines(
    label: str,
    model: str,
    entry: Mapping[str, Any],
    run: Mapping[str, Any],
    slos: Sequence[Mapping[str, Any]],
    width: int | None,
) -> list[str]:
    counts = entry.get("counts") or {}
    metrics = entry.get("metrics") or {}
    share = issued_share(entry, run)
    head = f"{label} model {model}: {counts.get('completed', 0)}/{counts.get('issued', 0)} ok"
    if share is not None:
        head += f" ({share * 100:.0f}% of requests)"
    parts = [head]
    for metric in ("ttft", "tpot"):
        stats = metrics.get(metric) or {}
        parts.append(
            f"{metric} p50 {format_value(stats.get('p50'), 'ms')} "
            f"p99 {format_value(stats.get('p99'), 'ms')}"
        )
    failed = int(counts.get("failed") or 0)
    if failed:
        parts.append(f"{failed} failed")
    if valid := valid_part(entry):
        parts.append(valid)
    mark = model_mark(slos, run.get("label"), model)
    if mark:
        parts[-1] += f"; {MARKS[mark]} {mark}"
    return wrap_parts(parts, width)


def _compare_lines(label: str, name: str, match: Mapping[str, Any], width: int | None) -> list[str]:
    """``= run0 output_match 100.00%: 40/40 samples equal the baseline's``, or ``≠`` and
    the first samples that differ with the token position where each parts."""
    share = match.get("share")
    same = isinstance(share, (int, float)) and share >= 1
    head = f"{'=' if same else '≠'} {label} {compare_head(name, match, exactly=True)}"
    lines = _wrapped(head, width, "    ", deeper=4)
    parted = parting_words(match, limit=MAX_PARTINGS).split(", ")
    if parted[0]:  # each sample with its position kept on one line
        lines += wrap_parts([f"parted at: {parted[0]}", *parted[1:]], width, "      ")
    return lines


def _wrapped(text: str, width: int | None, indent: str, *, deeper: int = 2) -> list[str]:
    """``text`` at ``indent``, broken at spaces to ``width`` (continuations ``deeper``)."""
    if width is None or len(indent) + len(text) <= width:
        return [indent + text]
    return textwrap.wrap(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=indent + " " * deeper,
        break_long_words=False,
        break_on_hyphens=False,
    )


def invalid_lines(run: Mapping[str, Any], width: int | None) -> list[str]:
    """``✗ run0: 2 of 40 checked outputs invalid (valid 95.00%)``, then each distinct
    reason in the validator's words (wrapped at spaces); nothing when every output was
    valid (``counts.invalid`` 0)."""
    said = validity(run)
    invalid = int((run.get("counts") or {}).get("invalid") or 0)
    if not invalid:
        return []
    label = str(run.get("label") or "")
    of = f" of {said[1]} checked" if said else ""
    rate = f" (valid {format_value(said[2], 'fraction')})" if said else ""
    lines = fit(f"    ✗ {label}: {invalid}{of} outputs invalid{rate}", width)
    for line in invalid_sample_lines(run.get("invalid_samples") or ()):
        if width is None:
            lines.append("      " + line)
            continue
        lines += textwrap.wrap(
            line,
            width,
            initial_indent="      ",
            subsequent_indent="        ",
            break_long_words=True,  # a validator's JSON path may be one long word
            break_on_hyphens=False,
        )
    return lines
