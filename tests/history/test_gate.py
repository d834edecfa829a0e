"""The history gate: ``--llm-baseline-compare=history[:N]`` judges each test against the
merged last N comparable runs of the ``--llm-history`` store, sessions before this one
only. Unit tests on a real store, then five pytester sessions on the simulator: each on
a SQLite file and on the throwaway PostgreSQL server (the ``target`` fixture)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.history import HistoryStore, RunRecord, SessionRecord, comparison_key
from pytest_llmperf.history.backends import target_label
from pytest_llmperf.history.gate import (
    DEFAULT_HISTORY_RUNS,
    HistoryGate,
    open_history_gate,
    parse_history_compare,
)
from pytest_llmperf.reports.baseline import Baseline, load_comparison
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.sim import start_sim_process
from pytest_llmperf.sim.process import SimProcess

TEST = "t.py::test_chat"
ENDPOINT = {"model": "sim-model", "api": "chat"}
LOAD = {"pattern": "concurrency", "concurrency": 8}
WORKLOAD = {"name": "synthetic", "output_tokens": 8, "requests": 200}


def accumulator(ttft_ms: float, *, requests: int = 200, seed: int = 0) -> MetricsAccumulator:
    """``requests`` completed requests: lognormal TTFT around ``ttft_ms``, 8 tokens at
    ~5 ms gaps (each request its own speed)."""
    rng = np.random.default_rng(seed)
    acc = MetricsAccumulator()
    for i, ttft in enumerate(rng.lognormal(np.log(ttft_ms), 0.2, requests)):
        t0 = i * 50_000_000
        gaps = (rng.lognormal(np.log(5.0), 0.1) * 1e6 * np.ones(7)).astype(np.int64).tolist()
        record = RequestRecord(index=i, t_sched=t0, t_send=t0, t_first=t0 + int(ttft * 1e6))
        record.gaps_ns = gaps
        record.t_last = record.t_end = record.t_first + sum(gaps)
        record.token_events = record.usage_completion_tokens = 8
        acc.add(record)
    return acc


def stored(acc: MetricsAccumulator, *, label: str = "run0", **workload: Any) -> RunRecord:
    w = {**WORKLOAD, **workload}
    return RunRecord(
        test=TEST,
        label=label,
        outcome="passed",
        key=comparison_key(ENDPOINT["model"], ENDPOINT["api"], LOAD, w),
        counts=acc.counts(),
        metrics=acc.summary(),
        state=acc.to_state(),
        load=dict(LOAD),
        workload=w,
    )


def append(target: str, tag: str, runs: Sequence[RunRecord]) -> int:
    record = SessionRecord("2026-11-23T10:00:00", "2026-11-23T10:01:00", tag, {}, {}, {})
    record.runs.extend(runs)
    with HistoryStore.open(target) as store:
        return store.append_session(record)


def result(acc: MetricsAccumulator, *, label: str = "run0", **workload: Any) -> RunResult:
    return RunResult({**WORKLOAD, **workload}, dict(LOAD), {}, acc, label=label)


def test_option_values() -> None:
    assert parse_history_compare("history") == DEFAULT_HISTORY_RUNS == 5
    assert parse_history_compare("history:3") == 3
    assert parse_history_compare("baseline.json") is None
    assert parse_history_compare(None) is None
    for bad in ("history:0", "history:-2", "history:x", "history:"):
        with pytest.raises(LlmPerfUsageError, match="--llm-baseline-compare") as info:
            parse_history_compare(bad)
        assert repr(bad) in str(info.value)


def test_history_needs_a_store(target: str) -> None:
    with pytest.raises(LlmPerfUsageError, match="--llm-history") as info:
        load_comparison("history:3", history=None)
    assert "--llm-baseline-compare" in str(info.value)
    gate = load_comparison("history:3", history=target)
    assert isinstance(gate, HistoryGate) and gate.n == 3
    assert isinstance(open_history_gate("history", history=target), HistoryGate)
    assert load_comparison(None) is None


def test_no_history_yet_is_a_note_not_a_failure(target: str) -> None:
    gate = open_history_gate("history", history=target)
    (check,) = gate.compare(TEST, [result(accumulator(50))], endpoint=ENDPOINT)
    assert check.verdict == "inconclusive" and check.metric == "*"
    assert check.reason.startswith("no history yet") and TEST in check.reason


def test_compares_with_the_merged_last_n_runs_and_names_them(target: str) -> None:
    # the oldest is very fast: with N = 3 it is left out, so 50 ms stays unchanged
    append(target, "old", [stored(accumulator(10, seed=1))])
    for i, tag in enumerate(("s1", "s2", "s3")):
        append(target, tag, [stored(accumulator(50, seed=10 + i))])
    gate = open_history_gate("history:3", history=target)
    checks = gate.compare(TEST, [result(accumulator(50, seed=99))], endpoint=ENDPOINT)
    by = {c.name: c for c in checks}
    assert by["ttft.p50"].verdict == "unchanged", by["ttft.p50"]
    assert by["ttft.p50"].samples == (600, 200)  # three runs merged exactly
    what = "history (last 3 runs, tags s1, s2, s3)"
    assert all(c.compared_with == what and what in c.test for c in checks)
    assert gate.describe(TEST) == f"{what} in {target_label(target)}"
    assert gate.path == f"history (last 3 comparable runs in {target_label(target)})"

    slow = gate.compare(TEST, [result(accumulator(70, seed=98))], endpoint=ENDPOINT)
    assert {c.name: c.verdict for c in slow}["ttft.p50"] == "regressed"


def test_fewer_runs_than_asked_compare_with_what_there_is(target: str) -> None:
    append(target, "", [stored(accumulator(50, seed=1))])
    gate = open_history_gate("history:4", history=target)
    checks = gate.compare(TEST, [result(accumulator(50, seed=2))], endpoint=ENDPOINT)
    assert checks[0].compared_with == "history (last 1 run of 4 wanted, tag session 1)"


def test_only_sessions_before_this_one_and_only_comparable_runs(target: str) -> None:
    append(target, "s1", [stored(accumulator(50, seed=1))])
    gate = open_history_gate("history", history=target)
    # stored after the gate opened (this session's own, or a parallel job's): not used
    append(target, "later", [stored(accumulator(10, seed=2))])
    # another workload (sizes aside) is another experiment
    append(target, "s0", [stored(accumulator(10, seed=3), output_tokens=64)])
    checks = gate.compare(TEST, [result(accumulator(50, seed=4))], endpoint=ENDPOINT)
    assert checks[0].compared_with == "history (last 1 run of 5 wanted, tag s1)"
    assert {c.name: c.verdict for c in checks}["ttft.p50"] == "unchanged"
    # --llm-scale changes the request count: still comparable
    scaled = gate.compare(
        TEST, [result(accumulator(50, requests=100, seed=5), requests=100)], endpoint=ENDPOINT
    )
    assert scaled[0].compared_with.startswith("history (last 1 run")
    other_model = gate.compare(
        TEST, [result(accumulator(50))], endpoint={**ENDPOINT, "model": "other"}
    )
    assert other_model[0].reason.startswith("no history yet")


def test_ungated_runs_are_not_compared(target: str) -> None:
    append(target, "s1", [stored(accumulator(50, seed=1))])
    gate = open_history_gate("history", history=target)
    warm = RunResult(dict(WORKLOAD), dict(LOAD), {}, accumulator(10), label="w", gated=False)
    assert gate.compare(TEST, [warm], endpoint=ENDPOINT) == []


def test_a_baseline_file_is_still_a_baseline(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"baseline_version": 1, "created_at": "x", "tests": {}}))
    source = load_comparison(str(path))
    assert isinstance(source, Baseline) and source.describe(TEST) == f"{path} (x)"


# -- end to end: four sessions on the simulator ------------------------------------

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=8, requests=48, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=8)
async def test_chat(llm_loadgen):
    await llm_loadgen.run()
"""
# 10 ms token gaps against 30 ms for the slow server (+200%): a threshold of 100% tells
# them apart with room for a busy machine's jitter (itl.p99 12.8 -> 19.8 ms, +55%, was seen
# between two sessions on the same fast server under pytest -n 2)
STEADY = {"ttft_ms": 30, "itl_ms": 10}
THRESHOLD = "--llm-baseline-threshold=100%"


