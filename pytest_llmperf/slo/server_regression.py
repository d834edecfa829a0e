"""The server's own statistics against a baseline's: ``server.queue_time.p99=20%``.

A server percentile comes from Prometheus buckets, so it is known only to within
its bucket (reported at the upper bound, ``pN_lo`` the lower). There is nothing
to resample, so the bootstrap of the client's checks does not apply; instead a
change counts only when the buckets say so on their own: *regressed* when the
value grew beyond the threshold **and** the current bucket lies wholly above the
baseline's value (its lower bound at or above the baseline's upper bound), and
*improved* the other way round. A mean (exact: a sum over a count) needs only the
threshold. Each side needs the sample count a client percentile needs, and a baseline
value of 0 against a current one above it is inconclusive, as for the client's checks (a
change relative to 0 is undefined).

Only the statistics named in ``--llm-baseline-threshold`` are compared: a server's
buckets are its own choice, and a default comparison of every one would mostly
say "same bucket".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmperf.server_metrics.summary import ServerMetrics
from pytest_llmperf.slo.regression import (
    RegressionCheck,
    RegressionVerdict,
    Thresholds,
    zero_baseline,
)
from pytest_llmperf.slo.value_regression import not_compared
from pytest_llmperf.slo.verdicts import min_samples
from pytest_llmperf.specs.slo import percentile_of

__all__ = ["compare_server_metrics"]

_HOW = "bucket-bounded: a change counts when the buckets do not overlap"


def compare_server_metrics(
    baseline: Mapping[str, Any] | None,
    current: ServerMetrics | None,
    thresholds: Thresholds,
    *,
    run: str = "",
    compared_with: str = "",
) -> list[RegressionCheck]:
    """One check per server statistic ``thresholds`` names; ``baseline`` is the stored
    run's ``server_metrics`` (the JSON form), ``current`` this run's."""
    checks: list[RegressionCheck] = []
    for name, stat in thresholds.server_stats():
        limit = thresholds.for_stat(name, stat)
        base = dict((baseline or {}).get("metrics", {}).get(name) or {})
        cur = current.metrics.get(name, {}) if current is not None else {}
        counts = (int(base.get("count", 0)), int(cur.get("count", 0)))
        common: dict[str, Any] = {
            "metric": name,
            "stat": stat,
            "threshold": limit,
            "run": run,
            "samples": counts,
            "test": _HOW,
            "compared_with": compared_with,
        }
        b, c = base.get(stat), cur.get(stat)
        reason = _why_not(name, stat, b, c, counts, baseline, current)
        if reason:
            note_only = reason == zero_baseline(f"{name}.{stat}", "baseline")
            checks.append(not_compared(b, c, reason, note_only=note_only, **common))
            continue
        assert b is not None and c is not None
        change = c / b - 1.0 if b > 0 else 0.0  # both 0 (0 against more: _why_not)
        verdict = RegressionVerdict.UNCHANGED
        if stat == "mean":
            above, below = True, True
        else:  # the current bucket wholly above (below) the baseline's
            cur_lo, base_lo = cur.get(f"{stat}_lo"), base.get(f"{stat}_lo")
            above = (c if cur_lo is None else float(cur_lo)) >= b
            below = c <= (b if base_lo is None else float(base_lo))
        if change > limit and above:
            verdict = RegressionVerdict.REGRESSED
        elif change < -limit and below:
            verdict = RegressionVerdict.IMPROVED
        checks.append(
            RegressionCheck(
                baseline=round(float(b), 4),
                current=round(float(c), 4),
                change=round(change, 6),
                p_value=None,
                verdict=verdict,
                **common,
            )
        )
    return checks


def _why_not(
    name: str,
    stat: str,
    b: float | None,
    c: float | None,
    counts: tuple[int, int],
    baseline: Mapping[str, Any] | None,
    current: ServerMetrics | None,
) -> str:
    """Why ``name.stat`` cannot be compared, or ``""`` when it can."""
    if b is None:
        why = (baseline or {}).get("missing") if baseline else None
        return f"the baseline has no {name} {stat}" + (f" ({why})" if why else "")
    if c is None:
        why = current.missing if current is not None else "--llm-server-metrics off"
        return f"this run has no {name} {stat}" + (f" ({why})" if why else "")
    needed = min_samples(percentile_of(stat))
    if min(counts) < needed:
        return (
            f"{stat} needs >= {needed} samples on both sides, "
            f"have {counts[0]} (baseline) and {counts[1]} (current)"
        )
    if float(b) <= 0 < float(c):
        return zero_baseline(f"{name}.{stat}", "baseline")
    return ""
