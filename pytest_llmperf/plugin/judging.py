"""Judging each test: SLO verdicts, baseline and A/B checks fail the test itself, and the
test's payload (runs, verdicts, states, JUnit properties) rides on its report.

Before the verdicts, each gated greedy run's outputs are compared with the other
side's (``output_match``: the baseline's or history's run, else the A/B reference's;
:mod:`pytest_llmperf.slo.output_match`), so an ``output_match`` SLO judges them.
"""

from __future__ import annotations

import warnings
from collections.abc import Generator
from typing import Any

import pytest

from pytest_llmperf.errors import (
    LlmPerfBlankWarning,
    LlmPerfInconclusiveWarning,
    LlmPerfTokenLengthWarning,
)
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.loadgen.server_watch import LOG_TAIL_LINES
from pytest_llmperf.options import InconclusivePolicy
from pytest_llmperf.plugin.base import PluginBase
from pytest_llmperf.plugin.markers import (
    GEN_KEY,
    INCONCLUSIVE_KEY,
    PAYLOAD_KEY,
    SPEC_KEY,
    marked_inconclusive,
)
from pytest_llmperf.reports.junit import (
    ab_properties,
    add_server_log,
    error_properties,
    junit_properties,
    regression_properties,
    run_properties,
    server_properties,
)
from pytest_llmperf.reports.outcome import judge_test, nothing_measured
from pytest_llmperf.reports.server_words import exit_failure, log_block, server_log
from pytest_llmperf.results.blank import all_blank_note
from pytest_llmperf.results.outputs import MatchedAgainst, SampleOutputs
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.multiplicity import judge_family, test_level
from pytest_llmperf.slo.output_match import OtherOutputs, judge_output_match
from pytest_llmperf.slo.regression import DEFAULT_ALPHA, RegressionCheck
from pytest_llmperf.slo.verdicts import SloVerdict, Verdict, evaluate_runs
from pytest_llmperf.specs.rulesets import Ruleset, load_ruleset


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


