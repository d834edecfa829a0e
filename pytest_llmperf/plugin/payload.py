"""One test's payload: what its report carries to the session (also across xdist).

Built after the test body by :mod:`.judging`, stashed on the item
(``PAYLOAD_KEY``), put on the call report (``report.llmperf``) and added to
the session's data where the report is logged. For the session report it is
:func:`payload_for_test`.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.loadgen.server_watch import LOG_TAIL_LINES
from pytest_llmperf.plugin.markers import PAYLOAD_KEY
from pytest_llmperf.reports.junit import (
    ab_properties,
    error_properties,
    junit_properties,
    regression_properties,
    run_properties,
    server_properties,
)
from pytest_llmperf.reports.server_words import exit_failure
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.regression import RegressionCheck
from pytest_llmperf.slo.verdicts import SloVerdict

__all__ = ["exit_failure_of", "live_tail", "payload_for_test"]


def payload_for_test(
    endpoint: dict[str, Any],
    generator: LoadGenerator | None,
    results: list[RunResult],
    verdicts: list[SloVerdict],
    checks: list[RegressionCheck],
    compared_with: str | None,
    unmeasured: str = "",
) -> dict[str, Any]:
    """What one test's report carries to the session (also across xdist): its endpoint,
    runs (with their A/B reference, if any), SLO verdicts, lossless accumulator states,
    analyses, baseline checks, why its SLOs judged nothing (``unmeasured``:
    :func:`~pytest_llmperf.reports.outcome.nothing_measured`) and JUnit properties (each
    run's counts and key figures among them)."""
    comparisons = list(getattr(generator, "comparisons", ()))
    runs = [r.to_dict() for r in results]
    props = (
        junit_properties(verdicts)
        + run_properties(runs)
        + regression_properties(checks)
        + ([("llm_baseline.compared_with", compared_with)] if compared_with is not None else [])
        + ab_properties(comparisons)
        + error_properties((r.label, r.error_samples) for r in results)
        + server_properties(runs)
        + ([("llm_nothing_measured", unmeasured)] if unmeasured else [])
    )
    payload: dict[str, Any] = {
        "endpoint": endpoint,
        "runs": runs,
        "slos": [v.to_dict() for v in verdicts],
        "states": [r.accumulator.to_state() for r in results],
        "analyses": list(generator.analyses) if generator else [],
        "baseline": [c.to_dict() for c in checks],
        "junit": props,
    }
    if unmeasured:
        payload["nothing_measured"] = unmeasured
    by_run = {c.run: c for c in comparisons}  # --llm-reference-endpoint: A/B runs
    for run in payload["runs"]:
        if run["label"] in by_run:
            run["reference"] = by_run.pop(run["label"]).to_dict()
    return payload


def exit_failure_of(item: pytest.Item) -> str:
    """The failure of a test a run of which saw its server exit (``""`` if none did)."""
    payload = item.stash.get(PAYLOAD_KEY, None)
    if payload is None:
        return ""
    return exit_failure(payload["runs"], payload.get("server_log"))


def live_tail(generator: LoadGenerator | None, path: str) -> str | None:
    """The last lines, now, of the log at ``path`` of a server the test's generator (or
    its A/B reference) watched; None when neither wrote it."""
    for gen in (generator, getattr(generator, "reference", None)):
        server = getattr(gen, "server", None)
        if server is not None and str(server.log_path) == path:
            tail: str = server.log_tail(LOG_TAIL_LINES)
            return tail
    return None
