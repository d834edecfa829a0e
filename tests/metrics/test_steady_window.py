"""The steady-state window (``llm_load(..., steady=...)``) on hand-built records: who is in,
what the throughput figures are over, what an empty window does to an SLO."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.issue.steady_gate import SteadyGate, level_offset_ns
from pytest_llmperf.results import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.results.steady import SteadyState
from pytest_llmperf.slo.verdicts import Verdict, evaluate
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.slo import parse_slo
from pytest_llmperf.specs.steady import SteadyMode, SteadySpec

S = 1_000_000_000
BASE = 1_000 * S  # monotonic clocks never read 0


def done(
    sched_s: float, e2e_s: float = 1.0, tokens: int = 10, ttft_s: float = 0.1
) -> RequestRecord:
    t = BASE + round(sched_s * S)
    r = RequestRecord(index=0, t_sched=t, t_send=t)
    r.t_first = t + round(ttft_s * S)
    r.t_last = r.t_end = t + round(e2e_s * S)
    r.token_events = tokens
    r.usage_completion_tokens = tokens
    r.usage_prompt_tokens = 5
    return r


def result(acc: MetricsAccumulator, load: dict[str, Any] | None = None) -> RunResult:
    return RunResult(workload={}, load=load or {}, endpoint={}, accumulator=acc)


# -- the declaration ---------------------------------------------------------------


def test_steady_parses_auto_and_explicit_bounds() -> None:
    assert (
        LoadSpec.parse("concurrency", {"concurrency": 4, "steady": "auto"}).steady == SteadySpec()
    )
    spec = LoadSpec.parse("poisson", {"rate": 5, "steady": {"skip_s": 30, "until_s": 90}})
    assert spec.steady == SteadySpec(SteadyMode.EXPLICIT, 30.0, 90.0)
    assert spec.describe()["steady"] == {"skip_s": 30.0, "until_s": 90.0}
    latency = LoadSpec.parse("constant", {"rate": 5, "steady": {"latency": True}}).steady
    assert latency == SteadySpec(latency=True)
    assert latency is not None and latency.describe() == {"latency": True}
    trace = LoadSpec.parse("trace", {"path": "t.jsonl", "steady": "auto"})
    assert trace.steady == SteadySpec() and trace.describe()["steady"] == "auto"


@pytest.mark.parametrize(
    ("steady", "words"),
    [
        ("always", ["steady must be", "'always'"]),
        ({"skip": 3}, ["does not take 'skip'", "skip_s"]),
        ({"skip_s": -1}, ["skip_s must be seconds >= 0", "-1"]),
        ({"skip_s": 10, "until_s": 5}, ["until_s must be after skip_s", "until_s=5"]),
        ({"latency": "yes"}, ["latency must be True or False", "'yes'"]),
    ],
)
def test_a_bad_steady_names_the_marker_the_field_and_the_value(
    steady: Any, words: list[str]
) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        LoadSpec.parse("poisson", {"rate": 5, "steady": steady})
    assert "llm_load('poisson')" in info.value.message
    for word in words:
        assert word in info.value.message


# -- when the window opens ---------------------------------------------------------------


def test_a_closed_loop_window_opens_when_its_slots_are_first_all_in_flight() -> None:
    acc = MetricsAccumulator()
    gate = SteadyGate(SteadySpec(), acc.declare_steady(), slots=3)
    for k, in_flight in enumerate((0, 1, 1, 2)):  # one ended before the third was sent
        gate.note(BASE + k * S, None, in_flight)
    assert acc.steady is not None and acc.steady.start_ns == BASE + 3 * S
    assert not gate.pending
    gate.note(BASE + 9 * S, None, 0)  # once open, it stays where it opened
    assert acc.steady.start_ns == BASE + 3 * S


def test_an_open_loop_window_opens_where_the_planned_rate_first_reaches_its_top() -> None:
    ramp = LoadSpec.parse(
        "poisson", {"stages": [{"rate": 2, "duration": 10}, {"rate": 8, "duration": 20}]}
    )
    bounds = [0, 10 * S, 30 * S]
    assert level_offset_ns(ramp, bounds) == 10 * S  # the start of the stage at the top
    rising = LoadSpec.parse("poisson", {"ramp": {"from": 1, "to": 9, "duration": 30, "steps": 3}})
    assert level_offset_ns(rising, [0, 10 * S, 20 * S, 30 * S]) == 30 * S  # the ramp's end
    assert level_offset_ns(LoadSpec.parse("poisson", {"rate": 4}), []) is None
    acc = MetricsAccumulator()
    gate = SteadyGate(SteadySpec(), acc.declare_steady(), level_offset_ns=10 * S)
    gate.note(BASE + 2 * S, 2 * S, 0)  # the first tracked request, planned 2 s after t0
    assert acc.steady is not None and acc.steady.start_ns == BASE + 10 * S


def test_explicit_bounds_count_from_the_first_tracked_send() -> None:
    acc = MetricsAccumulator()
    spec = SteadySpec(SteadyMode.EXPLICIT, 2.0, 6.0)
    SteadyGate(spec, acc.declare_steady("explicit")).note(BASE, 0, 0)
    for t in range(10):  # one request a second, 1 s each, 10 tokens
        acc.add(done(t))
    window = acc.steady
    assert window is not None
    assert (window.before, window.inside, window.after) == (2, 4, 4)
    assert window.end_ns == BASE + 6 * S  # the run went on past until_s: the window ends there
    steady = result(acc).steady
    assert steady is not None
    assert (steady["start_s"], steady["end_s"], steady["requests_in"]) == (2.0, 6.0, 4)
    assert (steady["out_ramp"], steady["out_drain"], steady["state"]) == (2, 4, "open")
    # 4 requests started in the 4 s window: 1 req/s, 10 tok/s; the whole run is kept too
    assert acc.rate("request_throughput") == pytest.approx(1.0)
    assert acc.rate("output_throughput") == pytest.approx(10.0)
    assert acc.counts()["issued"] == 10 and acc.histograms["ttft"].count == 10
    assert steady["whole_run"]["request_throughput"] == pytest.approx(10 / 10.0)


# -- what the window decides ------------------------------------------------------------------


def ramped_run(latency: bool = False) -> MetricsAccumulator:
    """A ramp of 5 slow, short requests (ttft 2 s), then the level: 20 in 10 s."""
    acc = MetricsAccumulator()
    acc.declare_steady(latency=latency)
    for t in range(5):
        acc.add(done(t * 2, e2e_s=3.0, tokens=2, ttft_s=2.0))
    assert acc.steady is not None
    acc.steady.open_at(BASE + 10 * S)
    for k in range(21):  # 0.5 s apart over [10 s, 20 s]: the window is 10 s long
        acc.add(done(10 + k * 0.5, tokens=10))
    return acc


def test_throughput_and_goodput_are_the_windows_and_latency_the_whole_runs_by_default() -> None:
    acc = ramped_run()
    run = result(acc)
    assert run.metrics["request_throughput"] == pytest.approx(21 / 10)
    assert run.metrics["output_throughput"] == pytest.approx(210 / 10)
    assert run.metrics["input_throughput"] == pytest.approx(105 / 10)
    summary = run.to_dict()
    assert summary["metrics"]["output_throughput"] == pytest.approx(21.0)
    # latency keeps every request: the ramp's slow first tokens are in it
    assert summary["metrics"]["ttft"]["count"] == 26
    assert run.histogram("ttft").max >= 2000
    # the whole run's figure, diluted by the ramp, is kept for reference beside it
    assert summary["steady"]["whole_run"]["output_throughput"] < 21.0 * 0.8
    assert summary["counts"]["issued"] == 26
    # the last request in the window (sent at its end, 20 s) ended 1 s after it
    assert summary["steady"]["drain_s"] == pytest.approx(1.0)


def test_latency_is_windowed_only_when_asked() -> None:
    run = result(ramped_run(latency=True))
    assert run.histogram("ttft").count == 21 and run.histogram("ttft").max < 200
    assert run.to_dict()["metrics"]["ttft"]["count"] == 21
    verdict = evaluate(parse_slo("ttft.max < 1s"), run)
    assert verdict.verdict is Verdict.PASS
    whole = result(ramped_run())
    assert evaluate(parse_slo("ttft.max < 1s"), whole).verdict is Verdict.FAIL


def test_an_slo_on_a_window_that_never_opened_is_inconclusive_not_zero() -> None:
    acc = MetricsAccumulator()
    acc.declare_steady()
    for t in range(5):
        acc.add(done(t))
    run = result(acc)
    assert math.isnan(acc.rate("output_throughput"))
    assert run.to_dict()["metrics"]["output_throughput"] is None
    assert run.to_dict()["steady"]["state"] == SteadyState.NEVER_OPENED
    for expr in (
        "output_throughput > 1 tok/s",
        "output_throughput < 1000000 tok/s",
        "goodput > 0%",
    ):
        verdict = evaluate(parse_slo(expr), run)
        assert verdict.verdict is Verdict.INCONCLUSIVE, expr
        assert verdict.observed is None
        assert "no steady window" in verdict.reason and "never reached" in verdict.reason
    # not a throughput: judged over the whole run as ever
    latency = evaluate(parse_slo("ttft.mean < 1s"), run)
    assert latency.observed == pytest.approx(100.0) and "steady" not in latency.reason
    assert evaluate(parse_slo("error_rate < 1%"), run).verdict is Verdict.PASS


def test_a_window_that_opened_at_the_last_send_is_empty() -> None:
    acc = MetricsAccumulator()
    acc.declare_steady()
    acc.add(done(0))
    assert acc.steady is not None
    acc.steady.open_at(BASE + 1 * S)
    acc.add(done(1))  # the only request in it: no time between its first and last send
    assert acc.steady.state is SteadyState.EMPTY
    verdict = evaluate(parse_slo("request_throughput > 0 req/s"), result(acc))
    assert (
        verdict.verdict is Verdict.INCONCLUSIVE and "holds 1 request(s) over 0 s" in verdict.reason
    )


def test_the_window_travels_through_states_and_merges_across_shares() -> None:
    one, two = ramped_run(), ramped_run()
    merged = MetricsAccumulator.from_state(one.to_state())
    merged.merge(MetricsAccumulator.from_state(two.to_state()))
    assert merged.steady is not None and merged.steady_part is not None
    assert merged.steady.inside == 42 and merged.steady.before == 10
    assert merged.steady.duration_s == pytest.approx(10.0)
    assert merged.rate("request_throughput") == pytest.approx(42 / 10)
    assert merged.steady_part.issued == 42
    plain = MetricsAccumulator()
    plain.add(done(0))
    assert "steady" not in plain.to_state() and plain.steady_summary() is None
    assert "steady" not in result(plain).to_dict()


def test_run_takes_steady_as_an_override() -> None:
    from pytest_llmperf.specs.run import RunSpec

    declared = RunSpec.from_markers(
        ("synthetic",), {"requests": 10}, ("concurrency",), {"concurrency": 2}
    )
    assert declared.load.steady is None
    windowed = declared.with_overrides({"steady": {"skip_s": 5}})
    assert windowed.load.steady == SteadySpec(SteadyMode.EXPLICIT, 5.0)
    assert windowed.load.concurrency == 2
    with pytest.raises(LlmPerfUsageError, match="steady must be"):
        declared.with_overrides({"steady": "sometimes"})
