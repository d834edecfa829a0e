"""A fleet run's section of the HTML report: the fleet's figures, the per-replica table
(the client's columns beside the page of the same name, each replica's verdicts), the
per-pool table, the notes and the charts (:mod:`.fleet_plots`).

Cells and words come from :mod:`.fleet_words`, as the terminal's and the Markdown's do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from pytest_llmperf.reports.fleet_plots import fleet_plots
from pytest_llmperf.reports.fleet_view import (
    fleet_view,
    pool_verdicts,
    replica_mark,
    replica_verdicts,
)
from pytest_llmperf.reports.fleet_words import (
    POOL_HEADER,
    REPLICA_HEADER,
    fleet_figures,
    pool_cells,
    replica_cells,
)

__all__ = ["fleet_html"]


def fleet_html(
    run: Mapping[str, Any],
    slos: Sequence[Mapping[str, Any]],
    stages: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any] | None:
    """The template's ``r.fleet_view``; None for a run without a fleet."""
    view = fleet_view(run)
    if view is None:
        return None
    rows = [
        {
            "cells": replica_cells(row),
            "mark": replica_mark(slos, view.label, row.name),
            "verdicts": replica_verdicts(slos, view.label, row.name),
            "missing": (row.server or {}).get("missing") if row.server is not None else None,
        }
        for row in view.rows
    ]
    failed = {row.name for row in view.rows if replica_mark(slos, view.label, row.name) == "fail"}
    return {
        "figures": fleet_figures(run),
        "header": REPLICA_HEADER,
        "rows": rows,
        "pool_header": POOL_HEADER,
        "pool_rows": [
            {"cells": pool_cells(p), "verdicts": pool_verdicts(slos, view.label, p.role)}
            for p in view.pools
        ],
        "notes": list(view.notes),
        "charts": [Markup(svg) for svg in fleet_plots(view, stages=stages, failed=failed)],
    }
