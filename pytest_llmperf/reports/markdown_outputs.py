"""The Markdown summary's pieces on a run's request paths and outputs (issue 28).

In a test's checks (:func:`outputs_block`, after the failed requests): each run's
checked outputs (``38/40 valid``, ``valid_rate``) with the validator's reasons for the
invalid ones, and each output comparison (share, against what, the mismatching samples
and the token where each parts), or why one asked for was not made; in the gated-runs
section, what each run's workload asked of the server (:func:`paths_line`). All from
the JSON report's run dicts, in the words the other reports use (:mod:`.output_words`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.gfm import code, text
from pytest_llmperf.reports.output_words import (
    compare_head,
    compared_outputs,
    invalid_sample_lines,
    output_notes,
    parting_words,
    path_parts,
    validity,
)
from pytest_llmperf.reports.table import format_value

__all__ = ["MAX_INVALID_LINES", "outputs_block", "paths_line"]

MAX_INVALID_LINES = 10  # the validator's reasons listed per test (the JSON has them all)


def outputs_block(runs: Sequence[Mapping[str, Any]]) -> str:
    """Each run's outputs checked and compared, as Markdown paragraphs, then the invalid
    outputs' reasons as a list; ``""`` when no run checked or compared any."""
    said: list[str] = []
    reasons: list[str] = []
    for run in runs:
        label = text(run.get("label") or "-")
        checked = validity(run)
        if checked is not None:
            invalid, n, rate = checked
            said.append(
                f"Outputs checked [{label}]: {n - invalid}/{n} valid "
                f"(valid\\_rate {format_value(rate, 'fraction')}), {invalid} invalid"
            )
        reasons += invalid_sample_lines(run.get("invalid_samples") or (), run=str(run.get("label")))
        for name, match in compared_outputs(run):
            head = compare_head(name, match, exactly=True).removeprefix(f"{name} ")
            parted = parting_words(match)
            said.append(
                f"{code(name, cell=False)} [{label}]: {text(head)}"
                + (f"; parted at: {text(parted)}" if parted else "")
            )
        said += [f"[{label}] {text(note)}" for note in output_notes(run)]
    out = "".join(f"\n{line}\n" for line in said)
    if reasons:
        out += "\nInvalid outputs, in the validator's words:\n\n"
        out += "".join(f"- {code(line, cell=False)}\n" for line in reasons[:MAX_INVALID_LINES])
        if len(reasons) > MAX_INVALID_LINES:
            more = len(reasons) - MAX_INVALID_LINES
            out += f"- … {more} more (JSON report: `invalid_samples`)\n"
    return out


def paths_line(nodeid: str, run: Mapping[str, Any]) -> str | None:
    """``test [run0]: structured output (schema output); greedy``: what the workload
    asked of the server beyond plain text; None for a plain run."""
    parts = path_parts(run.get("workload") or {})
    if not parts:
        return None
    return f"{code(nodeid, cell=False)} [{text(run.get('label') or '-')}]: {text('; '.join(parts))}"