@pytest.fixture(scope="module")
def fast_sim() -> Iterator[SimProcess]:
    with start_sim_process("fixed", overrides=STEADY) as sim:
        yield sim


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[SimProcess]:
    with start_sim_process("fixed", overrides={**STEADY, "itl_ms": 30}) as sim:
        yield sim


def test_three_sessions_then_a_gate_that_passes_and_one_that_fails(
    pytester: pytest.Pytester, fast_sim: SimProcess, slow_sim: SimProcess, target: str
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    history = f"--llm-history={target}"
    gate = "--llm-baseline-compare=history:3"
    # nothing to compare with yet: inconclusive, which fails by default (a gate that judged
    # nothing is not green); a first session seeds the store with --llm-inconclusive=warn
    first = pytester.runpytest(
        f"--llm-endpoint={fast_sim.url}",
        history,
        gate,
        "--llm-history-tag=s1",
        "--llm-inconclusive=warn",
    )
    first.assert_outcomes(passed=1, warnings=1)
    first.stdout.fnmatch_lines(["*no history yet*", "*LlmPerfInconclusiveWarning*"])
    for tag in ("s2", "s3"):
        pytester.runpytest(
            f"--llm-endpoint={fast_sim.url}", history, f"--llm-history-tag={tag}"
        ).assert_outcomes(passed=1)

    same = pytester.runpytest(
        f"--llm-endpoint={fast_sim.url}",
        history,
        gate,
        THRESHOLD,
        "--llm-json=same.json",
        "--llm-history-tag=s4",
    )
    same.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "same.json").read_text())
    checks = report["tests"][0]["baseline"]
    assert checks and all(c["verdict"] != "regressed" for c in checks), checks
    assert {c["compared_with"] for c in checks} == {"history (last 3 runs, tags s1, s2, s3)"}
    assert report["session"]["baseline"]["compared_with"].startswith("history (last 3")

    slow = pytester.runpytest(
        f"--llm-endpoint={slow_sim.url}",
        history,
        gate,
        THRESHOLD,
        "--junitxml=j.xml",
        "-o",
        "junit_family=xunit1",
        "--llm-html=r.html",
    )
    slow.assert_outcomes(failed=1)
    slow.stdout.fnmatch_lines(
        [
            # the passing fourth session is history now too: the last three are s2, s3, s4
            "*Regressed against baseline history (last 3 runs, tags s2, s3, s4) in "
            f"{target_label(target)}*",
            "*itl.p50*run0*REGRESSED*",
        ]
    )
    junit = (pytester.path / "j.xml").read_text()
    assert 'name="llm_baseline.compared_with"' in junit
    assert "history (last 3 runs, tags s2, s3, s4)" in junit
    html = (pytester.path / "r.html").read_text()
    assert "history (last 3 runs, tags s2, s3, s4)" in html


def test_history_without_a_store_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("--llm-baseline-compare=history:2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llm-baseline-compare*history:2*--llm-history*"])
    bad = pytester.runpytest("--llm-baseline-compare=history:zero", "--llm-history=h.sqlite")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--llm-baseline-compare*'history:zero'*integer >= 1*"])
