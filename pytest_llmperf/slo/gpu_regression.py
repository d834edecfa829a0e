"""The GPUs' figures against a baseline's: ``energy_per_output_token_j``, ``gpu.power_w.mean``.

Each side has one value per run (the run's ``gpu`` block; the baseline file's run with
the same label, or the median over the history's comparable runs): nothing to resample,
so no p-value, as for the server process (:mod:`.startup_regression`). Compared only
where ``--llm-baseline-threshold`` names them
(``--llm-baseline-threshold=energy_per_output_token_j=10%,gpu.power_w.mean=5%``): a
GPU's draw moves with its clocks, temperature and neighbours, so what is worth gating,
and by how much, is the user's call; the bare threshold does not apply to them.

*Higher is worse* for every one of them, ``gpu.util`` included: the test fixes the load,
so the same work drawing more power, more energy per token, more memory, a hotter GPU or
a busier one (less headroom left for more load) is the regression; *regressed* when the
value grew by more than its threshold, *improved* when it fell by more, else unchanged.

Not compared, with why (an inconclusive check of the test, which follows
``--llm-inconclusive``): a side without the value (no GPU read there, no energy counter,
no output tokens). A baseline of 0 against a larger value now is a note: a change
relative to 0 is undefined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmperf.slo.regression import RegressionCheck, Thresholds
from pytest_llmperf.slo.value_regression import not_compared, value_check
from pytest_llmperf.specs.gpu_names import GPU_METRICS

__all__ = ["compare_gpu"]

_HOW = "one value per side: a change beyond the threshold (higher is worse)"


def compare_gpu(
    baseline: Mapping[str, float] | None,
    current: Mapping[str, float] | None,
    thresholds: Thresholds | None = None,
    *,
    run: str = "",
    compared_with: str = "",
) -> list[RegressionCheck]:
    """One check per GPU figure :meth:`Thresholds.gpu_metrics` names; ``baseline`` and
    ``current`` are the two runs' GPU values by name
    (:func:`~pytest_llmperf.specs.gpu_names.gpu_values`; None: no GPU read on that side)."""
    thresholds = thresholds or Thresholds()
    checks: list[RegressionCheck] = []
    for name in thresholds.gpu_metrics():
        limit = thresholds.overrides[name]
        b, c = (None if side is None else side.get(name) for side in (baseline, current))
        common: dict[str, Any] = {
            "metric": name,
            "stat": "",
            "threshold": limit,
            "run": run,
            "samples": (int(b is not None), int(c is not None)),
            "test": _HOW,
            "compared_with": compared_with,
        }
        if b is None or c is None:
            side, values = ("the baseline", baseline) if b is None else ("this run", current)
            why = "no GPU read" if values is None else "not measured"
            checks.append(not_compared(b, c, f"{side} has no {name} ({why})", **common))
            continue
        checks.append(value_check(b, c, limit=limit, unit=GPU_METRICS[name].unit, **common))
    return checks
