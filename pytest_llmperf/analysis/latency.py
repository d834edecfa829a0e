"""TTFT by input length and the ITL distribution (the draft's TTFT and ITL tests).

Both take per-request rows (:class:`~pytest_llmperf.analysis.collector.RequestRow`)
and return an ``llm_loadgen.attach()`` payload: ``{"title", "kind", "columns",
"rows", ...}`` with latencies in milliseconds and the headline numbers also
under their own keys, so a test can assert on them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pytest_llmperf.analysis.collector import RequestRow
from pytest_llmperf.analysis.stats import nearest_rank
from pytest_llmperf.results.run_result import RunResult

__all__ = ["DRAFT_INPUT_BUCKETS", "itl_distribution", "latency_results", "ttft_by_input_length"]

DRAFT_INPUT_BUCKETS: tuple[int, ...] = (0, 256, 512, 1024, 2048, 4096)


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or value != value else round(value, digits)


def latency_results(
    result: RunResult, metrics: Sequence[str] = ("ttft", "tpot", "e2e")
) -> dict[str, Any]:
    """The draft's results table for a run: P50, P90, P95, P99, P99.9, mean, min, max, count.

    Percentiles with fewer samples than the minimum-sample rule asks for are
    still shown; the ``count`` column says how far to trust them (P99 needs
    >= 1000 samples, P99.9 >= 10000).
    """
    rows = []
    for name in metrics:
        hist = result.histogram(name)
        rows.append(
            [
                name,
                *(_r(hist.p(p)) for p in (50, 90, 95, 99, 99.9)),
                _r(hist.mean),
                _r(hist.min),
                _r(hist.max),
                hist.count,
            ]
        )
    return {
        "title": f"Latency results ({result.label or 'run'})",
        "kind": "table",
        "columns": ["metric", "p50", "p90", "p95", "p99", "p99.9", "mean", "min", "max", "count"],
        "rows": rows,
    }


def _bucket_label(low: int, high: int | None) -> str:
    return f"{low}+" if high is None else f"{low}-{high}"


def ttft_by_input_length(
    rows: Sequence[RequestRow], buckets: Sequence[int] = DRAFT_INPUT_BUCKETS
) -> dict[str, Any]:
    """TTFT P50/P95/P99 per input-length bucket ``[b_i, b_{i+1})`` (last bucket open-ended).

    Input length is the server's ``usage.prompt_tokens`` when reported, else
    the workload's stated size; requests with neither are counted as unknown.
    """
    edges = sorted(set(buckets))
    if not edges:
        raise ValueError("buckets must name at least one lower edge")
    groups: dict[int, list[float]] = {e: [] for e in edges}
    unknown = 0
    for row in rows:
        if row.ttft_ms is None:
            continue
        if row.input_tokens is None:
            unknown += 1
            continue
        lower = [e for e in edges if e <= row.input_tokens]
        groups[lower[-1] if lower else edges[0]].append(row.ttft_ms)
    table = []
    for i, low in enumerate(edges):
        high = edges[i + 1] if i + 1 < len(edges) else None
        values = groups[low]
        table.append(
            [
                _bucket_label(low, high),
                len(values),
                *(_r(nearest_rank(values, p)) for p in (50, 95, 99)),
            ]
        )
    return {
        "title": "TTFT by input length",
        "kind": "table",
        "columns": ["input tokens", "count", "ttft p50", "ttft p95", "ttft p99"],
        "rows": table,
        "unknown_input_length": unknown,
    }


def itl_distribution(rows: Sequence[RequestRow], result: RunResult | None = None) -> dict[str, Any]:
    """Pooled ITL statistics, per-request jitter and maximum pause, and the P99/P50 tail ratio.

    Mean and standard deviation are exact over every gap (combined from each
    request's moments); the pooled percentiles and the P99/P50 ratio come from
    the run's HDR histogram when ``result`` (a :class:`RunResult`) is given.
    Jitter is the standard deviation of one request's gaps (requests with at
    least 2 gaps); the maximum pause is its longest gap. The TTFT interval is
    never part of ITL.
    """
    with_gaps = [r for r in rows if r.itl_count > 0 and r.itl_mean_ms is not None]
    # (gaps, mean, std dev) per request
    moments = [
        (r.itl_count, m, r.itl_std_ms or 0.0) for r in with_gaps if (m := r.itl_mean_ms) is not None
    ]
    total = sum(n for n, _, _ in moments)
    mean = sum(m * n for n, m, _ in moments) / total if total else math.nan
    if total:
        var = sum(n * (sd**2 + (m - mean) ** 2) for n, m, sd in moments) / total
        std = math.sqrt(var)
    else:
        std = math.nan
    pooled: dict[str, float] = {}
    if result is not None:
        hist = result.histogram("itl")
        pooled = {f"p{p:g}": hist.p(p) for p in (50, 90, 95, 99, 99.9)}
    jitter = [r.itl_std_ms for r in with_gaps if r.itl_count >= 2 and r.itl_std_ms is not None]
    pauses = [r.itl_max_ms for r in with_gaps if r.itl_max_ms is not None]
    table: list[list[Any]] = [
        ["requests with ITL samples", len(with_gaps)],
        ["ITL samples", total],
        ["ITL mean", _r(mean)],
        ["ITL std dev", _r(std)],
    ]
    for name, value in pooled.items():
        table.append([f"ITL {name}", _r(value)])
    ratio = pooled["p99"] / pooled["p50"] if pooled and pooled["p50"] > 0 else math.nan
    if pooled:
        table.append(["ITL P99/P50 ratio", _r(ratio)])
    for name, values in (("jitter (per-request ITL std dev)", jitter), ("max pause", pauses)):
        for p in (50, 95, 99):
            table.append([f"{name} p{p}", _r(nearest_rank(values, p))])
    return {
        "title": "ITL distribution",
        "kind": "table",
        "columns": ["metric", "value"],
        "rows": table,
        "itl_mean_ms": _r(mean),
        "itl_std_ms": _r(std),
        "samples": total,
        "p99_p50_ratio": _r(ratio),
        "jitter_p50_ms": _r(nearest_rank(jitter, 50)),
        "max_pause_p99_ms": _r(nearest_rank(pauses, 99)),
    }
