"""The output SLOs (valid_rate, output_match, output_consistency), per-model verdicts
and the comparison of greedy outputs, on hand-built runs."""

from __future__ import annotations

import base64

import pytest

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.results import MetricsAccumulator
from pytest_llmperf.results.outputs import OutputMatch, SampleOutputs
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.output_match import (
    NO_OTHER_SIDE,
    OtherOutputs,
    compare_outputs,
    judge_output_match,
    mismatch_text,
    parting_position,
)
from pytest_llmperf.slo.verdicts import Verdict, evaluate, evaluate_runs
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.specs.rulesets import ruleset_from_mapping
from pytest_llmperf.specs.slo import parse_slo

MS = 1_000_000


def marks(*pieces: int) -> str:
    return base64.b64encode(b"".join(p.to_bytes(2, "big") for p in pieces)).decode()


def outputs(**by_index: tuple[str, str]) -> SampleOutputs:
    out = SampleOutputs()
    for key, (digest, mark) in by_index.items():
        out.add(int(key.lstrip("s")), digest, 3, mark)
    return out


def run_with(*records: RequestRecord, label: str = "run0") -> RunResult:
    acc = MetricsAccumulator()
    for r in records:
        acc.add(r)
    return RunResult({}, {}, {}, acc, label=label)


def rec(index: int, *, model: str = "", ttft_ms: int = 10, invalid: str = "") -> RequestRecord:
    r = RequestRecord(index=index, t_sched=10_000 * MS + index * MS)
    r.t_send = r.t_sched
    r.t_first = r.t_out = r.t_sched + ttft_ms * MS
    r.t_last = r.t_end = r.t_first + 20 * MS
    r.token_events = 3
    r.gaps_ns = [10 * MS, 10 * MS]
    r.model = model
    r.output_checked = True
    r.invalid = invalid
    r.invalid_detail = "$.name: 'x' is too long" if invalid else ""
    return r


# -- grammar -------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["valid_rate", "output_match", "output_consistency"])
def test_output_metrics_are_fractions(metric: str) -> None:
    slo = parse_slo(f"{metric} >= 99%")
    assert (slo.metric, slo.stat, slo.unit, slo.target) == (metric, None, "fraction", 0.99)
    assert parse_slo(f"{metric} >= 0.5").target == 0.5
    with pytest.raises(LlmPerfUsageError, match="bad unit"):
        parse_slo(f"{metric} >= 99ms")
    with pytest.raises(LlmPerfUsageError, match="takes no statistic"):
        parse_slo(f"{metric}.p99 >= 99%")


def test_per_model_is_a_marker_keyword() -> None:
    spec = PerfSpec.from_markers(
        None, None, [(("ttft.p99 < 500ms",), {"per_model": True}), (("valid_rate >= 1",), {})]
    )
    assert [s.per_model for s in spec.slos] == [True, False]
    with pytest.raises(LlmPerfUsageError, match="per_model"):
        PerfSpec.from_markers(None, None, [(("ttft.p99 < 500ms",), {"per_model": "yes"})])
    with pytest.raises(LlmPerfUsageError, match="per_model="):
        PerfSpec.from_markers(None, None, [(("ttft.p99 < 500ms",), {"per_models": True})])


def test_a_ruleset_may_target_the_output_metrics() -> None:
    ruleset = ruleset_from_mapping(
        {"name": "outputs", "targets": {"valid_rate": "99%"}}, source="x"
    )
    assert [s.expr for s in ruleset.slos] == ["valid_rate >= 99%"]


# -- valid_rate ------------------------------------------------------------------


def test_valid_rate_is_judged_on_checked_outputs() -> None:
    run = run_with(rec(0), rec(1), rec(2), rec(3, invalid="schema"))
    verdict = evaluate(parse_slo("valid_rate >= 100%"), run)
    assert verdict.verdict is Verdict.FAIL and verdict.observed == 0.75 and verdict.samples == 4
    assert "1 of 4 invalid" in verdict.reason and "too long" in verdict.reason
    assert evaluate(parse_slo("valid_rate >= 75%"), run).verdict is Verdict.PASS


def test_valid_rate_without_checked_outputs_is_inconclusive() -> None:
    r = rec(0)
    r.output_checked = False
    verdict = evaluate(parse_slo("valid_rate >= 100%"), run_with(r))
    assert verdict.verdict is Verdict.INCONCLUSIVE and "no completed output was checked" in (
        verdict.reason
    )


def test_valid_rate_does_not_care_whether_the_generator_kept_up() -> None:
    run = run_with(rec(0))
    run.self_check = {"generator_bound": True, "reasons": ["lag"]}
    assert evaluate(parse_slo("valid_rate >= 100%"), run).verdict is Verdict.PASS


# -- comparing outputs -------------------------------------------------------------


def test_parting_position_is_the_first_differing_token_event() -> None:
    assert parting_position(marks(1, 2, 3), marks(1, 2, 4)) == 2
    assert parting_position(marks(1, 2, 3), marks(9)) == 0
    assert parting_position(marks(1, 2), marks(1, 2, 3)) == 2  # the shorter ended there
    assert parting_position(marks(1, 2), marks(1, 2)) is None
    assert parting_position("", marks(1)) is None
    assert parting_position("not base64!", marks(1)) is None


def test_compare_outputs_counts_equal_digests_over_common_samples() -> None:
    mine = outputs(s0=("a", marks(1, 2)), s1=("b", marks(1, 2, 3)), s2=("c", marks(5)))
    other = outputs(s0=("a", marks(1, 2)), s1=("x", marks(1, 7, 3)), s9=("z", ""))
    match = compare_outputs(mine, other, "baseline", "baseline b.json")
    assert match == OutputMatch(
        share=0.5,
        compared=2,
        mismatches=[{"index": 1, "position": 1}],
        against="baseline",
        mismatched=1,
        compared_with="baseline b.json",
    )
    assert compare_outputs(mine, outputs(s7=("a", "")), "baseline") is None
    assert "sample 1 from token 1" in mismatch_text(match)


