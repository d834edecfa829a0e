"""Many comparisons in one session: the family-wise false-failure rate, and power.

The baseline, history and A/B gates judge many statistics of many tests, each with
its own one-sided significance test. Judged alone at p < alpha, a session of 200
comparisons of identical servers fails with probability up to ``1 − (1 − alpha)^200``
(87% at alpha 0.01). Two corrections, both on the comparisons' p-values:

- **Holm** (family-wise error rate, the test verdicts' method): sort the m p-values,
  reject ``p_(i)`` while ``p_(i) <= alpha / (m − i + 1)`` (i = 1, 2, …), stop at the
  first that is not. The probability of any false rejection is at most alpha, whatever
  the dependence between the tests.
- **Benjamini–Hochberg** (false discovery rate): reject the k smallest, k the largest
  i with ``p_(i) <= i alpha / m``. The expected share of false rejections among the
  rejections is at most alpha (independent or positively dependent tests); more power
  when many statistics really changed, and under no change at all the same guarantee.

**When a test is judged.** A test fails as it ends, before the session's other
p-values exist, so a step-down over the whole session cannot decide it. The budget is
split up front instead: the session's ``alpha`` over the ``T`` collected tests that can
measure (known at collection), and within one test Holm at ``alpha / T`` over that
test's comparisons (its baseline and A/B checks). By Bonferroni across tests and Holm
within, the probability that any test of the session fails falsely is at most
``alpha``. At session end Holm and BH over every comparison's p-value at ``alpha`` are
reported (which comparisons would survive them); they never fail a test that passed.

**Power.** For each comparison, the smallest true change it would catch with 80%
power at the level it was judged at (its Bonferroni level ``alpha / (T m)``, the
strictest of its Holm steps): with ``sigma`` the standard deviation of the bootstrap
distribution of the relative change (the same resamples that give its p-value; a
normal approximation of them), a change is caught when it is beyond the threshold and
significant, i.e. when the observed change exceeds ``max(threshold, z_(1−level) sigma)``,
so ``mde = max(threshold, z_(1−level) sigma) + z_power sigma``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from statistics import NormalDist
from typing import Any, TypeVar

from pytest_llmperf.slo.regression import DEFAULT_ALPHA, RegressionVerdict, StatCheckBase

__all__ = [
    "BH",
    "DEFAULT_POWER",
    "HOLM",
    "benjamini_hochberg",
    "bh_adjusted",
    "holm",
    "holm_adjusted",
    "judge_family",
    "minimal_detectable_change",
    "multiple_comparisons_line",
    "session_comparisons",
    "session_summary",
    "test_level",
]

HOLM = "holm"
BH = "benjamini-hochberg"
DEFAULT_POWER = 0.8
_NORMAL = NormalDist()

C = TypeVar("C", bound=StatCheckBase)


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values (in the input's order): ``max_{j <= i} (m − j + 1) p_(j)``,
    capped at 1; ``holm(p, alpha)[i]`` is ``adjusted[i] <= alpha``."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def bh_adjusted(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg's adjusted p-values (q-values, in the input's order):
    ``min_{j >= i} m p_(j) / j``, capped at 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, m * p_values[i] / (rank + 1))
        out[i] = min(1.0, running)
    return out


def holm(p_values: Sequence[float], alpha: float = DEFAULT_ALPHA) -> list[bool]:
    """Which hypotheses Holm's step-down rejects at family-wise level ``alpha``."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [False] * m
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (m - rank):
            break
        out[i] = True
    return out


