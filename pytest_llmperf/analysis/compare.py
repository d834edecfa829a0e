"""Comparisons of endpoints or configurations, per the draft's multi-system guidelines.

Statistics only: the runs come from
:func:`pytest_llmperf.methodology.configurations.run_configurations` (the
same workload against each configuration, repeated at least 3 times and
interleaved), collected in a :class:`ConfigurationRuns`. Each metric is then
reported per configuration as a mean with its confidence interval over the
repetitions, and its difference from the baseline configuration with
Welch's t-test. The guardrail-overhead and prefix-cache tests are such
comparisons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.analysis.collector import RequestRow
from pytest_llmperf.analysis.stats import mean_interval, nearest_rank, welch_test
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.results.run_result import RunResult

__all__ = [
    "DEFAULT_COMPARE_METRICS",
    "ConfigurationRuns",
    "compare_table",
    "guardrail_overhead",
    "metric_value",
    "prefix_cache_effectiveness",
]

DEFAULT_COMPARE_METRICS = ("ttft.p50", "ttft.p99", "e2e.p50", "e2e.p99", "output_throughput")


def metric_value(result: RunResult, metric: str) -> float:
    """``"ttft.p99"`` / ``"e2e.mean"`` / ``"output_throughput"`` of one run (ms, per second)."""
    name, _, stat = metric.partition(".")
    value = result.metrics.get(name)
    if value is None:
        raise LlmPerfUsageError(f"unknown metric {metric!r} in a comparison")
    if isinstance(value, float):
        if stat:
            raise LlmPerfUsageError(f"{name} is a rate: compare {name!r}, not {metric!r}")
        return value
    if not stat:
        raise LlmPerfUsageError(f"{name} is a latency: compare e.g. {name + '.p99'!r}")
    return value.stat(stat)


@dataclass
class ConfigurationRuns:
    """Each configuration's repeated runs and, per run, its per-request rows.

    Filled by :func:`pytest_llmperf.methodology.configurations.run_configurations`.
    """

    results: dict[str, list[RunResult]] = field(default_factory=dict)
    rows: dict[str, list[list[RequestRow]]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.results)

    def pooled_rows(self, name: str, runs: slice = slice(None)) -> list[RequestRow]:
        return [row for rows in self.rows[name][runs] for row in rows]


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or value != value else round(value, digits)


def compare_table(
    results: Mapping[str, Sequence[RunResult]] | ConfigurationRuns,
    metrics: Sequence[str] = DEFAULT_COMPARE_METRICS,
    *,
    baseline: str | None = None,
    confidence: float = 0.95,
    title: str = "Comparison",
) -> dict[str, Any]:
    """Per metric and configuration: mean [CI] over runs, difference from baseline, p-value."""
    runs = results.results if isinstance(results, ConfigurationRuns) else dict(results)
    if not runs:
        raise LlmPerfUsageError("nothing to compare")
    base = baseline or next(iter(runs))
    if base not in runs:
        raise LlmPerfUsageError(f"baseline {base!r} is not one of {', '.join(runs)}")
    rows: list[list[Any]] = []
    differences: dict[str, dict[str, dict[str, Any]]] = {}
    for metric in metrics:
        base_values = [metric_value(r, metric) for r in runs[base]]
        for name, name_runs in runs.items():
            values = [metric_value(r, metric) for r in name_runs]
            ci = mean_interval(values, confidence)
            if name == base:
                rows.append([metric, name, ci.n, _r(ci.mean), _r(ci.low), _r(ci.high)]
                            + [None] * 4)  # fmt: skip
                continue
            test = welch_test(base_values, values, confidence)
            differences.setdefault(metric, {})[name] = {
                "difference": _r(test.difference),
                "relative": _r(test.relative, 4),
                "p_value": _r(test.p_value, 4),
                "significant": bool(test.significant),
            }
            rows.append(
                [
                    metric,
                    name,
                    ci.n,
                    _r(ci.mean),
                    _r(ci.low),
                    _r(ci.high),
                    _r(test.difference),
                    _r(test.relative * 100, 2),
                    _r(test.p_value, 4),
                    "yes" if test.significant else "no",
                ]
            )
    return {
        "title": f"{title} (mean and {confidence:.0%} CI over runs; Welch t-test vs {base})",
        "kind": "table",
        "columns": [
            "metric",
            "configuration",
            "runs",
            "mean",
            "ci low",
            "ci high",
            "diff vs baseline",
            "diff %",
            "p-value",
            "significant",
        ],
        "rows": rows,
        "baseline": base,
        "differences": differences,
    }


def guardrail_overhead(
    results: Mapping[str, Sequence[RunResult]] | ConfigurationRuns,
    *,
    baseline: str | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """TTFT/E2E per configuration, their overhead over the baseline, and throughput reduction."""
    table = compare_table(
        results,
        ("ttft.p50", "ttft.p99", "e2e.p50", "e2e.p99", "output_throughput"),
        baseline=baseline,
        confidence=confidence,
        title="Guardrail overhead",
    )
    diffs = table["differences"]
    table["overhead"] = {
        name: {
            "ttft_p50_ms": diffs["ttft.p50"][name]["difference"],
            "e2e_p50_ms": diffs["e2e.p50"][name]["difference"],
            "throughput_reduction": None
            if diffs["output_throughput"][name]["relative"] is None
            else -diffs["output_throughput"][name]["relative"],
        }
        for name in diffs.get("ttft.p50", {})
    }
    return table


def _cached_share(rows: Sequence[RequestRow]) -> float | None:
    reported = [r for r in rows if r.cached_tokens is not None and r.input_tokens]
    if not reported:
        return None
    return sum(r.cached_tokens or 0 for r in reported) / sum(r.input_tokens or 0 for r in reported)


def prefix_cache_effectiveness(
    runs: ConfigurationRuns,
    *,
    disabled: str,
    enabled: str,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """TTFT with the cache off, cold (first run) and warm (later runs), cached-token share.

    The enabled configuration's first run starts from an empty cache (cold);
    its later runs replay the same requests into a populated cache (warm).
    TTFT reduction and its significance compare per-run TTFT P50 of all
    enabled runs with the disabled runs.
    """
    for name in (disabled, enabled):
        if name not in runs.results:
            raise LlmPerfUsageError(f"configuration {name!r} was not run ({', '.join(runs.names)})")
    groups = {
        "cache disabled": runs.pooled_rows(disabled),
        "cache (cold)": runs.pooled_rows(enabled, slice(0, 1)),
        "cache (warm)": runs.pooled_rows(enabled, slice(1, None)),
    }
    base_p50 = nearest_rank([r.ttft_ms for r in groups["cache disabled"] if r.ttft_ms], 50)
    table = []
    for label, rows in groups.items():
        ttft = [r.ttft_ms for r in rows if r.ttft_ms is not None]
        p50 = nearest_rank(ttft, 50)
        table.append(
            [
                label,
                len(ttft),
                _r(p50),
                _r(nearest_rank(ttft, 95)),
                _r(nearest_rank(ttft, 99)),
                None if label == "cache disabled" else _r((base_p50 - p50) / base_p50 * 100, 2),
                _r(_cached_share(rows), 4),
            ]
        )
    off = [metric_value(r, "ttft.p50") for r in runs.results[disabled]]
    on = [metric_value(r, "ttft.p50") for r in runs.results[enabled]]
    test = welch_test(off, on, confidence)
    thr_off = mean_interval([metric_value(r, "output_throughput") for r in runs.results[disabled]])
    thr_on = mean_interval([metric_value(r, "output_throughput") for r in runs.results[enabled]])
    improvement = (thr_on.mean - thr_off.mean) / thr_off.mean if thr_off.mean else float("nan")
    return {
        "title": (
            f"Prefix cache effectiveness: TTFT p50 {_r(-test.relative * 100, 1)}% lower with "
            f"the cache (p={_r(test.p_value, 4)}, "
            f"{'significant' if test.significant else 'not significant'}); "
            f"throughput {_r(improvement * 100, 1)}% higher"
        ),
        "kind": "table",
        "columns": [
            "configuration",
            "requests",
            "ttft p50",
            "ttft p95",
            "ttft p99",
            "ttft p50 reduction %",
            "cached-token share",
        ],
        "rows": table,
        "ttft_reduction": _r(-test.relative, 4),
        "p_value": _r(test.p_value, 4),
        "significant": bool(test.significant),
        "throughput_improvement": _r(improvement, 4),
        "cached_share_warm": _r(_cached_share(groups["cache (warm)"]), 4),
    }
