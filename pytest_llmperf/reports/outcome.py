"""What a test's verdicts mean for the test itself, and the message that says so.

The plugin maps the result onto pytest (``fail`` fails the test, an
``inconclusive`` one follows ``--llm-inconclusive``); the rules live here so
they can be read, and tested, without pytest:

- a test that declares SLOs but whose gated runs measured nothing fails (nothing was
  judged): it never called ``llm_loadgen.run()``, ran only ``gate=False`` runs (a
  sweep's or search's probes), or its gated runs completed no request
  (:func:`nothing_measured` says which, in the one line that starts the message);
- a violated SLO or a significant regression against the baseline fails;
- with a reference endpoint, a candidate significantly worse than the
  reference beyond the threshold (``ab`` checks, :mod:`pytest_llmperf.slo.paired`)
  fails, with both sides in the message;
- a gated run in which every request failed fails, even if its SLOs came out
  inconclusive (and its test's other gated runs completed requests): the server
  failed, and ``--llm-inconclusive=warn`` must not turn that into a pass;
- otherwise any inconclusive verdict makes the test inconclusive: an SLO's, or a
  baseline's (a run not compared: no baseline run, another experiment, samples too
  few ever to decide; not the notes, ``note_only``), each named with why.

The message of a failing or inconclusive test ends with the failed requests in the
server's words and the invalid outputs in the validator's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.reports.output_words import invalid_sample_lines
from pytest_llmperf.reports.table import (
    ab_table,
    error_sample_lines,
    format_value,
    regression_table,
    verdict_table,
    verdict_where,
)
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.paired import PairedCheck
from pytest_llmperf.slo.regression import RegressionCheck, RegressionVerdict
from pytest_llmperf.slo.verdicts import SloVerdict, Verdict
from pytest_llmperf.specs.slo import Slo

__all__ = ["NOTHING_MEASURED", "Outcome", "judge_test", "nothing_measured"]

NOTHING_MEASURED = "llm_slo declared but no gated run measured anything"


@dataclass(frozen=True)
class Outcome:
    """``kind`` is ``pass``, ``fail`` or ``inconclusive``; ``message`` explains the latter two."""

    kind: Verdict
    message: str = ""


def judge_test(
    nodeid: str,
    slos: Sequence[Slo],
    results: Sequence[RunResult],
    verdicts: Sequence[SloVerdict],
    checks: Sequence[RegressionCheck] = (),
    *,
    baseline: str = "",
    ab: Sequence[PairedCheck] = (),
    reference: str = "",
    runs: Sequence[Mapping[str, Any]] | None = None,
) -> Outcome:
    """The outcome of test ``nodeid``; ``baseline`` names the baseline compared against,
    ``ab`` are the A/B checks against the reference endpoint ``reference``; ``runs`` are
    ``results`` as report dicts where the caller has them already (else made here)."""
    unmeasured = nothing_measured(results) if slos else ""
    if unmeasured and not any(r.gated for r in results):
        return Outcome(Verdict.FAIL, f"{NOTHING_MEASURED}: {unmeasured}")
    failed = any(v.verdict is Verdict.FAIL for v in verdicts)
    regressed = any(c.verdict is RegressionVerdict.REGRESSED for c in checks)
    worse = any(c.verdict is RegressionVerdict.REGRESSED for c in ab)
    errors = _errors_block(results) + _invalid_block(results)
    if failed or regressed or worse:
        parts = []
        if failed:  # with "where the time went" of a failing latency SLO, from the run dicts
            dicts = list(runs) if runs is not None else [r.to_dict() for r in results]
            parts.append(f"{_headline(verdicts)}\n{verdict_table(verdicts, dicts)}")
        if regressed:
            parts.append(f"Regressed against baseline {baseline}:\n{regression_table(checks)}")
        if worse:
            where = f" {reference}" if reference else ""
            parts.append(f"Worse than the reference endpoint{where} (A/B):\n{ab_table(ab)}")
        return Outcome(Verdict.FAIL, "\n\n".join(parts) + errors)
    if unmeasured:  # gated runs, none of which completed a request
        return Outcome(Verdict.FAIL, f"{NOTHING_MEASURED}: {unmeasured}{errors}")
    dead = [r for r in results if r.gated and r.counts["issued"] and not r.counts["completed"]]
    if slos and dead:
        why = "; ".join(
            f"{r.label}: {r.counts['issued']} issued, 0 completed: "
            + ", ".join(f"{kind} x{n}" for kind, n in sorted(r.errors.items()))
            for r in dead
        )
        return Outcome(Verdict.FAIL, f"every request failed in {nodeid} ({why}){errors}")
    parts = []
    if any(v.verdict is Verdict.INCONCLUSIVE for v in verdicts):
        parts.append(f"SLO inconclusive in {nodeid}:\n{verdict_table(verdicts)}")
    unjudged = [
        c for c in checks if c.verdict is RegressionVerdict.INCONCLUSIVE and not c.note_only
    ]
    if unjudged:
        parts.append(_not_compared(nodeid, unjudged, baseline))
    if parts:
        return Outcome(Verdict.INCONCLUSIVE, "\n\n".join(parts) + errors)
    return Outcome(Verdict.PASS)


def nothing_measured(results: Sequence[RunResult]) -> str:
    """Why a test's gated runs measured nothing, in words (``""`` when one of them
    completed a request): no run, only ``gate=False`` runs, or gated runs that completed
    nothing (each with what became of its requests)."""
    gated = [r for r in results if r.gated]
    if not results:
        return "llm_loadgen.run() was never called"
    if not gated:
        labels = ", ".join(r.label for r in results)
        return f"its only runs were gate=False ({labels}), which are reported, not judged"
    if any(r.counts["completed"] for r in gated):
        return ""
    return "; ".join(_nothing_completed(r) for r in gated)


def _nothing_completed(run: RunResult) -> str:
    """``run0: 20 issued, 0 completed: every request failed (http_error x20)``."""
    issued = run.counts["issued"]
    if not issued:
        return f"{run.label}: no request was issued"
    what = [f"{kind} x{n}" for kind, n in sorted(run.errors.items())]
    if run.counts["cancelled"]:  # abandoned on purpose (cancel=): timed by no histogram
        what.append(f"cancelled x{run.counts['cancelled']}")
    why = f" ({', '.join(what)})" if what else ""
    failed = "every request failed" if run.counts["failed"] >= issued else "none completed"
    return f"{run.label}: {issued} issued, 0 completed: {failed}{why}"


def _not_compared(nodeid: str, checks: Sequence[RegressionCheck], baseline: str) -> str:
    """Why a baseline judged nothing of ``nodeid``: every run or statistic not compared,
    the first on the message's first line (pytest's short summary shows it)."""
    lines = [
        f"[{c.run}] {c.reason}" if c.metric == "*" else f"[{c.run}] {c.name}: {c.reason}"
        for c in checks
    ]
    more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
    against = f"\ncompared with {baseline}" if baseline else ""
    rest = "".join(f"\n  {line}" for line in lines[1:])
    return f"baseline not compared in {nodeid}: {lines[0]}{more}{against}{rest}"


def _headline(verdicts: Sequence[SloVerdict]) -> str:
    """The message's first line, which pytest's short summary shows after the node id
    (so it names the violated SLO and what was observed, not the test again)."""
    bad = [v for v in verdicts if v.verdict is Verdict.FAIL]
    first = bad[0]
    where = f" [{place}]" if (place := verdict_where(first.to_dict())) else ""
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    observed = format_value(first.observed, first.unit)
    return f"SLO violated: {first.expr}{where}, observed {observed}{more}"


def _errors_block(results: Sequence[RunResult]) -> str:
    """The failed requests' own messages, so a failure explains itself."""
    lines = [
        line
        for r in results
        for line in error_sample_lines(r.error_samples, run=r.label if len(results) > 1 else "")
    ]
    return "\n\nFailed requests, in the server's words:\n" + "\n".join(lines) if lines else ""


def _invalid_block(results: Sequence[RunResult]) -> str:
    """The invalid outputs' reasons in the validator's words, so a failing ``valid_rate``
    (or any failure in a run with invalid outputs) explains itself."""
    lines = [
        line
        for r in results
        if r.accumulator.invalid
        for line in invalid_sample_lines(r.invalid_samples, run=r.label if len(results) > 1 else "")
    ]
    return "\n\nInvalid outputs, in the validator's words:\n" + "\n".join(lines) if lines else ""
