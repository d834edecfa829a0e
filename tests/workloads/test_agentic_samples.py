"""The shipped agentic sample traces: the same conversations in the three formats (weka,
agentic, otel), as scripts/make_agentic_sample.py writes them today, with what the example
suite relies on (subagents, a background one, tool waits), and the synthetic workload."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.agent_script import AgentSource, agents_of
from pytest_llmperf.workloads.agentic.jsonl import read_agentic
from pytest_llmperf.workloads.agentic.model import AgentConversation, AgentThread
from pytest_llmperf.workloads.agentic.otel import read_otel
from pytest_llmperf.workloads.agentic.samples import AGENTIC_SAMPLES, agentic_sample
from pytest_llmperf.workloads.agentic.weka import read_weka

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_agentic_sample.py"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_agentic_sample", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_agentic_sample", module)
    spec.loader.exec_module(module)
    return module


def shape(thread: AgentThread, *, hashes: bool = True) -> tuple[Any, ...]:
    """A thread's structure, without ``where`` (it names the file) and, for OTel, hash ids."""
    calls = tuple(replace(c, where="", hash_ids=c.hash_ids if hashes else ()) for c in thread.calls)
    spawns = tuple(
        (s.after, s.offset_ns, s.joined, shape(s.thread, hashes=hashes)) for s in thread.spawns
    )
    return (thread.agent_id, calls, spawns)


def shapes(convs: list[AgentConversation], *, hashes: bool = True) -> list[Any]:
    return [(c.conversation_id, shape(c.root, hashes=hashes)) for c in convs]


def test_the_shipped_files_are_what_the_script_writes() -> None:
    assert script().differences() == []


def test_the_three_formats_read_to_the_same_conversations() -> None:
    made = script().sample_conversations()
    weka = read_weka(agentic_sample("weka"))
    jsonl = read_agentic(agentic_sample("agentic"))
    otel = read_otel(agentic_sample("otel"))
    assert shapes(weka) == shapes(made)
    assert shapes(jsonl) == shapes(made)
    # OTel records no KV blocks, and names a conversation by its trace id
    assert [s for _, s in shapes(otel, hashes=False)] == [s for _, s in shapes(made, hashes=False)]
    assert [c.start_ns for c in jsonl] == [c.start_ns for c in otel] == [0, 10**9, 2 * 10**9]
    for conv in otel:
        assert conv.notes[0].startswith("waits: ")
        assert "covered by execute_tool spans" in conv.notes[0]


def test_the_sample_has_what_the_examples_show() -> None:
    convs = read_weka(agentic_sample("weka"))
    assert len(convs) == 3
    spawns = [s for c in convs for _, t in c.root.walk() for s in t.spawns]
    assert len(spawns) >= 4
    assert sum(not s.joined for s in spawns) == 1  # one background subagent
    waits = [c.wait_ns for conv in convs for _, t in conv.root.walk() for c in t.calls[1:]]
    assert min(waits) >= 200_000_000  # tool_time uniform 0.2-0.9 s
    last = max(
        conv.start_ns + call.t_ns + (call.api_ns or 0)
        for conv in convs
        for _, t in conv.root.walk()
        for call in t.calls
    )
    assert last < 20 * 10**9  # a replay of about the recorded length stays under 20 s


def test_the_sample_paths_and_a_bad_format() -> None:
    assert set(AGENTIC_SAMPLES) == {"weka", "agentic", "otel"}
    assert all(p.exists() for p in AGENTIC_SAMPLES.values())
    with pytest.raises(LlmPerfUsageError, match=r"no agentic sample in format 'mooncake'"):
        agentic_sample("mooncake")


@pytest.mark.parametrize("fmt", ["weka", "agentic", "otel"])
def test_each_sample_is_a_trace_load(fmt: str) -> None:
    workload = build_workload("trace", seed=0, path=str(agentic_sample(fmt)), format=fmt)
    source = agents_of(workload)
    assert isinstance(source, AgentSource)
    assert source.count == 3
    assert source.describe()["background_subagents"] == 1


def test_the_synthetic_workload_is_an_agent_source_of_its_conversations() -> None:
    workload = build_workload("agentic", seed=4, conversations=2, turns=5, tool_time=0.25)
    source = agents_of(workload)
    assert isinstance(source, AgentSource)
    assert source.count == 2 == workload.size
    root = source.conversation(1)
    assert root.turns == 5 and root.agent_id == ""
    assert [root.think_ns(k) for k in range(5)] == [0] + [250_000_000] * 4
    fanout = [k for k in range(5) if root.spawns(k)]
    assert len(fanout) == 1 and len(root.spawns(fanout[0])) == 2
    child = root.spawns(fanout[0])[0].script
    assert child.agent_id.startswith("sub") and child.conversation_id == root.conversation_id
    assert workload.sample(1).prompt == root.turn(0, []).prompt  # conversation 1, call 0
    assert source.start_ns(1) == 0  # an open or closed loop starts it at its own time
    described = workload.describe()
    assert described["name"] == "agentic"
    assert described["generated"]["turns"] == [5, 5]
    assert described["subagents"] == 4


def test_the_synthetic_workload_takes_the_trace_loads_replay_options() -> None:
    mid = build_workload("agentic", seed=1, turns=(8, 8), start="mid", replies="trace")
    script = agents_of(mid).conversation(0)  # type: ignore[union-attr]
    assert script.first_turn > 0
    assert script.warmup_sample() is not None
    assert mid.describe()["replies"] == "trace"
    with pytest.raises(LlmPerfUsageError, match=r"workload 'agentic': start must be 'mid'"):
        build_workload("agentic", start=3)
    with pytest.raises(LlmPerfUsageError, match=r"workload 'agentic': replies must be one of"):
        build_workload("agentic", replies="never")
    with pytest.raises(LlmPerfUsageError, match=r"workload 'agentic': does not take tunrs="):
        build_workload("agentic", tunrs=5)
