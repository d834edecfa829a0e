"""Service-level objectives: parsing, rulesets, verdicts, session aggregation, regression."""

from pytest_llmperf.slo.expressions import Slo, parse_slo
from pytest_llmperf.slo.regression import RegressionCheck, Thresholds, compare_accumulators
from pytest_llmperf.slo.rulesets import BUILTIN_RULESETS, Ruleset, load_ruleset
from pytest_llmperf.slo.session import SessionGroup, evaluate_session, group_runs
from pytest_llmperf.slo.verdicts import (
    SloVerdict,
    evaluate,
    evaluate_runs,
    min_samples,
    request_limits,
)

__all__ = [
    "BUILTIN_RULESETS",
    "RegressionCheck",
    "Ruleset",
    "SessionGroup",
    "Slo",
    "SloVerdict",
    "Thresholds",
    "compare_accumulators",
    "evaluate",
    "evaluate_runs",
    "evaluate_session",
    "group_runs",
    "load_ruleset",
    "min_samples",
    "parse_slo",
    "request_limits",
]
