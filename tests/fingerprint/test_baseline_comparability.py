"""A baseline saved against one server configuration and compared against another: the
comparisons say ``comparable: false`` and what differs, the failure message says so,
``--llm-baseline-strict`` makes it a usage error; an older baseline without a fingerprint
compares as before, ``comparable: null``. Fingerprints are taken from stub vLLM servers
over real sockets; the runs are synthetic (what is judged is the comparability)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fingerprint_stubs import Calls, Serve, vllm_app

from pytest_llmperf.client.endpoint import Endpoint, normalize_base_url
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.reports.baseline import (
    Baseline,
    build_baseline,
    load_baseline,
    write_baseline,
)
from pytest_llmperf.reports.outcome import judge_test
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.server_metrics.fingerprint import session_fingerprint

NODE = "tests/test_chat.py::test_latency"
ENDPOINT = {"url": "http://127.0.0.1:1/v1", "model": "tiny-llama", "api": "chat"}
LOAD = {"pattern": "concurrency", "concurrency": 4}
WORKLOAD = {"name": "synthetic", "output_tokens": 8, "requests": 400}


def run(ttft_ms: float, *, seed: int) -> RunResult:
    """400 requests with lognormal TTFT around ``ttft_ms`` and 8 tokens each."""
    rng = np.random.default_rng(seed)
    acc = MetricsAccumulator()
    for i, ttft in enumerate(rng.lognormal(np.log(ttft_ms), 0.2, 400)):
        t0 = i * 20_000_000
        gaps = [int(g * 1e6) for g in rng.lognormal(np.log(5.0), 0.1, 7)]
        record = RequestRecord(index=i, t_sched=t0, t_send=t0, t_first=t0 + int(ttft * 1e6))
        record.gaps_ns = gaps
        record.t_last = record.t_end = record.t_first + sum(gaps)
        record.token_events = record.usage_completion_tokens = 8
        acc.add(record)
    return RunResult(dict(WORKLOAD), dict(LOAD), dict(ENDPOINT), acc, label="run0")


def session_with(result: RunResult) -> SessionData:
    data = SessionData()
    payload: dict[str, Any] = {
        "endpoint": ENDPOINT,
        "runs": [result.to_dict()],
        "slos": [],
        "states": [result.accumulator.to_state()],
        "analyses": [],
    }
    data.add(NODE, "passed", payload)
    return data


def fingerprint(serve: Serve, **config: Any) -> dict[str, Any]:
    root = serve(vllm_app(Calls("uvicorn"), **config))
    return session_fingerprint(Endpoint(normalize_base_url(root)))


def saved(tmp_path: Path, fp: dict[str, Any] | None) -> Baseline:
    document = build_baseline(
        session_with(run(40, seed=1)), endpoint=ENDPOINT, options={}, fingerprint=fp
    )
    return load_baseline(write_baseline(tmp_path / "baseline.json", document))


def test_another_max_model_len_is_flagged_on_every_comparison(serve: Serve, tmp_path: Path) -> None:
    baseline = saved(tmp_path, fingerprint(serve, max_model_len=2048))
    assert baseline.fingerprint is not None
    assert baseline.fingerprint["model"]["max_model_len"] == 2048
    current = fingerprint(serve, max_model_len=1024)
    found = baseline.check_comparability(current)
    assert found["comparable"] is False
    assert found["differs"] == ["model.max_model_len: 2048 -> 1024"]
    slower = run(60, seed=2)
    checks = baseline.compare(NODE, [slower], endpoint=ENDPOINT)
    assert checks and all(c.comparable is False for c in checks)
    assert all(c.differs == ("model.max_model_len: 2048 -> 1024",) for c in checks)
    entry = checks[0].to_dict()
    assert entry["comparable"] is False
    assert entry["differs"] == ["model.max_model_len: 2048 -> 1024"]
    json.dumps(entry)  # plain JSON
    described = baseline.describe(NODE)
    assert described.startswith(f"{baseline.path} (")
    assert "NOT COMPARABLE" in described and "model.max_model_len: 2048 -> 1024" in described
    assert any(c.verdict == "regressed" for c in checks)
    outcome = judge_test(NODE, [], [slower], [], checks, baseline=described)
    assert outcome.kind == "fail"
    first = outcome.message.splitlines()[0]  # the failure table's heading says so
    assert first.startswith(f"Regressed against baseline {baseline.path}")
    assert "NOT COMPARABLE, the server or machine differs: model.max_model_len" in first


def test_the_same_configuration_is_comparable(serve: Serve, tmp_path: Path) -> None:
    baseline = saved(tmp_path, fingerprint(serve))
    assert baseline.check_comparability(fingerprint(serve), strict=True)["comparable"] is True
    checks = baseline.compare(NODE, [run(40, seed=3)], endpoint=ENDPOINT)
    assert checks and all(c.comparable is True and c.differs == () for c in checks)
    assert "NOT COMPARABLE" not in baseline.describe(NODE)


def test_strict_makes_a_difference_a_usage_error_naming_the_file(
    serve: Serve, tmp_path: Path
) -> None:
    baseline = saved(tmp_path, fingerprint(serve, max_model_len=2048))
    with pytest.raises(LlmPerfUsageError) as raised:
        baseline.check_comparability(fingerprint(serve, max_model_len=1024), strict=True)
    text = str(raised.value)
    assert str(tmp_path / "baseline.json") in text
    assert "model.max_model_len: 2048 -> 1024" in text


def test_an_older_baseline_without_a_fingerprint_is_unknown_never_an_error(
    serve: Serve, tmp_path: Path
) -> None:
    baseline = saved(tmp_path, None)
    assert "fingerprint" not in baseline.document and baseline.fingerprint is None
    found = baseline.check_comparability(fingerprint(serve), strict=True)
    assert found["comparable"] is None and "no fingerprint stored" in found["note"]
    checks = baseline.compare(NODE, [run(40, seed=4)], endpoint=ENDPOINT)
    assert checks and all(c.comparable is None for c in checks)
    assert all(c.to_dict()["comparable"] is None for c in checks)


def test_without_a_check_comparisons_carry_null(tmp_path: Path) -> None:
    """A plugin that never hands over a fingerprint: the keys are there, null."""
    baseline = saved(tmp_path, {"server": {"family": "vllm"}})
    (check, *_) = baseline.compare(NODE, [run(40, seed=5)], endpoint=ENDPOINT)
    assert check.to_dict()["comparable"] is None and check.to_dict()["differs"] == []
