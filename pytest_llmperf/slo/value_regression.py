"""One value per side against a threshold: the comparison of figures a run has once (the
server process's ``startup.ready_s``, ``server.rss_max_mb``; the GPUs'
``energy_per_output_token_j``), shared by :mod:`.startup_regression` and
:mod:`.gpu_regression`.

Nothing to resample, so no p-value: *regressed* when the value grew by more than its
threshold (and by more than ``floor`` absolute, where a figure varies by that much
anyway), *improved* the other way round, else unchanged. A baseline at or below 0
against a larger value now is an inconclusive note: a change relative to 0 is undefined.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.slo.regression import RegressionCheck, RegressionVerdict

__all__ = ["not_compared", "value_check"]


def not_compared(
    b: float | None, c: float | None, reason: str, *, note_only: bool = False, **common: Any
) -> RegressionCheck:
    """An inconclusive check saying why the two values were not compared (``note_only``:
    said, but no verdict of the test's)."""
    return RegressionCheck(
        baseline=b,
        current=c,
        change=None,
        p_value=None,
        verdict=RegressionVerdict.INCONCLUSIVE,
        reason=reason,
        note_only=note_only,
        **common,
    )


def value_check(
    b: float,
    c: float,
    *,
    limit: float,
    unit: str,
    floor: float = 0.0,
    floor_why: str = "it may vary by",
    digits: int = 6,
    **common: Any,
) -> RegressionCheck:
    """Baseline ``b`` against current ``c`` (both measured), ``limit`` the relative change
    allowed, ``floor`` the absolute change (in ``unit``) that a verdict also needs."""
    name = common.get("metric", "")
    if b <= 0 < c:
        reason = f"{name}: the baseline is {b:g} {unit}: a relative change is undefined"
        return not_compared(b, c, reason, note_only=True, **common)
    change = c / b - 1.0 if b > 0 else 0.0
    verdict = RegressionVerdict.UNCHANGED
    if change > limit and c - b > floor:
        verdict = RegressionVerdict.REGRESSED
    elif change < -limit and b - c > floor:
        verdict = RegressionVerdict.IMPROVED
    reason = ""
    if verdict is RegressionVerdict.UNCHANGED and change > limit and floor:
        reason = f"+{c - b:.2f} {unit} is within the {floor:g} {unit} {floor_why}"
    return RegressionCheck(
        baseline=round(b, digits),
        current=round(c, digits),
        change=round(change, 6),
        p_value=None,
        verdict=verdict,
        reason=reason,
        **common,
    )
