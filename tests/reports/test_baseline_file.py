"""Baseline files: lossless round trip, identity checks, and comparisons against them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_session import ENDPOINT, synthetic_run

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.reports.baseline import build_baseline, load_baseline, write_baseline
from pytest_llmperf.reports.session_data import SessionData

NODE = "tests/test_chat.py::test_latency[<b>x</b>]"


def saved(session_data: SessionData, tmp_path: Path) -> Path:
    document = build_baseline(session_data, endpoint=ENDPOINT, options={"scale": 1.0})
    return write_baseline(tmp_path / "base" / "baseline.json", document)


def test_round_trip_keeps_histograms_and_identity(
    session_data: SessionData, tmp_path: Path
) -> None:
    baseline = load_baseline(saved(session_data, tmp_path))
    assert (
        baseline.endpoint["model"] == "sim-model" and baseline.endpoint["server_version"] == "0.1"
    )
    assert baseline.document["options"] == {"scale": 1.0}
    stored = baseline.run(NODE, "run0")
    assert stored is not None and stored["load"]["rate"] == 40
    original = session_data.tests[NODE].states[0]
    assert stored["state"]["histograms"]["ttft"] == original["histograms"]["ttft"]
    assert set(baseline.document["tests"]) == set(session_data.tests)
    assert "api_key" not in json.dumps(baseline.document).replace('"api_key": "none"', "")


def test_same_run_is_unchanged_slower_run_regresses(
    session_data: SessionData, tmp_path: Path
) -> None:
    baseline = load_baseline(saved(session_data, tmp_path))
    same = synthetic_run(40, 1200, seed=1, rate=40, label="run0")
    checks = baseline.compare(NODE, [same], endpoint=ENDPOINT)
    assert {c.verdict for c in checks} == {"unchanged"}
    slower = synthetic_run(52, 1200, seed=5, rate=40, label="run0")
    slower.workload, slower.load = same.workload, same.load  # same experiment, other samples
    by = {c.name: c for c in baseline.compare(NODE, [slower], endpoint=ENDPOINT)}
    assert by["ttft.p50"].verdict == "regressed" and by["ttft.p99"].verdict == "regressed"
    assert by["tpot.p50"].verdict == "unchanged"


@pytest.mark.parametrize(
    ("nodeid", "label", "endpoint", "rate", "why", "differs"),
    [
        (
            NODE,
            "run0",
            {**ENDPOINT, "model": "other"},
            40,
            "not comparable: model:",
            ["model: sim-model -> other"],
        ),
        (NODE, "run9", ENDPOINT, 40, "no baseline for", []),
        ("tests/new.py::test_new", "run0", ENDPOINT, 40, "no baseline for", []),
        (NODE, "run0", ENDPOINT, 80, "not comparable: load.rate:", ["load.rate: 40 -> 80"]),
    ],
)
def test_what_cannot_be_compared_is_inconclusive_naming_what_differs(
    session_data: SessionData,
    tmp_path: Path,
    nodeid: str,
    label: str,
    endpoint: dict,
    rate: float,
    why: str,
    differs: list[str],
) -> None:
    """Inconclusive (the test's outcome follows --llm-inconclusive: it fails by default,
    tests/plugin/test_baseline_not_compared.py), each differing field with both values."""
    baseline = load_baseline(saved(session_data, tmp_path))
    run = synthetic_run(90, 1200, seed=1, rate=rate, label=label)
    (check,) = baseline.compare(nodeid, [run], endpoint=endpoint)
    assert check.verdict == "inconclusive" and why in check.reason and not check.note_only
    assert list(check.differs) == differs
    if differs:
        assert check.comparable is False and all(d in check.reason for d in differs)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "not found"),
        ("{not json", "cannot read"),
        ('{"tests": []}', "no 'tests' mapping"),
        ('{"baseline_version": 99, "tests": {}}', "baseline_version 99"),
    ],
)
def test_bad_files_are_usage_errors_naming_the_file(
    tmp_path: Path, content: str | None, why: str
) -> None:
    path = tmp_path / "b.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(LlmPerfUsageError) as info:
        load_baseline(path)
    assert str(path) in str(info.value) and why in str(info.value)
