"""Multi-configuration runs: the same workload against several endpoints, interleaved.

The draft's multi-system guidelines: the same workload (same requests, same
order, same seed: the test's declared workload, replayed) runs against each
configuration, repeated at least 3 times and interleaved (A, B, A, B, ...)
so slow drifts of the machine hit every configuration alike. The statistics
over the result (:func:`~pytest_llmperf.analysis.compare.compare_table`,
:func:`~pytest_llmperf.analysis.compare.guardrail_overhead`,
:func:`~pytest_llmperf.analysis.compare.prefix_cache_effectiveness`) are
pure functions in :mod:`pytest_llmperf.analysis`; this module only runs.

Every other configuration runs through
:meth:`~pytest_llmperf.loadgen.generator.LoadGenerator.for_endpoint`, so it
has the session's workers, event logs, scale, tokenizer and timeouts, and
its runs are kept in the test's reports, exactly like the endpoint under test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Unpack

from pytest_llmperf.analysis.collector import RequestCollector
from pytest_llmperf.analysis.compare import ConfigurationRuns
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.specs.run import RunOverrides

__all__ = ["MIN_REPETITIONS", "run_configurations"]

MIN_REPETITIONS = 3


async def run_configurations(
    gen: LoadGenerator,
    endpoints: Mapping[str, Endpoint | str | None],
    *,
    repetitions: int = MIN_REPETITIONS,
    **overrides: Unpack[RunOverrides],
) -> ConfigurationRuns:
    """Run the test's workload against each configuration ``repetitions`` times, interleaved.

    ``endpoints`` maps a configuration name to a URL or :class:`Endpoint`
    (``None`` = the endpoint under test). Every run is kept in the test's
    report, ungated, labelled ``"<name> rep <i>"``.
    """
    if len(endpoints) < 2:
        raise LlmPerfUsageError("a comparison needs at least two configurations")
    if repetitions < MIN_REPETITIONS:
        raise LlmPerfUsageError(
            f"the methodology asks for >= {MIN_REPETITIONS} repetitions, got {repetitions!r}"
        )
    generators = {
        name: gen if target is None else gen.for_endpoint(target)
        for name, target in endpoints.items()
    }
    out = ConfigurationRuns({n: [] for n in endpoints}, {n: [] for n in endpoints})
    for rep in range(1, repetitions + 1):
        for name, runner in generators.items():
            collector = RequestCollector()
            with collector.observing(runner):
                result = await runner.run(gate=False, label=f"{name} rep {rep}", **overrides)
            out.results[name].append(result)
            out.rows[name].append(collector.rows)
    return out
