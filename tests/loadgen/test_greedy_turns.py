"""Greedy outputs of multi-turn conversations: every turn is kept and compared by
(sample, turn), not only the first (issue 39, item 7), against the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.results.outputs import MatchedAgainst, OutputKey, SampleOutputs
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.sim import SimServer
from pytest_llmperf.slo.output_match import compare_outputs, mismatch_text
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

CONVERSATIONS, TURNS = 4, 3


def conversations(path: Path) -> str:
    with path.open("w") as f:
        for c in range(CONVERSATIONS):
            messages = []
            for k in range(TURNS):
                messages.append({"role": "user", "content": f"conversation {c} turn {k} ask"})
                messages.append({"role": "assistant", "content": "one two three"})
            f.write(json.dumps({"messages": messages}) + "\n")
    return str(path)


async def greedy_run(path: str, **sim: float) -> RunResult:
    params = {"path": path, "conversations": True, "system_prompt_tokens": 0, "greedy": True}
    spec = RunSpec(
        "conversation", params, 0, LoadSpec.parse("concurrency", {"concurrency": 2}),
        requests=CONVERSATIONS * TURNS,
    )  # fmt: skip
    async with SimServer("fixed", ttft_ms=2.0, itl_ms=0.5, **sim) as server:
        endpoint = Endpoint(server.url + "/v1", timeouts=Timeouts.from_seconds(30))
        return await LoadRun(endpoint, spec).execute()


@pytest.mark.asyncio
async def test_every_turn_of_a_greedy_conversation_is_kept_and_compared(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl")
    first, again = await greedy_run(path), await greedy_run(path)
    assert first.counts["completed"] == CONVERSATIONS * TURNS
    outputs = first.accumulator.outputs
    turns = sorted({key.turn for key in outputs.sorted_keys()})
    assert turns == list(range(TURNS)) and len(outputs) == CONVERSATIONS * TURNS
    report = first.to_dict()["outputs"]
    samples = sorted({key.sample for key in outputs.sorted_keys()})
    # the first turn keeps its old key; later turns are "<sample>.<turn>"
    assert {str(i) for i in samples} | {f"{i}.{k}" for i in samples for k in (1, 2)} == set(report)
    match = compare_outputs(outputs, again.accumulator.outputs, MatchedAgainst.BASELINE)
    assert match is not None and match.compared == CONVERSATIONS * TURNS and match.share == 1.0
    # a server whose every output changes: every turn differs, and says which turn
    changed = await greedy_run(path, output_change_rate=1.0)
    differ = compare_outputs(outputs, changed.accumulator.outputs, MatchedAgainst.BASELINE)
    assert differ is not None and differ.mismatched == CONVERSATIONS * TURNS
    assert {m.get("turn", 0) for m in differ.mismatches} == set(range(TURNS))
    assert " turn 2" in mismatch_text(differ, limit=20)


def test_keys_read_back_and_an_older_state_reads_as_first_turns() -> None:
    outputs = SampleOutputs()
    outputs.add(3, "d0", 4, "", turn=-1)  # a single request: turn -1 is the first
    outputs.add(3, "d2", 4, "", turn=2)
    outputs.add(3, "dx", 4, "", turn=2)  # first wins
    outputs.add(3, "da", 4, "", turn=1, agent="a/b")
    assert [k.name() for k in outputs.sorted_keys()] == ["3", "3.1@a/b", "3.2"]
    back = SampleOutputs.from_state(outputs.to_state())
    assert back[OutputKey(3, 2)].digest == "d2" and back[3].digest == "d0"
    assert back.get(OutputKey(3, 1, "a/b")) is not None and back.indices() == [3]
    old = SampleOutputs.from_state({"5": ["e", 2, ""], "7": {"digest": "f", "tokens": 1}})
    assert old.sorted_keys() == [OutputKey(5), OutputKey(7)]
    limited = SampleOutputs(limit=2)
    for turn in (2, 1, 0):
        limited.add(9, f"t{turn}", 1, "", turn=turn)
    assert limited.sorted_keys() == [OutputKey(9, 0), OutputKey(9, 1)]  # the lowest kept
