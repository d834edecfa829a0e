"""Plain spec types: what a test declares, parsed and validated before any request is sent.

The low layer the others import (the plugin's markers and options, the
load generator, the verdicts, the analyses, the methodology procedures); it
imports only :mod:`pytest_llmperf.errors`, :mod:`pytest_llmperf.tokens` and
:mod:`pytest_llmperf.workloads`, never a layer above it (tests/core/test_layers.py
checks). Nothing here sends, times or judges anything.

- :mod:`.load`: load patterns (``llm_load``) -> :class:`LoadSpec`
- :mod:`.run`: workload + load + stop conditions -> :class:`RunSpec`
- :mod:`.slo`: SLO expressions (``llm_slo``) -> :class:`Slo`, and the
  per-request limits they imply (:func:`request_limits`, for goodput)
- :mod:`.rulesets`: named SLO sets (built-in MLPerf limits or YAML) -> :class:`Ruleset`
- :mod:`.perf`: one test's markers together -> :class:`PerfSpec`
"""

from pytest_llmperf.specs.load import LOAD_PATTERNS, SAMPLE_ORDERS, LoadSpec
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.specs.rulesets import BUILTIN_RULESETS, Ruleset, load_ruleset
from pytest_llmperf.specs.run import DEFAULT_REQUESTS, RunSpec, check_extra_body
from pytest_llmperf.specs.slo import (
    LATENCY_SLO_METRICS,
    RATE_SLO_METRICS,
    STATS,
    Slo,
    parse_slo,
    request_limits,
)

__all__ = [
    "BUILTIN_RULESETS",
    "DEFAULT_REQUESTS",
    "LATENCY_SLO_METRICS",
    "LOAD_PATTERNS",
    "RATE_SLO_METRICS",
    "SAMPLE_ORDERS",
    "STATS",
    "LoadSpec",
    "PerfSpec",
    "Ruleset",
    "RunSpec",
    "Slo",
    "check_extra_body",
    "load_ruleset",
    "parse_slo",
    "request_limits",
]
