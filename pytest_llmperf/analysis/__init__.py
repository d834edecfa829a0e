"""The methodology draft's analyses, as functions over run results and per-request rows.

Each returns a plain-JSON payload for ``llm_loadgen.attach()`` (``title``,
``kind`` table|curve, ``columns``, ``rows``; curves add ``x``/``y``) with its
headline numbers under their own keys. Per-request analyses take rows from
:func:`collect` (a load-generator observer with bounded memory).

Procedures that *run* load (sweeps, searches, warm-up, the multi-configuration
runs these comparisons read) are :mod:`pytest_llmperf.methodology`, a layer
above; the one exception is :func:`memory_pressure`, which drives the
generator it is given through ``run()`` without importing the load generator.
"""

from pytest_llmperf.analysis.collector import RequestCollector, RequestRow, collect
from pytest_llmperf.analysis.compare import (
    ConfigurationRuns,
    compare_table,
    guardrail_overhead,
    metric_value,
    prefix_cache_effectiveness,
)
from pytest_llmperf.analysis.fairness import class_fairness
from pytest_llmperf.analysis.latency import (
    DRAFT_INPUT_BUCKETS,
    itl_distribution,
    latency_results,
    ttft_by_input_length,
)
from pytest_llmperf.analysis.memory import PressureLevel, memory_pressure, memory_pressure_table
from pytest_llmperf.analysis.scaling import context_scaling
from pytest_llmperf.analysis.server_metrics import counter_deltas, parse_prometheus, scrape_metrics

__all__ = [
    "DRAFT_INPUT_BUCKETS",
    "ConfigurationRuns",
    "PressureLevel",
    "RequestCollector",
    "RequestRow",
    "class_fairness",
    "collect",
    "compare_table",
    "context_scaling",
    "counter_deltas",
    "guardrail_overhead",
    "itl_distribution",
    "latency_results",
    "memory_pressure",
    "memory_pressure_table",
    "metric_value",
    "parse_prometheus",
    "prefix_cache_effectiveness",
    "scrape_metrics",
    "ttft_by_input_length",
]
