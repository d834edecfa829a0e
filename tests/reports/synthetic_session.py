"""A session's data built from synthetic runs, for report tests that need no server.

A plain module (not conftest) so test modules can import its helpers by a unique name."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.verdicts import evaluate
from pytest_llmperf.specs.slo import parse_slo

ENDPOINT = {
    "url": "http://127.0.0.1:1/v1",
    "model": "sim-model",
    "api": "chat",
    "simulator": "fixed",
    "api_key": "none",
    "server_version": "0.1",
    "server_software": "test",
}


def synthetic_run(median_ms: float, n: int, *, seed: int, rate: float, label: str) -> RunResult:
    """``n`` requests with lognormal TTFT, 16 output tokens, sent at ``rate``/s."""
    rng = np.random.default_rng(seed)
    acc = MetricsAccumulator()
    for i, ttft in enumerate(rng.lognormal(np.log(median_ms), 0.35, n)):
        t0 = int(i / rate * 1e9)
        first = t0 + int(ttft * 1e6)
        gaps = [int(g * 1e6) for g in rng.lognormal(np.log(5.0), 0.2, 15)]
        record = RequestRecord(index=i, t_sched=t0, t_send=t0 + 200_000, t_first=first)
        record.t_last = first + sum(gaps)
        record.t_end = record.t_last
        record.token_events = 16
        record.gaps_ns = gaps
        record.usage_completion_tokens = 16
        record.usage_prompt_tokens = 32
        acc.add(record)
    failed = RequestRecord(index=n, t_sched=int(n / rate * 1e9))
    failed.fail(ErrorKind.HTTP, "HTTP 500", now=failed.t_sched + 1_000_000)
    acc.add(failed)
    return RunResult(
        workload={"name": "synthetic", "seed": seed, "input_tokens": [32, 32], "requests": n},
        load={"pattern": "poisson", "rate": rate, "seed": seed},
        endpoint=ENDPOINT,
        accumulator=acc,
        self_check={
            "schedule_lag_p50_ms": 0.2,
            "schedule_lag_p99_ms": 0.4,
            "planned_rate": rate,
            "achieved_rate": rate,
            "client_cpu_share": 0.1,
            "generator_bound": False,
            "reasons": [],
        },
        duration_s=n / rate,
        label=label,
    )


def payload(runs: list[RunResult], slos: list[str], **extra: Any) -> dict[str, Any]:
    verdicts = [evaluate(parse_slo(e), r) for r in runs for e in slos]
    return {
        "endpoint": ENDPOINT,
        "runs": [r.to_dict() for r in runs],
        "slos": [v.to_dict() for v in verdicts],
        "states": [r.accumulator.to_state() for r in runs],
        "analyses": [],
        **extra,
    }


def make_session_data() -> SessionData:
    data = SessionData()
    one = synthetic_run(40, 1200, seed=1, rate=40, label="run0")
    data.add(
        "tests/test_chat.py::test_latency[<b>x</b>]",
        "passed",
        payload([one], ["ttft.p99 < 500ms", "ttft.p50 < 10ms", "error_rate < 1%"]),
    )
    sweep = [
        synthetic_run(
            30 * (1 + k), 300, seed=10 + k, rate=10 * (k + 1), label=f"run{k}(rate={10 * (k + 1)})"
        )
        for k in range(3)
    ]
    analysis = {
        "title": "latency vs rate",
        "kind": "curve",
        "columns": ["rate", "ttft_p50", "ttft_p99"],
        "rows": [[10, 30.0, 60.0], [20, 60.0, 110.0], [30, 90.0, 190.0]],
        "x": "rate",
        "y": ["ttft_p50", "ttft_p99"],
    }
    table = {"title": "cache", "kind": "table", "columns": ["k", "v"], "rows": [["hit", 0.5]]}
    data.add(
        "tests/test_chat.py::test_sweep",
        "failed",
        payload(sweep, ["tpot.p50 < 100ms"], analyses=[analysis, table]),
    )
    return data
