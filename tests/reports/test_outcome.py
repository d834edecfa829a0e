"""The rules that turn a test's verdicts into its outcome (no pytest session needed)."""

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.reports.outcome import Outcome, judge_test, nothing_measured
from pytest_llmperf.results import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.verdicts import SloVerdict, Verdict
from pytest_llmperf.specs.slo import parse_slo

SLOS = [parse_slo("ttft.p50 < 1s")]


def run(ok: int, failed: int, *, gated: bool = True) -> RunResult:
    acc = MetricsAccumulator()
    for i in range(ok + failed):
        r = RequestRecord(index=i, t_sched=10**9, t_send=10**9)
        if i < ok:
            r.t_first, r.t_last, r.t_end, r.token_events = 2 * 10**9, 3 * 10**9, 3 * 10**9, 2
        else:
            r.fail(ErrorKind.HTTP, "boom", now=2 * 10**9)
        acc.add(r)
    result = RunResult({}, {}, {}, acc, label="run0")
    result.gated = gated
    return result


def verdict(kind: str) -> SloVerdict:
    return SloVerdict("ttft.p50 < 1s", 1.0, 1000.0, "ms", kind, run="run0", samples=30)


def test_pass() -> None:
    assert judge_test("t", SLOS, [run(30, 0)], [verdict("pass")]).kind == "pass"


def test_a_violated_slo_fails_with_its_table() -> None:
    outcome = judge_test("t::x", SLOS, [run(30, 0)], [verdict("fail")])
    assert outcome.kind == "fail" and outcome.message.startswith("SLO violated: ")
    assert "ttft.p50 < 1s" in outcome.message


def test_no_run_at_all_fails_saying_so() -> None:
    outcome = judge_test("t::x", SLOS, [], [])
    assert outcome == Outcome(
        Verdict.FAIL,
        "llm_slo declared but no gated run measured anything: llm_loadgen.run() was never called",
    )


def test_no_gated_run_fails() -> None:
    ungated = run(30, 0, gated=False)
    ungated.label = "sweep rate=4"
    outcome = judge_test("t::x", SLOS, [ungated], [])
    assert outcome.kind == "fail"
    assert outcome.message == (
        "llm_slo declared but no gated run measured anything: its only runs were "
        "gate=False (sweep rate=4), which are reported, not judged"
    )


def test_all_failed_is_a_failure_not_inconclusive() -> None:
    outcome = judge_test("t::x", SLOS, [run(0, 20)], [verdict("inconclusive")])
    assert outcome.kind == "fail"
    first, _, rest = outcome.message.partition("\n")
    assert first == (
        "llm_slo declared but no gated run measured anything: "
        "run0: 20 issued, 0 completed: every request failed (http_error x20)"
    )
    assert "Failed requests, in the server's words:" in rest and "boom" in rest


def test_a_violated_slo_on_a_dead_run_keeps_its_table() -> None:
    """An error_rate SLO did measure something (every request failed): its table stands."""
    outcome = judge_test("t::x", SLOS, [run(0, 20)], [verdict("fail")])
    assert outcome.kind == "fail" and outcome.message.startswith("SLO violated: ")


def test_nothing_completed_counts_every_gated_run_and_ignores_ungated_ones() -> None:
    """One gated run that completed requests is something measured; a gated run that
    completed none beside it still fails the test, in the older words."""
    probe = run(30, 0, gated=False)
    assert nothing_measured([probe, run(0, 20)]) != ""
    assert nothing_measured([run(0, 20), run(30, 0)]) == ""
    outcome = judge_test("t::x", SLOS, [run(0, 20), run(30, 0)], [verdict("pass")] * 2)
    assert outcome.kind == "fail" and outcome.message.startswith("every request failed in t::x")


def test_a_run_that_issued_nothing_says_so() -> None:
    assert nothing_measured([run(0, 0)]) == "run0: no request was issued"


def test_cancelled_requests_are_not_measurements() -> None:
    acc = MetricsAccumulator()
    for i in range(4):
        r = RequestRecord(index=i, t_sched=10**9, t_send=10**9)
        r.t_first, r.t_last, r.t_end, r.token_events = 2 * 10**9, 3 * 10**9, 3 * 10**9, 2
        r.cancelled = True
        acc.add(r)
    result = RunResult({}, {}, {}, acc, label="run0")
    assert nothing_measured([result]) == (
        "run0: 4 issued, 0 completed: none completed (cancelled x4)"
    )


def test_too_few_samples_is_inconclusive() -> None:
    outcome = judge_test("t::x", SLOS, [run(5, 0)], [verdict("inconclusive")])
    assert outcome.kind == "inconclusive" and "SLO inconclusive" in outcome.message


def test_tests_without_slos_pass_whatever_was_measured() -> None:
    assert judge_test("t", [], [run(0, 5)], []).kind == "pass"
