"""Each replica's requests against the baseline's same replica: ``replica.ttft.p99=20%``.

Only where ``--llm-baseline-threshold`` names a ``replica.<metric>[.<stat>]``: a fleet's
replicas are named by its deployment (a pod, a port, an index), and a default comparison
of every replica's every statistic would multiply the checks a test's alpha is shared
among (slo/multiplicity.py) for names that may not even be the same replicas. Named, each
replica that served requests on both sides is compared by the rule of the plain
statistic (:func:`~pytest_llmperf.slo.regression.compare_accumulators`: threshold and
significance) on its own requests; the checks name the metric ``replica.<metric>`` and
the run ``<run> replica <name>``. A replica on one side only is said in one inconclusive
note per statistic, never a verdict (a replica added or replaced is no regression).
"""

from __future__ import annotations

from dataclasses import replace

from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.slo.quantile_bounds import DEFAULT_CONFIDENCE
from pytest_llmperf.slo.regression import (
    DEFAULT_ALPHA,
    RegressionCheck,
    Thresholds,
    compare_accumulators,
    inconclusive_check,
)
from pytest_llmperf.specs.fleet_names import REPLICA_SCOPE

__all__ = ["compare_replicas"]


def compare_replicas(
    baseline: MetricsAccumulator,
    current: MetricsAccumulator,
    thresholds: Thresholds | None,
    *,
    alpha: float = DEFAULT_ALPHA,
    run: str = "",
    compared_with: str = "",
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[RegressionCheck]:
    """The named ``replica.*`` statistics of each replica on both sides (module docstring)."""
    wanted = thresholds.replica_stats() if thresholds is not None else []
    if not wanted or thresholds is None:
        return []
    both = sorted(set(baseline.replicas) & set(current.replicas))
    checks: list[RegressionCheck] = []
    alone = sorted(set(baseline.replicas) ^ set(current.replicas))
    if alone or not both:
        checks += [_note(metric, stat, baseline, current, run, compared_with) for metric, stat
                   in wanted]  # fmt: skip
    limits = {
        f"{metric}.{stat}": thresholds.for_stat(f"{REPLICA_SCOPE}.{metric}", stat)
        for metric, stat in wanted
    }
    own = Thresholds(thresholds.default, limits)
    for name in both:
        found = compare_accumulators(
            baseline.replicas[name],
            current.replicas[name],
            thresholds=own,
            alpha=alpha,
            run=f"{run} replica {name}".strip(),
            compared_with=compared_with,
            confidence=confidence,
        )
        checks += [_renamed(c) for c in found if (c.metric, c.stat) in wanted]
    return checks


def _renamed(check: RegressionCheck) -> RegressionCheck:
    return replace(check, metric=f"{REPLICA_SCOPE}.{check.metric}")


def _note(
    metric: str,
    stat: str,
    baseline: MetricsAccumulator,
    current: MetricsAccumulator,
    run: str,
    compared_with: str,
) -> RegressionCheck:
    """Which replicas served on one side only (a note, never a verdict)."""

    def names(acc: MetricsAccumulator) -> str:
        return ", ".join(sorted(acc.replicas)) or "none attributed"

    reason = (
        f"replicas differ: the baseline's {names(baseline)}, this run's {names(current)}; "
        "only those on both sides are compared"
    )
    check = inconclusive_check(run, reason, compared_with=compared_with)
    return replace(check, metric=f"{REPLICA_SCOPE}.{metric}", stat=stat, note_only=True)
