"""A run's per-model breakdown (``runs[].by_model``), as every report reads it.

With ``adapters=`` each request names a served model (an adapter, or the base model by
its own name), and the run's results are broken down per model as a staged run's are
per stage: its counts, metrics and the verdicts an ``llm_slo(..., per_model=True)``
judged on it alone. The terminal, HTML, Markdown and JUnit reports show the same rows
in the same order (the JSON report's), each with the worst of its verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.reports.table import stage_mark, verdict_model

__all__ = ["issued_share", "model_entries", "model_mark", "model_verdicts"]


def model_entries(run: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``[(model, {"counts", "metrics", ...})]`` in the JSON report's order; ``[]`` for a
    run whose requests named no model."""
    by_model = run.get("by_model")
    if isinstance(by_model, Mapping):
        return [(str(k), v) for k, v in by_model.items() if isinstance(v, Mapping)]
    if isinstance(by_model, Sequence) and not isinstance(by_model, str):  # [{"model": ...}]
        return [(str(v.get("model")), v) for v in by_model if isinstance(v, Mapping)]
    return []


def model_verdicts(
    slos: Sequence[Mapping[str, Any]], label: Any, model: str
) -> list[Mapping[str, Any]]:
    """The verdict dicts judged on ``model`` of run ``label`` alone."""
    return [v for v in slos if v.get("run") == label and verdict_model(v) == model]


def model_mark(slos: Sequence[Mapping[str, Any]], label: Any, model: str) -> str:
    """The worst of a model's verdicts (``fail``, ``inconclusive``, ``pass``), ``""``
    when it was not judged on its own."""
    return stage_mark(model_verdicts(slos, label, model))


def issued_share(entry: Mapping[str, Any], run: Mapping[str, Any]) -> float | None:
    """The share of the run's issued requests that named this model (the drawn split)."""
    issued = int((run.get("counts") or {}).get("issued") or 0)
    mine = int((entry.get("counts") or {}).get("issued") or 0)
    return mine / issued if issued else None
