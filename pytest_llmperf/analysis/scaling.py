"""Long-context scaling: TTFT against context length, with the draft's fits.

Rows are grouped by their input length class (the ``long-context`` workload
labels each request with its target length) or by an explicit mapping. The
fit ``TTFT ∝ length^k`` is a least-squares line in log-log space over the
per-length mean TTFTs: ``k`` near 1 is linear prefill, near 2 quadratic
attention cost; a linear fit gives the cost per input token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.analysis.collector import RequestRow
from pytest_llmperf.analysis.stats import linear_fit, nearest_rank, power_fit

__all__ = ["context_scaling"]


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or value != value else round(value, digits)


def _groups(rows: Sequence[RequestRow]) -> dict[int, list[RequestRow]]:
    groups: dict[int, list[RequestRow]] = {}
    for row in rows:
        try:
            length = int(row.category)
        except ValueError:
            if row.input_tokens is None:
                continue
            length = row.input_tokens
        groups.setdefault(length, []).append(row)
    return groups


def context_scaling(
    rows: Sequence[RequestRow] | Mapping[int, Sequence[RequestRow]],
) -> dict[str, Any]:
    """Per-length TTFT mean/P50/P95, ms per 1K tokens, scaling exponent and R² (a curve)."""
    groups = dict(rows) if isinstance(rows, Mapping) else _groups(rows)
    table: list[list[float | None]] = []
    lengths: list[float] = []
    means: list[float] = []
    for length in sorted(groups):
        ttft = [r.ttft_ms for r in groups[length] if r.ttft_ms is not None]
        e2e = [r.e2e_ms for r in groups[length] if r.e2e_ms is not None]
        if not ttft:
            table.append([length, 0, None, None, None, None, None])
            continue
        mean = sum(ttft) / len(ttft)
        lengths.append(float(length))
        means.append(mean)
        table.append(
            [
                length,
                len(ttft),
                _r(mean),
                _r(nearest_rank(ttft, 50)),
                _r(nearest_rank(ttft, 95)),
                _r(mean / length * 1000),
                _r(sum(e2e) / len(e2e)) if e2e else None,
            ]
        )
    power = power_fit(lengths, means)
    line = linear_fit(lengths, means)
    return {
        "title": (
            f"Long-context scaling: TTFT ~ length^{_r(power.slope, 3)} "
            f"(R² {_r(power.r_squared, 4)}); linear fit {_r(line.slope * 1000, 2)} µs/token "
            f"(R² {_r(line.r_squared, 4)})"
        ),
        "kind": "curve",
        "columns": [
            "context tokens",
            "count",
            "ttft mean",
            "ttft p50",
            "ttft p95",
            "ms per 1K tokens",
            "e2e mean",
        ],
        "rows": table,
        "x": "context tokens",
        "y": ["ttft mean", "ttft p95"],
        "exponent": _r(power.slope, 4),
        "exponent_r_squared": _r(power.r_squared, 4),
        "linear_us_per_token": _r(line.slope * 1000, 4),
        "linear_r_squared": _r(line.r_squared, 4),
    }
