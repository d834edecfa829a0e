"""SLOs on a staged run: judged stage by stage, each stage a run of its own, never the whole.

The runs are built from request records (each stage's requests planned at
its rate, with known TTFTs), so every verdict and its reason is exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.verdicts import (
    SloVerdict,
    Verdict,
    evaluate,
    evaluate_runs,
    evaluate_stages,
    stage_load,
)
from pytest_llmperf.specs.rulesets import Ruleset
from pytest_llmperf.specs.slo import parse_slo
from pytest_llmperf.specs.stages import RampShape, Stage, parse_ramp

MS = 1_000_000
BASE_NS = 10_000 * MS  # monotonic clocks never read 0


def staged_run(
    stages: Sequence[Stage],
    ttft_ms: Sequence[float],
    *,
    label: str = "run0",
    gated: bool = True,
    self_check: dict[str, object] | None = None,
) -> RunResult:
    """Each stage's planned requests (its mean rate × duration) with TTFT ``ttft_ms[k]``."""
    acc = MetricsAccumulator()
    start = 0.0
    index = 0
    for k, stage in enumerate(stages):
        n = round((stage.mean_rate or 10.0) * stage.duration_s)
        for i in range(n):
            t0 = BASE_NS + int((start + i * stage.duration_s / n) * 1e9)
            first = t0 + int(ttft_ms[k] * MS)
            record = RequestRecord(index=index, t_sched=t0, t_send=t0, t_first=first, stage=k)
            record.t_last = record.t_end = first + 3 * MS
            record.token_events = 4
            record.gaps_ns = [MS] * 3
            record.usage_completion_tokens = 4
            acc.add(record)
            index += 1
        start += stage.duration_s
    return RunResult(
        workload={"name": "synthetic"},
        load={"pattern": "constant", "stages": [s.describe() for s in stages]},
        endpoint={},
        accumulator=acc,
        self_check=self_check or {"generator_bound": False},
        label=label,
        gated=gated,
        stage_plan=tuple(stages),
        stage_sends=[acc.stages[k].issued for k in range(len(stages))],
    )


def by_key(verdicts: Sequence[SloVerdict]) -> dict[tuple[str, int | None], SloVerdict]:
    return {(v.expr, v.stage): v for v in verdicts}


def test_every_slo_is_judged_on_each_stage_and_never_on_the_whole_run() -> None:
    stages = [Stage(10.0, rate=10.0), Stage(10.0, rate=40.0)]
    result = staged_run(stages, [50.0, 400.0])
    slos = [parse_slo("ttft.p50 < 300ms"), parse_slo("error_rate < 1%")]
    verdicts = evaluate_runs(slos, [result])
    assert [(v.expr, v.stage) for v in verdicts] == [
        ("ttft.p50 < 300ms", 0),
        ("error_rate < 1%", 0),
        ("ttft.p50 < 300ms", 1),
        ("error_rate < 1%", 1),
    ]
    got = by_key(verdicts)
    assert got["ttft.p50 < 300ms", 0].verdict is Verdict.PASS
    assert got["ttft.p50 < 300ms", 0].samples == 100
    assert got["ttft.p50 < 300ms", 1].verdict is Verdict.FAIL
    assert got["ttft.p50 < 300ms", 1].observed == pytest.approx(400.0, rel=0.01)
    assert got["ttft.p50 < 300ms", 1].samples == 400
    # the run keeps its own label; the stage is named beside it
    assert {v.run for v in verdicts} == {"run0"}
    assert [v.stage_load for v in verdicts[::2]] == ["10 req/s", "40 req/s"]
    assert got["ttft.p50 < 300ms", 1].where == "stage 1: 40 req/s"


def test_the_whole_run_would_hide_a_failing_short_stage() -> None:
    """A burst stage: one fifth of the requests; the run's median passes, the burst fails."""
    stages = [Stage(40.0, rate=10.0), Stage(5.0, rate=20.0)]
    result = staged_run(stages, [50.0, 900.0])
    slo = parse_slo("ttft.p50 < 300ms")
    assert evaluate(slo, result).verdict is Verdict.PASS
    verdicts = evaluate_runs([slo], [result])
    assert [v.verdict for v in verdicts] == [Verdict.PASS, Verdict.FAIL]


def test_a_stages_own_slos_are_judged_on_that_stage_only() -> None:
    own = parse_slo("ttft.p50 < 100ms")
    shared = parse_slo("ttft.p50 < 1s")
    stages = [Stage(5.0, rate=10.0), Stage(5.0, rate=20.0, slos=(own, shared))]
    result = staged_run(stages, [150.0, 50.0])
    verdicts = evaluate_runs([shared], [result])
    # stage 0 is not held to stage 1's own SLO (it would fail it); shared is judged once a stage
    assert [(v.expr, v.stage, v.verdict) for v in verdicts] == [
        ("ttft.p50 < 1s", 0, Verdict.PASS),
        ("ttft.p50 < 1s", 1, Verdict.PASS),
        ("ttft.p50 < 100ms", 1, Verdict.PASS),
    ]
    # a staged test with no SLO of its own still has its stages' SLOs judged
    assert [(v.expr, v.stage) for v in evaluate_runs([], [result])] == [
        ("ttft.p50 < 100ms", 1),
        ("ttft.p50 < 1s", 1),
    ]


