"""A run's GPUs in the HTML report: the table (the GPUs together, then each GPU: the
cells of :mod:`.gpu_words`, as the terminal's and the Markdown's), where they were read,
the block's notes and the plots of power and memory on the run's time axis
(:mod:`.gpu_plots`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from pytest_llmperf.reports.gpu_plots import gpu_plots
from pytest_llmperf.reports.gpu_words import GPU_HEADER, gpu_rows

__all__ = ["gpu_html"]


def gpu_html(
    run: Mapping[str, Any], stages: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any] | None:
    """The template's ``r.gpu_view``; None for a run that read no GPU."""
    block = run.get("gpu")
    if not isinstance(block, Mapping):
        return None
    tokens = block.get("output_tokens")
    whose = block.get("output_tokens_from")
    return {
        "header": GPU_HEADER,
        "rows": gpu_rows(block),
        "sources": [str(s) for s in block.get("sources") or ()],
        "interval_s": block.get("interval_s"),
        "tokens": (
            f"{float(tokens):.0f} output tokens (the {whose}'s count)"
            if tokens is not None and whose
            else ""
        ),
        "notes": [str(n) for n in block.get("notes") or ()],
        "charts": [Markup(svg) for svg in gpu_plots(block, stages=stages)],
    }
