"""Service-level objectives: parsing, rulesets and verdicts."""

from pytest_llmperf.slo.expressions import Slo, parse_slo
from pytest_llmperf.slo.rulesets import BUILTIN_RULESETS, Ruleset, load_ruleset
from pytest_llmperf.slo.verdicts import (
    SloVerdict,
    evaluate,
    evaluate_runs,
    min_samples,
    request_limits,
)

__all__ = [
    "BUILTIN_RULESETS",
    "Ruleset",
    "Slo",
    "SloVerdict",
    "evaluate",
    "evaluate_runs",
    "load_ruleset",
    "min_samples",
    "parse_slo",
    "request_limits",
]
