"""The server process's metrics against a baseline's: ``startup.ready_s``, ``server.rss_max_mb``.

Each side has one value per run (the ``server_process`` block of the run, or of the
baseline's run with the same label): nothing to resample, so no p-value. The rule:

- *regressed* when the value grew by more than its threshold **and**, for the startup
  times, by more than :data:`STARTUP_FLOOR_S` (1 s) absolute: a 0.4 s server that
  takes 0.6 s is +50% and no news; *improved* the other way round; else unchanged;
- ``startup.ready_s`` and ``startup.first_token_s`` are compared by default, wherever
  both sides have them (a side without: no check, not a note), at
  :data:`STARTUP_THRESHOLD` (25%: startup varies more than steady-state latency)
  unless ``--llm-baseline-threshold`` names them (``startup.ready_s=50%``); the
  session's bare threshold (``--llm-baseline-threshold=15%``) does not apply to them;
- the resources (``server.rss_max_mb``, ``server.rss_growth_mb``,
  ``server.gpu_mem_max_mb``, ``server.cpu_s``, ``server.cpu_ms_per_output_token``) only
  where named (``server.rss_max_mb=20%``); a side without the value is then an
  inconclusive check naming why;
- a baseline value at or below 0 against a larger current one (an RSS that did not grow
  before) is an inconclusive note: a change relative to 0 is undefined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmperf.slo.regression import RegressionCheck, Thresholds
from pytest_llmperf.slo.value_regression import not_compared, value_check
from pytest_llmperf.specs.process_names import PROCESS_METRICS, process_value

__all__ = ["STARTUP_FLOOR_S", "STARTUP_THRESHOLD", "compare_process"]

STARTUP_THRESHOLD = 0.25
STARTUP_FLOOR_S = 1.0
_HOW = "one value per side: a change beyond the threshold"
_HOW_STARTUP = f"{_HOW} and beyond {STARTUP_FLOOR_S:g} s"


def compare_process(
    baseline: Mapping[str, Any] | None,
    current: Mapping[str, Any] | None,
    thresholds: Thresholds | None = None,
    *,
    run: str = "",
    compared_with: str = "",
) -> list[RegressionCheck]:
    """One check per process metric :meth:`Thresholds.process_metrics` names; ``baseline``
    and ``current`` are the two runs' ``server_process`` blocks (None: the gate did not
    start that side's server)."""
    thresholds = thresholds or Thresholds()
    checks: list[RegressionCheck] = []
    for name in thresholds.process_metrics():
        metric = PROCESS_METRICS[name]
        named = name in thresholds.overrides
        limit = thresholds.overrides.get(name, STARTUP_THRESHOLD if metric.is_startup else 0.0)
        b, c = process_value(baseline, name), process_value(current, name)
        common: dict[str, Any] = {
            "metric": name,
            "stat": "",
            "threshold": limit,
            "run": run,
            "samples": (int(b is not None), int(c is not None)),
            "test": _HOW_STARTUP if metric.is_startup else _HOW,
            "compared_with": compared_with,
        }
        if b is None or c is None:
            if not named:  # a default comparison needs both sides
                continue
            side, block = ("the baseline", baseline) if b is None else ("this run", current)
            why = "the gate did not start its server" if block is None else "not measured"
            checks.append(not_compared(b, c, f"{side} has no {name} ({why})", **common))
            continue
        floor = STARTUP_FLOOR_S if metric.is_startup else 0.0
        checks.append(
            value_check(
                b,
                c,
                limit=limit,
                unit=metric.unit,
                floor=floor,
                floor_why="a start may vary by",
                digits=4,
                **common,
            )
        )
    return checks
