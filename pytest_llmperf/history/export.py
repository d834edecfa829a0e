"""``export``: every stored session and run, as JSON or CSV; the trends as Markdown
(:func:`~pytest_llmperf.history.markdown.export_markdown`).

JSON: ``{"schema_version": N, "sessions": [{...session, "fingerprint": {...} |
null, "runs": [{...run, "state": {...}, "process": {...} | null}]}]}`` (states included:
lossless; ``process``: the server process's values, schema 5). CSV: one row per run, the
identity columns, the counts, then each metric flattened to ``metric.stat``
(``ttft.p50``) or ``metric`` for a rate or a process value (``startup.ready_s``); an
empty cell is a missing value.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from pytest_llmperf.history.markdown import export_markdown
from pytest_llmperf.history.records import StoredRun
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.specs.process_names import PROCESS_METRICS

__all__ = ["CSV_ID_COLUMNS", "export_csv", "export_json", "export_markdown", "flatten_metrics"]

CSV_ID_COLUMNS = ("session_id", "when", "tag", "test", "label", "key", "outcome")
COUNT_COLUMNS = (
    "issued",
    "completed",
    "failed",
    "incomplete",
    "cancelled",
    "connection_retries",
    "blank",  # completed with no visible text ("" in runs stored before it was counted)
)


def _run_dict(run: StoredRun) -> dict[str, Any]:
    return {
        "test": run.test,
        "label": run.label,
        "key": run.key,
        "outcome": run.outcome,
        "counts": run.counts,
        "metrics": run.metrics,
        "load": run.load,
        "workload": run.workload,
        "state": run.state(),
        "process": run.process,
    }


def _flat(run: StoredRun) -> dict[str, Any]:
    """A run's metrics flattened, and its server process's values by name."""
    flat = flatten_metrics(run.metrics)
    for name, value in (run.process or {}).items():
        if name in PROCESS_METRICS:
            flat[name] = value
    return flat


def export_json(store: HistoryStore) -> str:
    """The whole store as one JSON document."""
    runs: dict[int, list[dict[str, Any]]] = {}
    for run in store.runs():
        runs.setdefault(run.session_id, []).append(_run_dict(run))
    sessions = [
        {
            "id": s.id,
            "started_at": s.started_at,
            "finished_at": s.finished_at,
            "tag": s.tag,
            "endpoint": s.endpoint,
            "machine": s.machine,
            "options": s.options,
            "fingerprint": s.fingerprint,
            "stopped": s.stopped,
            "runs": runs.get(s.id, []),
        }
        for s in store.sessions()
    ]
    document = {"schema_version": store.schema_version, "sessions": sessions}
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def flatten_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """``{"ttft": {"p50": 1.0}, "error_rate": 0.0}`` -> ``{"ttft.p50": 1.0, "error_rate": 0.0}``."""
    flat: dict[str, Any] = {}
    for name, value in metrics.items():
        if isinstance(value, dict):
            for stat, number in value.items():
                flat[f"{name}.{stat}"] = number
        else:
            flat[name] = value
    return flat


def export_csv(store: HistoryStore) -> str:
    """One row per stored run (see the module's doc for the columns)."""
    runs = store.runs()
    metric_columns: list[str] = []
    for run in runs:
        for column in _flat(run):
            if column not in metric_columns:
                metric_columns.append(column)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*CSV_ID_COLUMNS, *COUNT_COLUMNS, *metric_columns])
    for run in runs:
        flat = _flat(run)
        writer.writerow(
            [
                run.session_id,
                run.when,
                run.tag,
                run.test,
                run.label,
                run.key,
                run.outcome,
                *(run.counts.get(c, "") for c in COUNT_COLUMNS),
                *("" if flat.get(c) is None else flat[c] for c in metric_columns),
            ]
        )
    return out.getvalue()
