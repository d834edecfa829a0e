"""Judging each test: SLO verdicts, baseline and A/B checks fail the test itself, and the
test's payload (runs, verdicts, states, JUnit properties) rides on its report.

Before the verdicts, each gated greedy run's outputs are compared with the other
side's (:mod:`.output_matching`), so an ``output_match`` SLO judges them. The
payload (:mod:`.payload`) is added to the session's data where its report is
logged, so the session data also forms under xdist.
"""

from __future__ import annotations

import warnings
from collections.abc import Generator

import pytest

from pytest_llmperf.errors import (
    LlmPerfBlankWarning,
    LlmPerfInconclusiveWarning,
    LlmPerfTokenLengthWarning,
)
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.options import InconclusivePolicy
from pytest_llmperf.plugin.junit_xml import junit_testcase_properties, junit_xml
from pytest_llmperf.plugin.markers import (
    GEN_KEY,
    INCONCLUSIVE_KEY,
    PAYLOAD_KEY,
    SPEC_KEY,
    marked_inconclusive,
)
from pytest_llmperf.plugin.output_matching import match_outputs
from pytest_llmperf.plugin.payload import exit_failure_of, live_tail, payload_for_test
from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.plugin.under_test import check_comparability
from pytest_llmperf.plugin.under_test import endpoint as session_endpoint
from pytest_llmperf.reports.junit import add_server_log
from pytest_llmperf.reports.outcome import judge_test, nothing_measured
from pytest_llmperf.reports.server_words import log_block, server_log
from pytest_llmperf.results.blank import all_blank_note
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.multiplicity import judge_family, test_level
from pytest_llmperf.slo.regression import DEFAULT_ALPHA, RegressionCheck
from pytest_llmperf.slo.verdicts import Verdict, evaluate_runs
from pytest_llmperf.specs.rulesets import Ruleset, load_ruleset

__all__ = ["JudgingHooks", "rulesets_of"]


