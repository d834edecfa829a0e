"""The methodology's procedures: sweeps, searches, warm-up and multi-configuration runs.

The IETF LLM-benchmarking draft's tests that need *several* runs, built on
one configured :class:`~pytest_llmperf.loadgen.generator.LoadGenerator`
(so every run has the session's workers, event logs, scale, tokenizer and
timeouts). This package sits above :mod:`pytest_llmperf.loadgen`,
:mod:`pytest_llmperf.slo` (a search judges its probes) and
:mod:`pytest_llmperf.analysis` (per-request rows, comparison tables); none
of them imports it.

- :mod:`.sweep`: latency-vs-load curve, knee and saturation
- :mod:`.search`: ``max_rate`` / ``max_concurrency`` under the SLOs
- :mod:`.warm_up`: warm-up with verification probes
- :mod:`.configurations`: the same workload against several endpoints (A/B)
- :mod:`.llm_loadgen`: :class:`LlmLoadgen`, the ``llm_loadgen`` fixture's
  object, with the procedures as methods
"""

from pytest_llmperf.methodology.configurations import MIN_REPETITIONS, run_configurations
from pytest_llmperf.methodology.llm_loadgen import LlmLoadgen
from pytest_llmperf.methodology.search import SearchResult, max_concurrency, max_rate
from pytest_llmperf.methodology.sweep import (
    SweepCurve,
    SweepPoint,
    find_knee,
    find_saturation,
    latency_sweep,
)
from pytest_llmperf.methodology.warm_up import WarmupReport, consecutive_variation, warm_up

__all__ = [
    "MIN_REPETITIONS",
    "LlmLoadgen",
    "SearchResult",
    "SweepCurve",
    "SweepPoint",
    "WarmupReport",
    "consecutive_variation",
    "find_knee",
    "find_saturation",
    "latency_sweep",
    "max_concurrency",
    "max_rate",
    "run_configurations",
    "warm_up",
]
