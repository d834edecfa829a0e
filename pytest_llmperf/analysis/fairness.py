"""Scheduling fairness between request classes (the draft's fairness test).

Per class: TTFT and TPOT percentiles, the starvation rate (share of the
class's requests whose TTFT — the wait before service — exceeds 5x the
class's median TTFT) and, when isolated baselines are given, the latency
inflation ``mixed TTFT p50 / isolated TTFT p50``. Jain's index is taken
over the classes' *normalized latency*: the inflation when baselines are
given, else the class's mean per-request e2e latency per output token (the
normalization vLLM's and Orca's scheduling studies use).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.analysis.collector import RequestRow
from pytest_llmperf.analysis.stats import jain_index, nearest_rank

__all__ = ["STARVATION_FACTOR", "class_fairness"]

STARVATION_FACTOR = 5.0


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or value != value else round(value, digits)


def class_fairness(
    rows: Sequence[RequestRow],
    *,
    isolated_ttft_p50_ms: Mapping[str, float] | None = None,
    starvation_factor: float = STARVATION_FACTOR,
) -> dict[str, Any]:
    """Per-class latency, starvation and Jain's index over the classes' normalized latency."""
    classes: dict[str, list[RequestRow]] = {}
    for row in rows:
        classes.setdefault(row.category or "(none)", []).append(row)
    table = []
    normalized: dict[str, float] = {}
    starvation: dict[str, float] = {}
    for name in sorted(classes):
        members = classes[name]
        ok = [r for r in members if r.ttft_ms is not None]
        ttft = [t for r in ok if (t := r.ttft_ms) is not None]
        tpot = [t for r in ok if (t := r.tpot_ms) is not None]
        median = nearest_rank(ttft, 50)
        starved = sum(1 for t in ttft if t > starvation_factor * median) if ttft else 0
        starvation[name] = starved / len(ttft) if ttft else float("nan")
        inflation = None
        if isolated_ttft_p50_ms and name in isolated_ttft_p50_ms and ttft:
            inflation = median / isolated_ttft_p50_ms[name]
            normalized[name] = inflation
        else:
            per_token = [
                e2e / r.output_tokens
                for r in ok
                if r.output_tokens > 0 and (e2e := r.e2e_ms) is not None
            ]
            if per_token:
                normalized[name] = sum(per_token) / len(per_token)
        table.append(
            [
                name,
                len(members),
                len(members) - len(ok),
                _r(median),
                _r(nearest_rank(ttft, 95)),
                _r(nearest_rank(ttft, 99)),
                _r(nearest_rank(tpot, 50)),
                _r(nearest_rank(tpot, 99)),
                _r(starvation[name], 4),
                _r(inflation),
            ]
        )
    jain = jain_index(list(normalized.values())) if len(normalized) >= 2 else float("nan")
    basis = "TTFT inflation vs isolated" if isolated_ttft_p50_ms else "e2e ms per output token"
    return {
        "title": f"Scheduling fairness: Jain's index {_r(jain, 4)} over classes ({basis})",
        "kind": "table",
        "columns": [
            "class",
            "count",
            "failed",
            "ttft p50",
            "ttft p95",
            "ttft p99",
            "tpot p50",
            "tpot p99",
            "starvation",
            "inflation",
        ],
        "rows": table,
        "jain_index": _r(jain, 4),
        "jain_basis": basis,
        "starvation": {k: _r(v, 4) for k, v in starvation.items()},
        "normalized_latency": {k: _r(v, 4) for k, v in normalized.items()},
    }
