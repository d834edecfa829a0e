"""Judging runs against SLOs: verdicts, session aggregation, regression against a baseline.

The SLOs themselves (expressions, rulesets, the per-request limits they
imply) are plain specs, parsed at collection time: :mod:`pytest_llmperf.specs`.
"""

from pytest_llmperf.slo.regression import RegressionCheck, Thresholds, compare_accumulators
from pytest_llmperf.slo.session import SessionGroup, evaluate_session, group_runs
from pytest_llmperf.slo.verdicts import (
    SloVerdict,
    evaluate,
    evaluate_runs,
    evaluate_stages,
    min_samples,
)

__all__ = [
    "RegressionCheck",
    "SessionGroup",
    "SloVerdict",
    "Thresholds",
    "compare_accumulators",
    "evaluate",
    "evaluate_runs",
    "evaluate_session",
    "evaluate_stages",
    "group_runs",
    "min_samples",
]