def test_a_short_stage_is_inconclusive_for_p99_honestly() -> None:
    stages = [Stage(50.0, rate=25.0), Stage(2.0, rate=25.0)]  # 1250 and 50 requests
    result = staged_run(stages, [50.0, 50.0])
    verdicts = evaluate_runs([parse_slo("ttft.p99 < 300ms")], [result])
    assert [v.verdict for v in verdicts] == [Verdict.PASS, Verdict.INCONCLUSIVE]
    assert verdicts[1].reason.startswith("0.99 interval of p99 [50.0 ms, ∞] holds the target")
    assert "about 459 samples would decide it" in verdicts[1].reason
    assert verdicts[1].stage == 1 and verdicts[1].observed == pytest.approx(50.0, rel=0.01)


def test_a_stage_with_no_requests_is_inconclusive() -> None:
    stages = [Stage(5.0, rate=10.0), Stage(5.0, rate=10.0)]
    result = staged_run(stages, [50.0, 50.0])
    del result.accumulator.stages[1]  # e.g. interrupted before stage 1 began
    (first, second) = evaluate_runs([parse_slo("ttft.p50 < 1s")], [result])
    assert first.verdict is Verdict.PASS
    assert second.verdict is Verdict.INCONCLUSIVE and second.stage == 1
    assert second.reason == "no successful requests to measure"


def test_a_generator_bound_run_leaves_every_stage_inconclusive() -> None:
    stages = [Stage(5.0, rate=10.0), Stage(5.0, rate=10.0)]
    check = {"generator_bound": True, "reasons": ["schedule lag p99 40 ms > 10 ms"]}
    result = staged_run(stages, [50.0, 50.0], self_check=check)
    verdicts = evaluate_runs([parse_slo("ttft.p50 < 1s")], [result])
    assert {v.verdict for v in verdicts} == {Verdict.INCONCLUSIVE}
    assert all("schedule lag p99" in v.reason for v in verdicts)


def test_ruleset_minimums_hold_for_each_stage() -> None:
    slo = parse_slo("ttft.p50 < 1s")
    ruleset = Ruleset(name="r", slos=[slo], min_samples=60, min_duration_s=8.0)
    stages = [Stage(10.0, rate=10.0), Stage(4.0, rate=20.0)]  # 100 and 80 requests
    result = staged_run(stages, [50.0, 50.0])
    first, second = evaluate_runs([slo], [result], rulesets=[ruleset])
    assert first.verdict is Verdict.PASS
    assert second.verdict is Verdict.INCONCLUSIVE
    assert second.reason.startswith("needs >= 8 s measured, run has 4.0 s")


def test_ungated_staged_runs_are_not_judged_and_unstaged_runs_are_as_before() -> None:
    stages = [Stage(5.0, rate=10.0)]
    ungated = staged_run(stages, [50.0], gated=False)
    assert evaluate_runs([parse_slo("ttft.p50 < 1s")], [ungated]) == []
    plain = staged_run(stages, [50.0])
    plain.stage_plan = ()
    (verdict,) = evaluate_runs([parse_slo("ttft.p50 < 1s")], [plain])
    assert verdict.stage is None and verdict.stage_load == "" and verdict.run == "run0"


def test_to_dict_adds_the_stage_and_keeps_every_key() -> None:
    stages = [Stage(5.0, rate=10.0), Stage(5.0, rate=20.0)]
    (_, staged) = evaluate_stages([parse_slo("ttft.p50 < 1s")], staged_run(stages, [5.0, 5.0]))
    d = staged.to_dict()
    old_keys = {"expr", "observed", "target", "unit", "verdict", "run", "samples", "reason"}
    assert set(d) == old_keys | {"stage", "stage_load", "interval", "confidence", "model"}
    assert d["stage"] == 1 and d["stage_load"] == "20 req/s" and d["verdict"] == "pass"
    plain = SloVerdict("ttft.p50 < 1s", 5.0, 1000.0, "ms", "pass", run="run0")
    assert plain.to_dict()["stage"] is None and plain.to_dict()["stage_load"] == ""


def test_stage_load_names_rates_ramps_and_concurrency() -> None:
    assert stage_load(Stage(5.0, rate=40.0)) == "40 req/s"
    assert stage_load(Stage(5.0, rate=2.5)) == "2.5 req/s"
    assert stage_load(Stage(5.0, concurrency=4)) == "concurrency 4"
    windows = parse_ramp(
        "poisson", {"from": 5, "to": 45, "duration": 4, "steps": 4}, open_loop=True
    )
    assert [stage_load(w) for w in windows] == [
        "5→15 req/s",
        "15→25 req/s",
        "25→35 req/s",
        "35→45 req/s",
    ]
    curve = Stage(5.0, rate=1.0, rate_end=1000.0 / 3, shape=RampShape.EXPONENTIAL)
    assert stage_load(curve) == "1→333.3 req/s"


def test_a_ramps_windows_are_each_judged() -> None:
    windows = parse_ramp(
        "constant",
        {"from": 10, "to": 30, "duration": 6, "steps": 3, "slo": "ttft.p50 < 200ms"},
        open_loop=True,
    )
    result = staged_run(windows, [50.0, 100.0, 300.0])
    verdicts = evaluate_runs([], [result])
    assert [(v.stage, v.verdict) for v in verdicts] == [
        (0, Verdict.PASS),
        (1, Verdict.PASS),
        (2, Verdict.FAIL),
    ]
    assert verdicts[2].stage_load == "23.33→30 req/s"
