"""Output checks, per-model breakdowns and greedy outputs in the accumulator, from
hand-built records: counts, rates, state round trips and merges (worker processes)."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import pytest

from pytest_llmperf.client.output_check import EXAMPLE_SEP
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.results import MetricsAccumulator
from pytest_llmperf.results.output_samples import MAX_SAMPLES, InvalidSamples
from pytest_llmperf.results.outputs import OutputMatch, SampleOutputs
from pytest_llmperf.results.run_result import RunResult

MS = 1_000_000
T0 = 10_000 * MS


def done(
    index: int = 0,
    *,
    model: str = "",
    checked: bool = False,
    invalid: str = "",
    detail: str = "",
    digest: str = "",
    marks: str = "",
    tokens: int = 4,
    ttft_ms: float = 20.0,
    error: ErrorKind | None = None,
) -> RequestRecord:
    """A completed (or, with ``error``, failed) request sent at T0 + index ms."""
    r = RequestRecord(index=index, t_sched=T0 + index * MS)
    r.t_send = r.t_sched
    r.model = model
    if error is not None:
        r.fail(error, "boom", now=r.t_sched + 5 * MS)
        return r
    r.t_first = r.t_sched + int(ttft_ms * MS)
    r.t_out = r.t_first
    r.t_last = r.t_first + (tokens - 1) * 10 * MS
    r.t_end = r.t_last
    r.token_events = tokens
    r.gaps_ns = [10 * MS] * (tokens - 1)
    r.usage_completion_tokens = tokens
    r.output_checked = checked
    r.invalid = invalid
    r.invalid_detail = detail
    r.output_digest = digest
    r.output_marks = marks
    return r


def marks(*pieces: int) -> str:
    return base64.b64encode(b"".join(p.to_bytes(2, "big") for p in pieces)).decode()


def test_plain_records_add_nothing_new() -> None:
    acc = MetricsAccumulator()
    acc.add(done(0))
    assert acc.counts()["invalid"] == 0 and "checked" not in acc.counts()
    assert acc.checked == 0 and not acc.models and not acc.outputs
    assert "valid_rate" not in acc.summary()
    assert math.isnan(acc.rate("valid_rate"))
    state = acc.to_state()
    assert not {"models", "invalid_samples", "outputs"} & set(state)
    run = RunResult({}, {}, {}, acc).to_dict()
    assert not {"by_model", "invalid_samples", "outputs", "output_match"} & set(run)


def test_checked_and_invalid_outputs_count_and_stay_completed() -> None:
    acc = MetricsAccumulator()
    acc.add(done(0, checked=True))
    acc.add(done(1, checked=True, invalid="schema", detail="$.title: 'xx' is too long"))
    acc.add(done(2, checked=True, invalid="schema", detail="$.title: 'xx' is too long"))
    acc.add(done(3, checked=True, invalid="not_json", detail="Expecting value: line 1"))
    acc.add(done(4, error=ErrorKind.HTTP))  # a failed request is never checked
    counts = acc.counts()
    assert counts["completed"] == 4 and counts["failed"] == 1
    assert counts["invalid"] == 3 and counts["checked"] == 4
    assert acc.histograms["ttft"].count == 4  # invalid outputs keep their latencies
    assert acc.rate("valid_rate") == pytest.approx(0.25)
    assert acc.summary()["valid_rate"] == 0.25
    assert acc.invalid_samples.to_list() == [
        {"kind": "schema", "message": "$.title: 'xx' is too long", "count": 2},
        {"kind": "not_json", "message": "Expecting value: line 1", "count": 1},
    ]
    run = RunResult({}, {}, {}, acc).to_dict()
    assert run["counts"]["invalid"] == 3
    assert run["invalid_samples"][0]["count"] == 2
    assert run["metrics"]["valid_rate"] == 0.25


def test_invalid_samples_are_bounded_and_cut() -> None:
    samples = InvalidSamples()
    for k in range(MAX_SAMPLES + 3):
        samples.add("schema", f"reason {k} " + "x" * 400)
    listed = samples.to_list()
    assert len(listed) == MAX_SAMPLES and all(len(s["message"]) == 300 for s in listed)


def test_reasons_group_without_their_examples_and_keep_the_first() -> None:
    # outputs cut the same way differ in their text: one reason, shown with its first example
    samples = InvalidSamples()
    for text in ('\'{"a": "x\'', '\'{"a": "yy\'', '\'{"a": "zzz\''):
        samples.add("not_json", f"the answer is not JSON: Unterminated string{EXAMPLE_SEP}{text}")
    samples.add("not_json", "the answer is not JSON: Extra data; e.g. line 1 column 9: 'x'")
    assert samples.to_list() == [
        {
            "kind": "not_json",
            "message": 'the answer is not JSON: Unterminated string; e.g. \'{"a": "x\'',
            "count": 3,
        },
        {
            "kind": "not_json",
            "message": "the answer is not JSON: Extra data; e.g. line 1 column 9: 'x'",
            "count": 1,
        },
    ]
    merged = InvalidSamples()
    merged.merge(samples)
    merged.merge(samples)
    assert [s["count"] for s in merged.to_list()] == [6, 2]


def test_an_invalid_output_is_not_good() -> None:
    acc = MetricsAccumulator(request_limits_ms={"ttft": 500.0})
    acc.add(done(0, checked=True))
    acc.add(done(1, checked=True, invalid="schema", detail="at $.a: 'x' is too long"))
    acc.add(done(2))  # not checked: good within its limits
    assert acc.completed == 3 and acc.rate("goodput") == pytest.approx(2 / 3)


def test_models_break_down_like_stages() -> None:
    acc = MetricsAccumulator(request_limits_ms={"ttft": 50})
    acc.add(done(0, model="sim-lora-1", ttft_ms=10))
    acc.add(done(1, model="sim-lora-1", ttft_ms=100, checked=True, invalid="schema"))
    acc.add(done(2, model="sim-model", ttft_ms=30))
    acc.add(done(3, model="sim-lora-2", error=ErrorKind.HTTP))
    acc.add(done(4))  # no model named: in the run, in no breakdown
    assert sorted(acc.models) == ["sim-lora-1", "sim-lora-2", "sim-model"]
    lora = acc.models["sim-lora-1"]
    assert lora.counts()["completed"] == 2 and lora.counts()["invalid"] == 1
    assert lora.good == 1 and lora.histograms["ttft"].count == 2
    assert acc.models["sim-lora-2"].counts()["failed"] == 1
    assert not lora.models and not lora.outputs  # a breakdown is not split again
    by_model = RunResult({}, {}, {}, acc).by_model
    assert list(by_model) == ["sim-lora-1", "sim-lora-2", "sim-model"]
    assert set(by_model["sim-model"]) == {"counts", "metrics", "token_lengths"}
    assert by_model["sim-lora-1"]["metrics"]["valid_rate"] == 0.0
    part = RunResult({}, {}, {}, acc, label="run0").model_result("sim-lora-1")
    assert part.label == "run0 model sim-lora-1" and part.counts["completed"] == 2


def test_greedy_outputs_are_kept_by_sample_first_wins() -> None:
    acc = MetricsAccumulator()
    acc.add(done(3, digest="a" * 16, marks=marks(1, 2, 3), tokens=3))
    acc.add(done(3, digest="b" * 16, marks=marks(9), tokens=3))  # the same sample again
    acc.add(done(1, digest="c" * 16, marks=marks(4), tokens=2, model="sim-lora-1"))
    acc.add(done(2, error=ErrorKind.HTTP, digest="d" * 16))  # failed: no output
    assert acc.outputs.indices() == [1, 3]
    assert acc.outputs[3].digest == "a" * 16 and acc.outputs[3].tokens == 3
    assert not acc.models["sim-lora-1"].outputs
    assert RunResult({}, {}, {}, acc).to_dict()["outputs"] == {
        "1": {"digest": "c" * 16, "tokens": 2, "marks": marks(4)},
        "3": {"digest": "a" * 16, "tokens": 3, "marks": marks(1, 2, 3)},
    }


def test_outputs_keep_the_lowest_indices_whatever_the_order() -> None:
    ordered, shuffled = SampleOutputs(limit=3), SampleOutputs(limit=3)
    for i in range(6):
        ordered.add(i, f"{i:016x}", 1, "")
    for i in (5, 1, 4, 0, 3, 2):
        shuffled.add(i, f"{i:016x}", 1, "")
    assert ordered.indices() == shuffled.indices() == [0, 1, 2]


def test_new_state_round_trips_through_json_and_merges() -> None:
    a, b = MetricsAccumulator(), MetricsAccumulator()
    a.add(done(0, model="sim-lora-1", checked=True, digest="1" * 16, marks=marks(1)))
    a.add(
        done(1, model="sim-lora-2", checked=True, invalid="schema", detail="bad", digest="2" * 16)
    )
    b.add(done(2, model="sim-lora-1", checked=True, invalid="schema", detail="bad"))
    b.add(done(1, model="sim-model", checked=True, digest="f" * 16))  # sample 1 again
    restored = [MetricsAccumulator.from_state(json.loads(json.dumps(x.to_state()))) for x in (a, b)]
    assert restored[0].to_state() == a.to_state()
    merged = restored[0]
    merged.merge(restored[1])
    assert merged.counts()["checked"] == 4 and merged.counts()["invalid"] == 2
    assert merged.invalid_samples.to_list() == [{"kind": "schema", "message": "bad", "count": 2}]
    assert sorted(merged.models) == ["sim-lora-1", "sim-lora-2", "sim-model"]
    assert merged.models["sim-lora-1"].counts()["issued"] == 2
    assert merged.models["sim-lora-1"].counts()["invalid"] == 1
    assert merged.outputs.indices() == [0, 1] and merged.outputs[1].digest == "2" * 16
    # an old state, from before these fields, still loads
    old = a.to_state()
    for key in ("models", "invalid_samples", "outputs"):
        old.pop(key)
    for key in ("checked", "invalid"):
        old["counts"].pop(key)
    legacy = MetricsAccumulator.from_state(old)
    assert legacy.checked == 0 and not legacy.models and not legacy.outputs


def test_output_match_to_dict_round_trips() -> None:
    match = OutputMatch(0.9, 10, [{"index": 4, "position": 7}], "baseline", 1, "baseline b.json")
    assert OutputMatch.from_dict(match.to_dict()) == match
    assert match.to_dict() == {
        "share": 0.9,
        "compared": 10,
        "mismatched": 1,
        "mismatches": [{"index": 4, "position": 7}],
        "against": "baseline",
        "compared_with": "baseline b.json",
    }


def test_the_event_log_replays_models_validity_and_outputs(tmp_path: Path) -> None:
    from pytest_llmperf.results.event_log import analyse_event_log
    from pytest_llmperf.results.recorder import EventRecorder

    records = [
        done(0, model="sim-lora-1", checked=True, digest="1" * 16, marks=marks(1, 2)),
        done(1, model="sim-model", checked=True, invalid="schema", detail="bad", digest="2" * 16),
        done(2, model="sim-lora-1", error=ErrorKind.HTTP),
        done(3),
    ]
    live = MetricsAccumulator()
    path = tmp_path / "run.sqlite"
    recorder = EventRecorder(path, meta={"label": "run0"})
    for r in records:
        live.add(r)
        recorder.record(r)
    recorder.close()
    replay = analyse_event_log(path)
    assert replay.counts() == live.counts()
    assert replay.invalid_samples.to_list() == live.invalid_samples.to_list()
    assert {k: v.counts() for k, v in replay.models.items()} == {
        k: v.counts() for k, v in live.models.items()
    }
    assert replay.outputs.to_dict() == live.outputs.to_dict()


def test_result_metrics_carry_the_output_shares_where_measured() -> None:
    acc = MetricsAccumulator()
    acc.add(done(0))
    plain = RunResult({}, {}, {}, acc)
    assert not {"valid_rate", "output_match", "output_consistency"} & set(plain.metrics)
    acc.add(done(1, checked=True, invalid="schema"))
    acc.add(done(2, checked=True))
    result = RunResult({}, {}, {}, acc)
    result.output_consistency = OutputMatch(0.5, 2, [{"index": 1, "position": 3}], "alone", 1)
    assert result.metrics["valid_rate"] == 0.5 and result.metrics["output_consistency"] == 0.5
    assert "output_match" not in result.metrics
    assert result.to_dict()["output_consistency"]["mismatches"] == [{"index": 1, "position": 3}]
