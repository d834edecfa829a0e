"""SLOs on the server process (``startup.ready_s``, ``server.rss_growth_mb``, …) judged on a
run's ``server_process`` block: one value as observed, inconclusive with why where the block
or the value is missing, never made inconclusive by a generator-bound run."""

from __future__ import annotations

import copy
from typing import Any

from server_process_block import BLOCK

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import _INTERRUPTING
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult, StopReason
from pytest_llmperf.slo.sequential import decide_run, stop_blockers
from pytest_llmperf.slo.verdicts import NOT_STARTED, Verdict, evaluate, evaluate_runs
from pytest_llmperf.specs.slo import parse_slo
from pytest_llmperf.specs.stages import Stage


def accumulator(n: int = 30) -> MetricsAccumulator:
    """``n`` requests, 10 ms apart, 20 ms to the first of 8 tokens 5 ms apart."""
    acc = MetricsAccumulator()
    for i in range(n):
        t0 = i * 10_000_000
        record = RequestRecord(index=i, t_sched=t0, t_send=t0, t_first=t0 + 20_000_000)
        record.t_last = record.t_end = t0 + 55_000_000
        record.token_events = 8
        record.gaps_ns = [5_000_000] * 7
        record.usage_completion_tokens = 8
        acc.add(record)
    return acc


def run(block: dict[str, Any] | None = BLOCK, **kwargs: Any) -> RunResult:
    return RunResult(
        workload={},
        load={},
        endpoint={},
        accumulator=accumulator(),
        label="run0",
        server_process=copy.deepcopy(block),
        **kwargs,
    )


def test_observed_values_are_judged_against_the_target() -> None:
    result = run()
    ready = evaluate(parse_slo("startup.ready_s < 90s"), result)
    assert (ready.verdict, ready.observed, ready.unit, ready.samples) == ("pass", 41.2, "s", 1)
    slow = evaluate(parse_slo("startup.first_token_s < 30s"), result)
    assert (slow.verdict, slow.observed) == (Verdict.FAIL, 41.9)
    leak = evaluate(parse_slo("server.rss_growth_mb < 5"), result)
    assert (leak.verdict, leak.observed, leak.unit) == (Verdict.FAIL, 8.5, "MB")
    per_token = evaluate(parse_slo("server.cpu_ms_per_output_token < 2ms"), result)
    assert per_token.verdict is Verdict.PASS


def test_a_server_the_gate_did_not_start_is_inconclusive() -> None:
    verdict = evaluate(parse_slo("startup.ready_s < 90s"), run(None))
    assert verdict.verdict is Verdict.INCONCLUSIVE and verdict.observed is None
    assert verdict.reason == NOT_STARTED == "the gate did not start this server (--llm-server-cmd)"


def test_a_missing_value_is_inconclusive_with_the_blocks_note() -> None:
    gpu = evaluate(parse_slo("server.gpu_mem_max_mb < 70GB"), run())
    assert gpu.verdict is Verdict.INCONCLUSIVE
    assert gpu.reason == "no NVML (pip install pytest-llmperf[gpu])"
    idle = copy.deepcopy(BLOCK)
    idle["resources"]["cpu_ms_per_output_token"] = None
    per_token = evaluate(parse_slo("server.cpu_ms_per_output_token < 2"), run(idle))
    assert (per_token.verdict, per_token.reason) == ("inconclusive", "the run had no output tokens")


def test_a_generator_bound_run_still_judges_the_process() -> None:
    bound = run(self_check={"generator_bound": True, "reasons": ["lag p99 40 ms"]})
    assert evaluate(parse_slo("server.rss_growth_mb < 50"), bound).verdict is Verdict.PASS
    latency = evaluate(parse_slo("ttft.mean < 500ms"), bound)
    assert latency.verdict is Verdict.INCONCLUSIVE  # the load's metrics are not judged


def test_a_run_whose_server_exited_is_judged_on_what_it_measured() -> None:
    died = copy.deepcopy(BLOCK)
    died["exit"] = {"code": None, "signal": 9, "signal_name": "SIGKILL", "oom": True}
    result = run(died, stop_reason=StopReason.SERVER_EXITED, interrupted=True)
    assert evaluate(parse_slo("server.rss_max_mb < 1GB"), result).verdict is Verdict.PASS
    assert StopReason.SERVER_EXITED in _INTERRUPTING
    assert result.to_dict()["stop_reason"] == "server_exited"


def test_a_staged_run_judges_the_process_once_on_the_whole_run() -> None:
    stages = (Stage(0.15, rate=100.0), Stage(0.15, rate=100.0))
    result = run(stage_plan=stages)
    slos = [parse_slo("startup.ready_s < 90s"), parse_slo("ttft.max < 1s")]
    verdicts = evaluate_runs(slos, [result])
    ready = [v for v in verdicts if v.expr.startswith("startup")]
    assert [(v.stage, v.verdict) for v in ready] == [(None, Verdict.PASS)]
    assert {v.stage for v in verdicts if v.expr.startswith("ttft")} == {0, 1}


def test_the_block_is_in_the_report_only_where_there_is_one() -> None:
    assert run().to_dict()["server_process"] == BLOCK
    assert "server_process" not in run(None).to_dict()


def test_until_decided_waits_for_the_resources_and_not_for_the_startup() -> None:
    far = parse_slo("ttft.p90 < 2s")
    ready, leak = parse_slo("startup.ready_s < 90s"), parse_slo("server.rss_growth_mb < 50")
    assert stop_blockers([far, ready, leak]) == [leak.expr]
    acc = accumulator(100)
    assert decide_run([far, ready], acc).done
    assert not decide_run([far, leak], acc).done
    assert decide_run([ready], acc).why == "no SLO of the run to decide"
