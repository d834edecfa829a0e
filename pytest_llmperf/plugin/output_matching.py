"""``output_match``: each gated greedy run's outputs compared with the other side's.

The other side is the baseline's or history's run, else the A/B reference's
(:mod:`pytest_llmperf.slo.output_match` judges them); done before a test's verdicts
(:mod:`.judging`), so an ``output_match`` SLO judges the result.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.plugin.under_test import endpoint as session_endpoint
from pytest_llmperf.results.outputs import MatchedAgainst, SampleOutputs
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.output_match import OtherOutputs, judge_output_match

__all__ = ["match_outputs"]


def match_outputs(
    state: SessionState,
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
    references = {c.run: c.reference for c in getattr(generator, "comparisons", ()) if c.reference}
    for result in todo:
        sides: list[OtherOutputs] = []
        if state.baseline is not None:
            if endpoint is None:
                where = generator.endpoint if generator else session_endpoint(state)
                endpoint = state.endpoints.describe(where)
            found = state.baseline.other_outputs(nodeid, result, endpoint)
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