def test_mismatches_are_listed_up_to_twenty_and_all_counted() -> None:
    mine = SampleOutputs()
    other = SampleOutputs()
    for i in range(30):
        mine.add(i, "a", 1, marks(i))
        other.add(i, "b", 1, marks(i, 1))
    match = compare_outputs(mine, other, "reference")
    assert match is not None
    assert match.mismatched == 30 and len(match.mismatches) == 20 and match.share == 0.0


def test_the_first_side_with_outputs_in_common_wins() -> None:
    mine = outputs(s0=("a", ""), s1=("b", ""))
    empty = OtherOutputs(SampleOutputs(), "baseline", "b.json", "no baseline for t [run0]")
    disjoint = OtherOutputs(outputs(s5=("a", "")), "history", "h")
    reference = OtherOutputs(outputs(s0=("a", ""), s1=("c", "")), "reference", "ref")
    match, why = judge_output_match(mine, [empty, disjoint, reference])
    assert match is not None and match.against == "reference" and match.share == 0.5
    assert why == ""
    match, why = judge_output_match(mine, [empty])
    assert match is None and why.startswith(NO_OTHER_SIDE) and "no baseline for t" in why
    match, why = judge_output_match(SampleOutputs(), [reference])
    assert match is None and "greedy" in why


# -- output_match / output_consistency verdicts --------------------------------------


def test_output_match_without_another_side_is_inconclusive() -> None:
    run = run_with(rec(0))
    verdict = evaluate(parse_slo("output_match >= 99%"), run)
    assert verdict.verdict is Verdict.INCONCLUSIVE and verdict.reason == NO_OTHER_SIDE
    run.output_notes["output_match"] = "no baseline for t [run0] in b.json"
    verdict = evaluate(parse_slo("output_match >= 99%"), run)
    assert verdict.reason == "no baseline for t [run0] in b.json"
    verdict = evaluate(parse_slo("output_consistency >= 99%"), run)
    assert verdict.verdict is Verdict.INCONCLUSIVE


def test_output_match_fails_naming_the_parting_positions() -> None:
    run = run_with(rec(0))
    run.output_match = OutputMatch(
        0.9, 40, [{"index": 3, "position": 12}, {"index": 17, "position": None}], "baseline", 4
    )
    verdict = evaluate(parse_slo("output_match >= 99%"), run)
    assert verdict.verdict is Verdict.FAIL and verdict.observed == 0.9 and verdict.samples == 40
    assert "4 of 40 samples differ from the baseline's outputs" in verdict.reason
    assert "sample 3 from token 12" in verdict.reason and "sample 17," in verdict.reason
    assert "+2 more" in verdict.reason
    run.output_consistency = OutputMatch(1.0, 40, [], "alone")
    ok = evaluate(parse_slo("output_consistency >= 99%"), run)
    assert ok.verdict is Verdict.PASS and ok.reason == ""


def test_a_staged_run_judges_output_match_once_on_the_whole_run() -> None:
    from pytest_llmperf.specs.stages import Stage

    run = run_with(rec(0))
    run.stage_plan = (Stage(duration_s=1.0, rate=1.0), Stage(duration_s=1.0, rate=2.0))
    run.output_match = OutputMatch(1.0, 1, [], "baseline")
    verdicts = evaluate_runs([parse_slo("output_match >= 99%")], [run])
    assert len(verdicts) == 1 and verdicts[0].stage is None
    assert verdicts[0].verdict is Verdict.PASS


# -- per model ---------------------------------------------------------------------


def test_per_model_slos_are_also_judged_on_each_model() -> None:
    records = [rec(i, model="sim-lora-1", ttft_ms=300) for i in range(20)]
    records += [rec(20 + i, model="sim-model", ttft_ms=10) for i in range(20)]
    run = run_with(*records)
    spec = PerfSpec.from_markers(
        None,
        None,
        [(("ttft.max < 100ms",), {"per_model": True}), (("ttft.max < 1s",), {})],
    )
    verdicts = evaluate_runs(spec.slos, [run])
    whole = [v for v in verdicts if v.model is None]
    per_model = [v for v in verdicts if v.model is not None]
    assert [v.expr for v in whole] == ["ttft.max < 100ms", "ttft.max < 1s"]
    assert [(v.model, v.verdict) for v in per_model] == [
        ("sim-lora-1", Verdict.FAIL),
        ("sim-model", Verdict.PASS),
    ]
    assert per_model[0].where == "model sim-lora-1" and per_model[0].run == "run0"
    assert per_model[0].samples == 20
    assert per_model[0].to_dict()["model"] == "sim-lora-1"


def test_per_model_output_match_is_not_split() -> None:
    run = run_with(rec(0, model="sim-lora-1"), rec(1, model="sim-model"))
    run.output_match = OutputMatch(1.0, 2, [], "baseline")
    spec = PerfSpec.from_markers(
        None, None, [(("output_match >= 99%", "valid_rate >= 99%"), {"per_model": True})]
    )
    verdicts = evaluate_runs(spec.slos, [run])
    assert [(v.expr, v.model) for v in verdicts] == [
        ("output_match >= 99%", None),
        ("valid_rate >= 99%", None),
        ("valid_rate >= 99%", "sim-lora-1"),
        ("valid_rate >= 99%", "sim-model"),
    ]