class JudgingHooks:
    """After each test body: its SLO verdicts, baseline and A/B checks; the test's payload."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            result = yield
        except BaseException as exc:
            # Record what was measured even when the body raised; its error stands.
            judge(self.state, item, raise_failures=False)
            if isinstance(exc, KeyboardInterrupt) and PAYLOAD_KEY in item.stash:
                # pytest makes no report for an interrupted test: keep its partial runs here.
                self.state.data.add(item.nodeid, "interrupted", item.stash[PAYLOAD_KEY])
                self.state.data.interrupted = True
            if isinstance(exc, Exception) and (exited := exit_failure_of(item)):
                # the server's death, not what the body made of it, is the test's failure
                body = f"{type(exc).__name__}: {exc}".splitlines()[0]
                pytest.fail(f"{exited}\n\n(the test body then raised {body})", pytrace=False)
            raise
        judge(self.state, item, raise_failures=True)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "call" and PAYLOAD_KEY in item.stash:
            # An attribute of our own on pytest's report (xdist ships it to the controller
            # with the rest of the report's __dict__); TestReport does not declare it.
            report.llmperf = item.stash[PAYLOAD_KEY]  # type: ignore[attr-defined]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "llmperf", None)
        if report.when == "call" and payload is not None:
            outcome: str = report.outcome
            if hasattr(report, "wasxfail"):  # pytest reports xfail as skipped, xpass as passed
                outcome = "xfailed" if report.skipped else "xpassed"
            self.state.data.add(report.nodeid, outcome, payload)
            config = self.state.config
            xml = junit_xml(config)
            if xml is not None and not junit_testcase_properties(config):
                for name, value in payload.get("junit", []):
                    xml.add_global_property(f"{report.nodeid}::{name}", value)
            if xml is not None and payload.get("server_log"):
                add_server_log(xml, report, payload["server_log"])  # the case's system-err


def judge(state: SessionState, item: pytest.Item, *, raise_failures: bool) -> None:
    """The test's payload stashed; with ``raise_failures``, its verdict fails, skips or
    warns the test (a body that raised keeps its own error)."""
    spec = item.stash.get(SPEC_KEY, None)
    generator = item.stash.get(GEN_KEY, None)
    results: list[RunResult] = generator.results if generator else []
    slos = spec.slos if spec else ()
    wanted = any(slo.metric == "output_match" for slo in slos)  # an SLO asks for it
    match_outputs(state, item.nodeid, results, generator, wanted=wanted)
    verdicts = evaluate_runs(
        slos,
        results,
        rulesets=rulesets_of(state, item),
        confidence=state.options.confidence,
    )
    checks: list[RegressionCheck] = []
    baseline = state.baseline
    # said only where the verdict is ours: a body that raised or skipped keeps its own
    unmeasured = nothing_measured(results) if slos and raise_failures else ""
    if results or slos or generator is not None:  # every test that used llm_loadgen
        where = generator.endpoint if generator else session_endpoint(state)
        endpoint = state.endpoints.describe(where)
        if baseline is not None and results:
            check_comparability(state, endpoint)
            checks = baseline.compare(
                item.nodeid,
                results,
                endpoint=endpoint,
                thresholds=state.thresholds,
                confidence=state.options.confidence,
            )
        checks = _judge_comparisons(state, checks, generator)
        compared_with = baseline.describe(item.nodeid) if checks and baseline is not None else None
        payload = payload_for_test(
            endpoint, generator, results, verdicts, checks, compared_with, unmeasured
        )
        # a managed server that exited or failed requests: its log's tail in the report
        if log := server_log(payload["runs"], lambda path: live_tail(generator, path)):
            payload["server_log"] = log
        item.stash[PAYLOAD_KEY] = payload
        props = payload["junit"]
        if junit_testcase_properties(state.config):
            item.user_properties.extend(props)
        for r in results:
            for warning in r.token_lengths["warnings"]:
                warnings.warn(LlmPerfTokenLengthWarning(f"{r.label}: {warning}"), stacklevel=1)
            if blank := all_blank_note(r.counts):
                warnings.warn(LlmPerfBlankWarning(f"{r.label}: {blank}"), stacklevel=1)
    if not raise_failures:
        return
    outcome = judge_test(
        item.nodeid,
        slos,
        results,
        verdicts,
        checks,
        baseline=baseline.describe(item.nodeid) if baseline else "",
        ab=[c for ab in getattr(generator, "comparisons", ()) for c in ab.checks],
        reference=state.reference.label if state.reference is not None else "",
        runs=item.stash[PAYLOAD_KEY]["runs"] if PAYLOAD_KEY in item.stash else None,
    )
    if exited := exit_failure_of(item):  # whatever its SLOs said
        more = f"\n\n{outcome.message}" if outcome.kind != Verdict.PASS else ""
        pytest.fail(exited + more, pytrace=False)
    log = item.stash[PAYLOAD_KEY].get("server_log") if PAYLOAD_KEY in item.stash else None
    message = outcome.message + (f"\n\n{log_block(log)}" if log else "")
    if outcome.kind == Verdict.FAIL:
        pytest.fail(message, pytrace=False)
    if outcome.kind == Verdict.INCONCLUSIVE:
        policy = _inconclusive_policy(state, item)
        if policy == InconclusivePolicy.FAIL:
            pytest.fail(message + "\n(--llm-inconclusive=warn|skip to relax)", pytrace=False)
        elif policy == InconclusivePolicy.SKIP:
            pytest.skip(message)
        else:
            warnings.warn(LlmPerfInconclusiveWarning(message), stacklevel=1)


def _judge_comparisons(
    state: SessionState, checks: list[RegressionCheck], generator: LoadGenerator | None
) -> list[RegressionCheck]:
    """The test's baseline and A/B checks judged together: Holm at the test's share of
    the session's alpha (slo/multiplicity.py); the A/B checks replaced in place."""
    comparisons = list(getattr(generator, "comparisons", ()))
    ab = [c for comparison in comparisons for c in comparison.checks]
    if not checks and not ab:
        return checks
    level = test_level(DEFAULT_ALPHA, state.measuring_tests)
    judged = judge_family([*checks, *ab], level)
    start = len(checks)
    for comparison in comparisons:
        n = len(comparison.checks)
        comparison.checks = list(judged[start : start + n])
        start += n
    return list(judged[: len(checks)])


def _inconclusive_policy(state: SessionState, item: pytest.Item) -> InconclusivePolicy:
    """``--llm-inconclusive`` on the command line, else the test's marker, else the
    ``llm_inconclusive`` fixture (a directory's override), else the ini or default."""
    if state.config.getoption("llm_inconclusive", default=None) is not None:
        return state.options.inconclusive
    marked = marked_inconclusive(item)
    if marked is not None:
        return marked
    return InconclusivePolicy(item.stash.get(INCONCLUSIVE_KEY, state.options.inconclusive))


def rulesets_of(state: SessionState, item: pytest.Item) -> list[Ruleset]:
    """The rulesets named by ``llm_slo(ruleset=...)`` (their minimum samples and duration),
    each loaded once per session."""
    out: list[Ruleset] = []
    for mark in item.iter_markers("llm_slo"):
        name = mark.kwargs.get("ruleset")
        if isinstance(name, str):
            if name not in state.rulesets:
                state.rulesets[name] = load_ruleset(name, base_dir=state.config.rootpath)
            out.append(state.rulesets[name])
    return out
