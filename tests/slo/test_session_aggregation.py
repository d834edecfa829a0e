"""Session aggregation: exact merges per endpoint and model, summed windows, ruleset minimums."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.session import endpoint_key, evaluate_session, group_runs
from pytest_llmperf.slo.verdicts import evaluate, evaluate_runs
from pytest_llmperf.specs.rulesets import Ruleset
from pytest_llmperf.specs.slo import parse_slo

SIM = {"url": "http://127.0.0.1:40001/v1", "model": "m", "simulator": "fixed"}
REAL_A = {"url": "http://a:8000/v1", "model": "llama", "simulator": None}
REAL_B = {"url": "http://a:8000/v1", "model": "mistral", "simulator": None}
MakeAcc = Callable[..., MetricsAccumulator]


def run_dict(label: str = "run0", *, gated: bool = True, bound: bool = False) -> dict[str, Any]:
    return {"label": label, "gated": gated, "self_check": {"generator_bound": bound}}


def result(acc: Any, label: str = "run0") -> RunResult:
    return RunResult({}, {}, {}, acc, label=label)


def test_groups_split_by_endpoint_and_model_and_merge_exactly(make_acc: MakeAcc) -> None:
    a1 = make_acc([10.0 + i for i in range(50)])
    a2 = make_acc([100.0 + i for i in range(30)])
    b1 = make_acc([5.0] * 20)
    groups = group_runs(
        [
            ("t.py::a1", REAL_A, [run_dict()], [a1.to_state()]),
            ("t.py::a2", REAL_A, [run_dict()], [a2.to_state()]),
            ("t.py::b1", REAL_B, [run_dict()], [b1.to_state()]),
        ]
    )
    assert set(groups) == {"http://a:8000/v1 llama", "http://a:8000/v1 mistral"}
    llama = groups["http://a:8000/v1 llama"]
    expected = LatencyHistogram()
    expected.merge(a1.histograms["ttft"])
    expected.merge(a2.histograms["ttft"])
    merged = llama.accumulator.histograms["ttft"]
    assert merged.count == 80 and merged.p(99) == expected.p(99) and merged.p(50) == expected.p(50)
    assert llama.accumulator.completed == 80 and llama.tests == ["t.py::a1", "t.py::a2"]
    # the window is the runs' measured time added up, not the span between them
    assert llama.measured_s == pytest.approx(a1.window_s + a2.window_s)
    assert llama.accumulator.rate("request_throughput") == pytest.approx(
        80 / (a1.window_s + a2.window_s)
    )


def test_simulator_is_keyed_by_profile_so_xdist_workers_share_a_group(make_acc: MakeAcc) -> None:
    other_port = {**SIM, "url": "http://127.0.0.1:40002/v1"}
    groups = group_runs(
        [
            ("t.py::x", SIM, [run_dict()], [make_acc([1.0] * 5).to_state()]),
            ("t.py::y", other_port, [run_dict()], [make_acc([1.0] * 5).to_state()]),
        ]
    )
    assert list(groups) == ["sim:fixed m"] == [endpoint_key(SIM)]
    assert groups["sim:fixed m"].runs == 2


def test_ungated_runs_stay_out(make_acc: MakeAcc) -> None:
    acc = make_acc([1.0] * 5)
    groups = group_runs(
        [("t.py::x", REAL_A, [run_dict(gated=False), run_dict("run1")], [acc.to_state()] * 2)]
    )
    assert groups["http://a:8000/v1 llama"].runs == 1


def test_session_ruleset_minimums_make_verdicts_inconclusive(make_acc: MakeAcc) -> None:
    acc = make_acc([10.0] * 200, spacing_ms=10.0)  # ~2 s measured, 200 samples
    groups = group_runs([("t.py::x", REAL_A, [run_dict()], [acc.to_state()])])
    slos = [parse_slo("ttft.p50 < 1s"), parse_slo("ttft.p50 > 1s")]
    plain = evaluate_session(groups, Ruleset("r", slos))
    assert [v.verdict for v in plain] == ["pass", "fail"]
    assert plain[0].run == "session http://a:8000/v1 llama"
    by_count = evaluate_session(groups, Ruleset("r", slos, min_samples=500))
    assert {v.verdict for v in by_count} == {"inconclusive"}
    assert "needs >= 500 samples, run has 200" in by_count[0].reason
    by_time = evaluate_session(groups, Ruleset("r", slos, min_duration_s=60))
    assert {v.verdict for v in by_time} == {"inconclusive"}
    assert "needs >= 60 s measured" in by_time[0].reason


def test_a_session_ruleset_over_nothing_measured_fails_each_target(make_acc: MakeAcc) -> None:
    """No gated run (ungated ones stay out of the groups), or gated runs that completed
    nothing: every target fails, saying why, so the session is never green unjudged."""
    slos = [parse_slo("ttft.p50 < 1s"), parse_slo("error_rate < 1%")]
    ungated = group_runs(
        [("t.py::x", REAL_A, [run_dict(gated=False)], [make_acc([1.0]).to_state()])]
    )
    none = evaluate_session(ungated, Ruleset("team", slos))
    assert [(v.expr, v.verdict, v.run, v.samples) for v in none] == [
        ("ttft.p50 < 1s", "fail", "session", 0),
        ("error_rate < 1%", "fail", "session", 0),
    ]
    assert none[0].reason == (
        "--llm-ruleset team declared but no gated run measured anything: "
        "no test made a gated llm_loadgen.run()"
    )
    dead = MetricsAccumulator()
    dead.issued = dead.failed = 20
    groups = group_runs([("t.py::x", REAL_A, [run_dict()], [dead.to_state()])])
    (v, _) = evaluate_session(groups, Ruleset("team", slos))
    assert v.verdict == "fail" and v.reason.endswith(": every gated run completed no request")
    # one group that completed requests is something measured: judged as ever
    alive = group_runs([("t.py::y", REAL_B, [run_dict()], [make_acc([10.0] * 50).to_state()])])
    judged = evaluate_session({**groups, **alive}, Ruleset("team", slos))
    assert all(v.run.startswith("session http://") for v in judged)


def test_a_generator_bound_run_makes_session_latency_inconclusive(make_acc: MakeAcc) -> None:
    acc = make_acc([10.0] * 100)
    groups = group_runs([("t.py::x", REAL_A, [run_dict(bound=True)], [acc.to_state()])])
    (v,) = evaluate_session(groups, Ruleset("r", [parse_slo("ttft.p50 < 1s")]))
    assert v.verdict == "inconclusive" and "load-generator bound" in v.reason


def test_p99_under_a_target_needs_459_samples_at_99_percent(make_acc: MakeAcc) -> None:
    # all samples under the target: the upper bound is the max once 1 - 0.99**n >= 0.99
    slo = parse_slo("ttft.p99 < 1s")
    assert evaluate(slo, result(make_acc([1.0] * 458))).verdict == "inconclusive"
    assert evaluate(slo, result(make_acc([1.0] * 459))).verdict == "pass"


def test_ruleset_minimums_apply_only_to_its_own_slos(make_acc: MakeAcc) -> None:
    own = parse_slo("ttft.p50 < 1s")
    other = parse_slo("e2e.p50 < 1s")
    ruleset = Ruleset("r", [own], min_samples=1000)
    verdicts = evaluate_runs([own, other], [result(make_acc([1.0] * 100))], rulesets=[ruleset])
    assert [v.verdict for v in verdicts] == ["inconclusive", "pass"]