class JudgingPart(PluginBase):
    """After each test body: its SLO verdicts, baseline and A/B checks; the test's payload."""

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """How many collected tests can measure: the session's alpha is split among them
        (slo/multiplicity.py). Known here, before any test runs (xdist: on each worker,
        which collects the whole session)."""
        self.measuring_tests = sum(
            1 for item in session.items if "llm_loadgen" in getattr(item, "fixturenames", ())
        )

    def _judge_comparisons(
        self, checks: list[RegressionCheck], generator: LoadGenerator | None
    ) -> list[RegressionCheck]:
        """The test's baseline and A/B checks judged together: Holm at the test's share of
        the session's alpha (slo/multiplicity.py); the A/B checks replaced in place."""
        comparisons = list(getattr(generator, "comparisons", ()))
        ab = [c for comparison in comparisons for c in comparison.checks]
        if not checks and not ab:
            return checks
        level = test_level(DEFAULT_ALPHA, self.measuring_tests)
        judged = judge_family([*checks, *ab], level)
        start = len(checks)
        for comparison in comparisons:
            n = len(comparison.checks)
            comparison.checks = list(judged[start : start + n])
            start += n
        return list(judged[: len(checks)])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            result = yield
        except BaseException as exc:
            # Record what was measured even when the body raised; its error stands.
            self._judge(item, raise_failures=False)
            if isinstance(exc, KeyboardInterrupt) and PAYLOAD_KEY in item.stash:
                # pytest makes no report for an interrupted test: keep its partial runs here.
                self.data.add(item.nodeid, "interrupted", item.stash[PAYLOAD_KEY])
                self.data.interrupted = True
            if isinstance(exc, Exception) and (exited := _exit_failure(item)):
                # the server's death, not what the body made of it, is the test's failure
                body = f"{type(exc).__name__}: {exc}".splitlines()[0]
                pytest.fail(f"{exited}\n\n(the test body then raised {body})", pytrace=False)
            raise
        self._judge(item, raise_failures=True)
        return result

    def _judge(self, item: pytest.Item, *, raise_failures: bool) -> None:
        spec = item.stash.get(SPEC_KEY, None)
        generator = item.stash.get(GEN_KEY, None)
        results: list[RunResult] = generator.results if generator else []
        slos = spec.slos if spec else ()
        wanted = any(slo.metric == "output_match" for slo in slos)  # an SLO asks for it
        self._match_outputs(item.nodeid, results, generator, wanted=wanted)
        verdicts = evaluate_runs(
            slos,
            results,
            rulesets=self.rulesets_of(item),
            confidence=self.options.confidence,
        )
        checks: list[RegressionCheck] = []
        # said only where the verdict is ours: a body that raised or skipped keeps its own
        unmeasured = nothing_measured(results) if slos and raise_failures else ""
        if results or slos or generator is not None:  # every test that used llm_loadgen
            endpoint = self.endpoints.describe(generator.endpoint if generator else self.endpoint())
            if self.baseline is not None and results:
                self.check_comparability(endpoint)
                checks = self.baseline.compare(
                    item.nodeid,
                    results,
                    endpoint=endpoint,
                    thresholds=self.thresholds,
                    confidence=self.options.confidence,
                )
            checks = self._judge_comparisons(checks, generator)
            compared_with = (
                self.baseline.describe(item.nodeid)
                if checks and self.baseline is not None
                else None
            )
            payload = payload_for_test(
                endpoint, generator, results, verdicts, checks, compared_with, unmeasured
            )
            # a managed server that exited or failed requests: its log's tail in the report
            if log := server_log(payload["runs"], lambda path: _live_tail(generator, path)):
                payload["server_log"] = log
            item.stash[PAYLOAD_KEY] = payload
            props = payload["junit"]
            if self._junit_testcase_properties():
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
            baseline=self.baseline.describe(item.nodeid) if self.baseline else "",
            ab=[c for ab in getattr(generator, "comparisons", ()) for c in ab.checks],
            reference=self._reference.label if self._reference is not None else "",
            runs=item.stash[PAYLOAD_KEY]["runs"] if PAYLOAD_KEY in item.stash else None,
        )
        if exited := _exit_failure(item):  # whatever its SLOs said
            more = f"\n\n{outcome.message}" if outcome.kind != Verdict.PASS else ""
            pytest.fail(exited + more, pytrace=False)
        log = item.stash[PAYLOAD_KEY].get("server_log") if PAYLOAD_KEY in item.stash else None
        message = outcome.message + (f"\n\n{log_block(log)}" if log else "")
        if outcome.kind == Verdict.FAIL:
            pytest.fail(message, pytrace=False)
        if outcome.kind == Verdict.INCONCLUSIVE:
            policy = self._inconclusive_policy(item)
            if policy == InconclusivePolicy.FAIL:
                pytest.fail(message + "\n(--llm-inconclusive=warn|skip to relax)", pytrace=False)
            elif policy == InconclusivePolicy.SKIP:
                pytest.skip(message)
            else:
                warnings.warn(LlmPerfInconclusiveWarning(message), stacklevel=1)

    def _match_outputs(
        self,
        nodeid: str,
        results: list[RunResult],
        generator: LoadGenerator | None,
        *,
        wanted: bool = True,
    ) -> None:
        """``output_match`` of each gated run that kept greedy outputs (and was not
        matched yet: a payload re-judged after an error keeps its first)."""
        todo = [
            r
            for r in results
            if r.gated
            and r.accumulator.outputs
            and r.output_match is None
            and "output_match" not in r.output_notes
        ]
        if not todo:
            return
        endpoint: dict[str, Any] | None = None
        references = {
            c.run: c.reference for c in getattr(generator, "comparisons", ()) if c.reference
        }
        for result in todo:
            sides: list[OtherOutputs] = []
            if self.baseline is not None:
                if endpoint is None:
                    where = generator.endpoint if generator else self.endpoint()
                    endpoint = self.endpoints.describe(where)
                found = self.baseline.other_outputs(nodeid, result, endpoint)
                if found is not None:
                    sides.append(found)
            reference = references.get(result.label)
            if reference is not None:
                url = str(reference.endpoint.get("url") or "the reference endpoint")
                sides.append(
                    OtherOutputs(
                        reference.accumulator.outputs or SampleOutputs(),
                        MatchedAgainst.REFERENCE,
                        f"reference {url}",
                        "" if reference.accumulator.outputs else "the reference kept no outputs",
                    )
                )
            match, why = judge_output_match(result.accumulator.outputs, sides)
            result.output_match = match
            if match is None and (sides or wanted):
                # said where something was there to compare with, or the test asked: a
                # greedy run kept for output_consistency alone is not "not measured"
                result.output_notes["output_match"] = why

    def _inconclusive_policy(self, item: pytest.Item) -> InconclusivePolicy:
        """``--llm-inconclusive`` on the command line, else the test's marker, else the
        ``llm_inconclusive`` fixture (a directory's override), else the ini or default."""
        if self.config.getoption("llm_inconclusive", default=None) is not None:
            return self.options.inconclusive
        marked = marked_inconclusive(item)
        if marked is not None:
            return marked
        return InconclusivePolicy(item.stash.get(INCONCLUSIVE_KEY, self.options.inconclusive))

    def rulesets_of(self, item: pytest.Item) -> list[Ruleset]:
        """The rulesets named by ``llm_slo(ruleset=...)`` (their minimum samples and duration)."""
        out: list[Ruleset] = []
        for mark in item.iter_markers("llm_slo"):
            name = mark.kwargs.get("ruleset")
            if isinstance(name, str):
                if name not in self._rulesets:
                    self._rulesets[name] = load_ruleset(name, base_dir=self.config.rootpath)
                out.append(self._rulesets[name])
        return out

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
            self.data.add(report.nodeid, outcome, payload)
            xml = self._junit_xml()
            if xml is not None and not self._junit_testcase_properties():
                for name, value in payload.get("junit", []):
                    xml.add_global_property(f"{report.nodeid}::{name}", value)
            if xml is not None and payload.get("server_log"):
                add_server_log(xml, report, payload["server_log"])  # the case's system-err


def _exit_failure(item: pytest.Item) -> str:
    """The failure of a test a run of which saw its server exit (``""`` if none did)."""
    payload = item.stash.get(PAYLOAD_KEY, None)
    if payload is None:
        return ""
    return exit_failure(payload["runs"], payload.get("server_log"))


def _live_tail(generator: LoadGenerator | None, path: str) -> str | None:
    """The last lines, now, of the log at ``path`` of a server the test's generator (or
    its A/B reference) watched; None when neither wrote it."""
    for gen in (generator, getattr(generator, "reference", None)):
        server = getattr(gen, "server", None)
        if server is not None and str(server.log_path) == path:
            tail: str = server.log_tail(LOG_TAIL_LINES)
            return tail
    return None