def benjamini_hochberg(p_values: Sequence[float], alpha: float = DEFAULT_ALPHA) -> list[bool]:
    """Which hypotheses Benjamini–Hochberg's step-up rejects at false discovery rate
    ``alpha``."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    k = 0
    for rank, i in enumerate(order, start=1):
        if p_values[i] <= rank * alpha / m:
            k = rank
    out = [False] * m
    for i in order[:k]:
        out[i] = True
    return out


def test_level(alpha: float, tests: int) -> float:
    """Each test's share of the session's ``alpha``: ``alpha / tests`` (at least one)."""
    return alpha / max(1, tests)


test_level.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def minimal_detectable_change(
    spread: float | None, level: float, threshold: float, power: float = DEFAULT_POWER
) -> float | None:
    """The smallest true relative change caught with probability ``power`` by a one-sided
    test at ``level`` that also needs the observed change beyond ``threshold``, when the
    observed change is normal with standard deviation ``spread`` (None: not known)."""
    if spread is None or not math.isfinite(spread) or not 0 < level < 1:
        return None
    needed = max(threshold, _NORMAL.inv_cdf(1 - level) * spread)
    return round(needed + _NORMAL.inv_cdf(power) * spread, 6)


def judge_family(checks: Sequence[C], level: float) -> list[C]:
    """A test's comparisons judged together by Holm at ``level`` (its share of the
    session's alpha): a ``regressed`` or ``improved`` verdict stands only when Holm
    rejects its p-value; each check gets its ``level`` (Bonferroni: ``level / m``), its
    ``mde`` at that level and ``alone`` (its verdict judged by itself). Checks without a
    p-value (inconclusive ones, server statistics judged by threshold) are left out of
    the family and unchanged."""
    family = [i for i, c in enumerate(checks) if getattr(c, "p_value", None) is not None]
    m = len(family)
    rejected = holm([float(getattr(checks[i], "p_value")) for i in family], level)  # noqa: B009
    out = list(checks)
    for i, keep in zip(family, rejected, strict=True):
        c = checks[i]
        each = level / m
        changes: dict[str, Any] = {
            "alone": c.verdict.value,
            "level": each,
            "mde": minimal_detectable_change(
                getattr(c, "spread", None), each, float(getattr(c, "threshold", 0.0))
            ),
        }
        significant = c.verdict in (RegressionVerdict.REGRESSED, RegressionVerdict.IMPROVED)
        if significant and not keep:
            reason = getattr(c, "reason", "")
            note = (
                f"{c.verdict.value} alone, but p={getattr(c, 'p_value'):.3g} is not "  # noqa: B009
                f"significant by Holm over this test's {m} comparison(s) at {level:.3g}"
            )
            changes["verdict"] = RegressionVerdict.UNCHANGED
            changes["reason"] = f"{reason}; {note}" if reason else note
        out[i] = replace(c, **changes)  # type: ignore[type-var]
    return out


def session_summary(
    checks: Sequence[Mapping[str, Any]],
    *,
    alpha: float = DEFAULT_ALPHA,
    tests: int = 1,
) -> dict[str, Any]:
    """The session's comparisons (check dicts, baseline and A/B) under both corrections
    at ``alpha``: how many there were, how many the tests' own Holm-within-test at
    ``alpha / tests`` rejected, and which would survive Holm and BH over the session.

    A comparison counts as rejected by a session-wide method when the method rejects
    its p-value and its other conditions held (``alone`` is regressed or improved)."""
    family = [c for c in checks if c.get("p_value") is not None]
    p_values = [float(c["p_value"]) for c in family]

    def survivors(rejected: Sequence[bool]) -> list[str]:
        return [
            _label(c)
            for c, r in zip(family, rejected, strict=True)
            if r and c.get("alone", c.get("verdict")) in ("regressed", "improved")
        ]

    regressed = [_label(c) for c in family if c.get("verdict") == "regressed"]
    improved = [_label(c) for c in family if c.get("verdict") == "improved"]
    return {
        "method": HOLM,
        "alpha": alpha,
        "tests": tests,
        "test_level": test_level(alpha, tests),
        "how": (
            f"each test's comparisons by Holm at alpha/tests = {test_level(alpha, tests):.3g} "
            f"(Bonferroni across the {tests} test(s) that can measure, Holm within): "
            f"family-wise false-failure rate <= {alpha:g}"
        ),
        "comparisons": len(family),
        "rejected": len(regressed) + len(improved),
        "regressed": regressed,
        "improved": improved,
        "session_holm": survivors(holm(p_values, alpha)),
        "session_bh": survivors(benjamini_hochberg(p_values, alpha)),
        "alone": sum(1 for c in family if c.get("alone") in ("regressed", "improved")),
    }


def session_comparisons(
    tests: Iterable[tuple[str, Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]],
) -> tuple[list[dict[str, Any]], int]:
    """Every comparison of the session as a check dict naming its test (``test_id``), from
    each test's ``(nodeid, baseline checks, runs)`` (a run's A/B checks in its
    ``reference``); and how many tests the alpha was split among, read back from a
    judged check's ``level`` (``alpha / tests / m``; 0 when none says)."""
    out: list[dict[str, Any]] = []
    split = 0
    for nodeid, baseline, runs in tests:
        family = [dict(c) for c in baseline if c.get("p_value") is not None]
        for run in runs:
            family += [
                dict(c)
                for c in (run.get("reference") or {}).get("checks") or ()
                if c.get("p_value") is not None
            ]
        for c in family:
            c["test_id"] = nodeid
            if c.get("level") and not split:
                split = round(DEFAULT_ALPHA / (float(c["level"]) * len(family)))
        out += family
    return out, split


def multiple_comparisons_line(summary: Mapping[str, Any]) -> str:
    """The terminal's line: ``llmperf: 200 baseline/A/B comparisons of 10 test(s), each
    test's by Holm at 0.001 (session alpha 0.01): 1 regressed; session-wide Holm would
    keep 1, Benjamini-Hochberg 1 (alone at 0.01: 3)``."""
    regressed, improved = len(summary["regressed"]), len(summary["improved"])
    found = f"{regressed} regressed" + (f", {improved} improved" if improved else "")
    return (
        f"llmperf: {summary['comparisons']} baseline/A/B comparison(s) of "
        f"{summary['tests']} test(s), each test's by Holm at {summary['test_level']:.3g} "
        f"(session alpha {summary['alpha']:g}, family-wise): {found}; session-wide Holm "
        f"would keep {len(summary['session_holm'])}, Benjamini-Hochberg "
        f"{len(summary['session_bh'])} (each alone at {summary['alpha']:g}: "
        f"{summary['alone']})"
    )


def _label(c: Mapping[str, Any]) -> str:
    where = c.get("test_id") or ""
    return f"{where}::{c.get('name')} [{c.get('run')}]" if where else f"{c.get('name')}"
