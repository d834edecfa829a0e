"""The rules that turn a test's verdicts into its outcome (no pytest session needed)."""

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.metrics import MetricsAccumulator
from pytest_llmperf.reports.outcome import judge_test
from pytest_llmperf.slo.verdicts import SloVerdict
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


def test_no_gated_run_fails() -> None:
    outcome = judge_test("t::x", SLOS, [run(30, 0, gated=False)], [])
    assert outcome.kind == "fail" and "made no gated" in outcome.message


def test_all_failed_is_a_failure_not_inconclusive() -> None:
    outcome = judge_test("t::x", SLOS, [run(0, 20)], [verdict("inconclusive")])
    assert outcome.kind == "fail"
    assert "20 issued, 0 completed: http_error x20" in outcome.message


def test_too_few_samples_is_inconclusive() -> None:
    outcome = judge_test("t::x", SLOS, [run(5, 0)], [verdict("inconclusive")])
    assert outcome.kind == "inconclusive" and "SLO inconclusive" in outcome.message


def test_tests_without_slos_pass_whatever_was_measured() -> None:
    assert judge_test("t", [], [run(0, 5)], []).kind == "pass"
