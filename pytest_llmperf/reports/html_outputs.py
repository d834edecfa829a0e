"""The HTML report's views of a run's request paths and outputs (issue 28).

Beside a run's results the template shows, when the run has them: its checked outputs
(how many, how many invalid, ``valid_rate``) and the validator's reasons (like the
failed requests' messages), a table per served model (like the per-stage table: counts,
share of the requests, TTFT/TPOT, errors, valid share, the model's verdicts), and each
output comparison (share, against what, then every mismatching sample the JSON lists
and the token event where it parts). Cells are formatted as every report formats them
(:mod:`.output_words`, :func:`~.table.format_value`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.reports.model_view import (
    issued_share,
    model_entries,
    model_mark,
    model_verdicts,
)
from pytest_llmperf.reports.output_words import (
    against_words,
    compared_outputs,
    mismatched,
    output_notes,
    path_parts,
    tool_choice_word,
    validity,
)
from pytest_llmperf.reports.table import format_value
from pytest_llmperf.results.outputs import sample_words

__all__ = ["is_path_key", "outputs_view", "path_config_rows"]

_PATH_KEYS = ("structured", "tools", "tool_choice", "adapters", "greedy")


def path_config_rows(workload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The configuration rows of what the workload asked beyond plain text, readable:
    ``("workload.adapters", "sim-lora-1 40%, sim-lora-2 40%, base 20%")``; then the whole
    in one row (``asked of the server``)."""
    rows = []
    for key in _PATH_KEYS:
        value = workload.get(key)
        if value is None or value is False or value == "" or value == [] or value == {}:
            continue
        if key == "adapters" and isinstance(value, Mapping):
            said = ", ".join(f"{k} {_percent(w)}" for k, w in value.items())
        elif key == "tool_choice":
            said = tool_choice_word(value)
        elif isinstance(value, (list, tuple)):
            said = ", ".join(str(v) for v in value)
        elif value is True:
            said = "yes (temperature 0, top_p 1, a fixed seed)" if key == "greedy" else "yes"
        else:
            said = str(value)
        rows.append((f"workload.{key}", said))
    parts = path_parts(workload)
    if parts:
        rows.append(("asked of the server", "; ".join(parts)))
    return rows


def is_path_key(key: str) -> bool:
    """A workload key :func:`path_config_rows` shows (the plain rows leave it out)."""
    return key in _PATH_KEYS


def outputs_view(run: Mapping[str, Any], slos: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The template's ``r.outputs_view``: ``validity``, ``invalid_samples``, ``models``,
    ``comparisons``, ``mismatches``, ``notes`` (each empty when the run has none)."""
    said = validity(run)
    label = run.get("label")
    models = []
    for name, entry in model_entries(run):
        counts = entry.get("counts") or {}
        metrics = entry.get("metrics") or {}
        share = issued_share(entry, run)
        valid = validity(entry)
        models.append(
            {
                "name": name,
                "share": "-" if share is None else f"{share * 100:.1f}%",
                "completed": int(counts.get("completed") or 0),
                "issued": int(counts.get("issued") or 0),
                "failed": int(counts.get("failed") or 0),
                "invalid": int(counts.get("invalid") or 0),
                "cells": [
                    format_value((metrics.get(m) or {}).get(s), "ms")
                    for m, s in (("ttft", "p50"), ("ttft", "p99"), ("tpot", "p50"), ("tpot", "p99"))
                ],
                "errors": format_value(metrics.get("error_rate"), "fraction"),
                "valid": "-" if valid is None else format_value(valid[2], "fraction"),
                "verdicts": model_verdicts(slos, label, name),
                "mark": model_mark(slos, label, name),
            }
        )
    comparisons, mismatches = [], []
    for name, match in compared_outputs(run):
        compared = int(match.get("compared") or 0)
        differ = mismatched(match)
        comparisons.append(
            {
                "metric": name,
                "share": format_value(match.get("share"), "fraction"),
                "compared": compared,
                "equal": compared - differ,
                "mismatched": differ,
                "against": against_words(match),
                "compared_with": str(match.get("compared_with") or ""),
                "listed": len(match.get("mismatches") or ()),
            }
        )
        for m in match.get("mismatches") or ():
            position = m.get("position")
            mismatches.append(
                {
                    "metric": name,
                    "index": sample_words(m),
                    "position": "-" if position is None else str(position),
                }
            )
    return {
        "validity": (
            None
            if said is None
            else {
                "invalid": said[0],
                "checked": said[1],
                "valid_rate": format_value(said[2], "fraction"),
            }
        ),
        "invalid_samples": list(run.get("invalid_samples") or ()),
        "models": models,
        "comparisons": comparisons,
        "mismatches": mismatches,
        "notes": output_notes(run),
    }


def _percent(weight: Any) -> str:
    try:
        return f"{float(weight) * 100:g}%"
    except (TypeError, ValueError):
        return str(weight)
