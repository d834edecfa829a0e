"""A run of issue 28's request paths built from records, for report tests that need no
server: three served models (two adapters and the base model, 40/40/20), outputs
checked against a schema with a few invalid, greedy fingerprints, an ``output_match``
against a baseline that four samples part from, an ``output_consistency`` that agrees,
and verdicts on the whole run and per model.

A plain module (not conftest) so test modules can import its helpers by a unique name."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from synthetic_session import ENDPOINT

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.outputs import OutputMatch
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.verdicts import SloVerdict, evaluate, evaluate_models
from pytest_llmperf.specs.slo import parse_slo

MS = 1_000_000
NODEID = "tests/test_paths.py::test_adapters"
MODELS = ("sim-lora-1", "sim-lora-1", "sim-lora-2", "sim-lora-2", "sim-model")
TTFT_MS = {"sim-lora-1": 40.0, "sim-lora-2": 60.0, "sim-model": 30.0}
INVALID = {7: "$.title: 'Lisbon in spring' is too long", 21: "$: 'city' is a required property"}
INVALID_AT = (7, 21, 33)  # sample 33 fails like sample 7
MISMATCHES: list[dict[str, Any]] = [
    {"index": 3, "position": 12},
    {"index": 17, "position": 0},
    {"index": 40, "position": 5},
    {"index": 52, "position": None},
]
RUN_SLOS = ("valid_rate >= 100%", "output_match >= 99%", "output_consistency >= 99%")
MODEL_SLOS = ("ttft.p50 < 50ms",)
WORKLOAD = {
    "name": "synthetic",
    "seed": 7,
    "requests": 100,
    "structured": "output",
    "tools": ["get_weather", "search"],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "adapters": {"sim-lora-1": 0.4, "sim-lora-2": 0.4, "base": 0.2},
    "greedy": True,
}


def paths_record(index: int, model: str) -> RequestRecord:
    t0 = index * 25 * MS
    ttft = TTFT_MS[model] + index % 5
    r = RequestRecord(index=index, t_sched=t0, t_send=t0, t_first=t0 + int(ttft * MS))
    r.t_last = r.t_end = r.t_first + 7 * 3 * MS
    r.token_events = 8
    r.gaps_ns = [3 * MS] * 7
    r.usage_completion_tokens = 8
    r.usage_prompt_tokens = 16
    r.model = model
    r.output_checked = True
    if index in INVALID_AT:
        r.invalid = "schema"
        r.invalid_detail = INVALID[7 if index == 33 else index]
    r.output_digest = f"{index:016x}"
    r.output_marks = "AAEAAgAD"
    return r


def paths_run(label: str = "run0") -> RunResult:
    acc = MetricsAccumulator()
    for i in range(100):
        acc.add(paths_record(i, MODELS[i % len(MODELS)]))
    return RunResult(
        workload=dict(WORKLOAD),
        load={"pattern": "concurrency", "concurrency": 4},
        endpoint=ENDPOINT,
        accumulator=acc,
        self_check={"generator_bound": False, "reasons": []},
        duration_s=2.5,
        label=label,
        output_match=OutputMatch(
            share=0.9,
            compared=40,
            mismatches=[dict(m) for m in MISMATCHES],
            against="baseline",
            mismatched=4,
            compared_with="baseline b.json (2026-11-25T22:00:00+00:00)",
        ),
        output_consistency=OutputMatch(
            share=1.0, compared=40, against="alone", compared_with="alone (concurrency 1)"
        ),
    )


def paths_verdicts(run: RunResult) -> list[SloVerdict]:
    whole = [evaluate(parse_slo(e), run) for e in RUN_SLOS]
    per_model = [replace(parse_slo(e), per_model=True) for e in MODEL_SLOS]
    return whole + [evaluate(s, run) for s in per_model] + evaluate_models(per_model, run)


def paths_session(run: RunResult | None = None, outcome: str = "failed") -> SessionData:
    run = run or paths_run()
    data = SessionData()
    data.add(
        NODEID,
        outcome,
        {
            "endpoint": ENDPOINT,
            "runs": [run.to_dict()],
            "slos": [v.to_dict() for v in paths_verdicts(run)],
            "states": [run.accumulator.to_state()],
        },
    )
    return data
