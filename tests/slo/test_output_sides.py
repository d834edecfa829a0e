"""Where output_match's other side comes from: a baseline file's run of the same test and
label, the history's last good run; never a run of another workload or model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pytest_llmperf.history.gate import HistoryGate
from pytest_llmperf.history.records import StoredRun
from pytest_llmperf.reports.baseline import Baseline
from pytest_llmperf.results import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult

WORKLOAD = {"name": "synthetic", "seed": 9, "greedy": True, "requests": 40}
LOAD = {"pattern": "concurrency", "concurrency": 8}
ENDPOINT = {"model": "sim-fixed", "api": "chat"}


def state(*digests: str) -> dict[str, Any]:
    acc = MetricsAccumulator()
    for i, digest in enumerate(digests):
        acc.outputs.add(i, digest, 3, "")
    return acc.to_state()


def result(label: str = "run0", **workload: Any) -> RunResult:
    return RunResult({**WORKLOAD, **workload}, dict(LOAD), {}, MetricsAccumulator(), label=label)


def baseline(runs: dict[str, Any], model: str = "sim-fixed") -> Baseline:
    document = {
        "baseline_version": 1,
        "created_at": "2026-11-25T00:00:00+00:00",
        "endpoint": {"model": model, "api": "chat"},
        "tests": {"t.py::test_greedy": {"runs": runs}},
    }
    return Baseline("b.json", document)


def test_the_baseline_gives_the_same_labels_outputs_whatever_the_load() -> None:
    stored = {"workload": {**WORKLOAD, "requests": 80}, "load": {"pattern": "concurrency",
              "concurrency": 1}, "state": state("a", "b")}  # fmt: skip
    other = baseline({"run0": stored}).other_outputs("t.py::test_greedy", result(), ENDPOINT)
    assert other.against == "baseline" and other.reason == ""
    assert other.outputs.indices() == [0, 1] and other.compared_with.startswith("baseline b.json")


def test_the_baseline_gives_no_outputs_with_the_reason() -> None:
    stored = {"workload": WORKLOAD, "load": LOAD, "state": state("a")}
    source = baseline({"run0": stored})
    missing = source.other_outputs("t.py::test_greedy", result("run1"), ENDPOINT)
    assert not missing.outputs and "no baseline for t.py::test_greedy [run1]" in missing.reason
    other_seed = source.other_outputs("t.py::test_greedy", result(seed=10), ENDPOINT)
    assert not other_seed.outputs  # another workload: its field named with both values
    assert other_seed.reason == "not comparable: workload.seed: 9 -> 10 (baseline -> now)"
    other_model = baseline({"run0": stored}, model="sim-other").other_outputs(
        "t.py::test_greedy", result(), ENDPOINT
    )
    assert not other_model.outputs and "model" in other_model.reason
    plain = baseline({"run0": {**stored, "state": MetricsAccumulator().to_state()}})
    none_kept = plain.other_outputs("t.py::test_greedy", result(), ENDPOINT)
    assert not none_kept.outputs and "kept no greedy outputs" in none_kept.reason


def stored_run(session: int, outcome: str, *digests: str) -> StoredRun:
    return StoredRun(
        test="t.py::test_greedy",
        label="run0",
        outcome=outcome,
        key="k",
        counts={},
        metrics={},
        session_id=session,
        when=f"2026-11-2{session}",
        tag=f"main@{session}",
        load=LOAD,
        workload=WORKLOAD,
        state_json=json.dumps(state(*digests)),
    )


class _Store:
    where = "h.sqlite"

    def __init__(self, runs: list[StoredRun]) -> None:
        self.runs = runs

    def comparable(
        self, test: str, key: str, n: int, before_session: int | None = None
    ) -> list[StoredRun]:
        return self.runs[-n:]


def gate(runs: list[StoredRun]) -> HistoryGate:
    @contextmanager
    def opener() -> Iterator[_Store]:
        yield _Store(runs)

    return HistoryGate(opener, "h.sqlite", 5, before_session=None)


def test_history_gives_the_newest_passed_run_with_outputs() -> None:
    runs = [
        stored_run(1, "passed", "old"),
        stored_run(2, "passed", "good"),
        stored_run(3, "failed", "bad"),
        stored_run(4, "passed"),  # kept no outputs
    ]
    other = gate(runs).other_outputs("t.py::test_greedy", result(), ENDPOINT)
    assert other.against == "history" and other.outputs[0].digest == "good"
    assert "main@2" in other.compared_with


def test_history_without_a_good_run_says_so() -> None:
    other = gate([stored_run(1, "failed", "x")]).other_outputs(
        "t.py::test_greedy", result(), ENDPOINT
    )
    assert not other.outputs and "no earlier passed run" in other.reason
