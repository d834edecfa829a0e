"""Synthetic agentic conversations (workloads/agentic/synthetic.py): seeded, shaped as the
parameters say (turns, fan-outs, tool waits, context growth, block-exact hash ids), and
parameter errors that name the workload and the parameter."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.agentic.model import AgentConversation, AgentThread
from pytest_llmperf.workloads.agentic.synthetic import (
    agentic_params,
    nominal_api_ns,
    synthetic_conversations,
)

MS = 1_000_000


def generate(seed: int = 3, **params: Any) -> list[AgentConversation]:
    return synthetic_conversations(agentic_params(**params), seed)


def subagents(conv: AgentConversation) -> list[AgentThread]:
    return [t for path, t in conv.root.walk() if path]


def end_ns(thread: AgentThread) -> int:
    last = thread.calls[-1]
    return last.t_ns + (last.api_ns or 0)


def test_a_seed_gives_the_same_conversations_and_another_seed_others() -> None:
    assert generate(seed=5) == generate(seed=5)
    assert generate(seed=5) != generate(seed=6)
    # conversation i does not depend on how many come after it
    assert generate(seed=5, conversations=2) == generate(seed=5, conversations=4)[:2]


def test_turns_fanouts_and_subagent_lengths_stay_in_their_ranges() -> None:
    convs = generate(
        conversations=12,
        turns=(6, 9),
        subagents={"spawns": (1, 2), "width": (2, 3), "turns": (2, 4)},
    )
    assert len(convs) == 12
    widths = set()
    for conv in convs:
        root = conv.root
        assert 6 <= len(root.calls) <= 9
        after = {s.after for s in root.spawns}
        assert 1 <= len(after) <= 2
        assert max(after) < len(root.calls) - 1  # never after the root's last call
        for k in after:
            width = len(root.spawned_after(k))
            widths.add(width)
            assert 2 <= width <= 3
        for sub in subagents(conv):
            assert 2 <= len(sub.calls) <= 4
            assert sub.spawns == ()  # one level of subagents
    assert widths == {2, 3}  # both ends of the range are drawn over 12 conversations


def test_no_subagents() -> None:
    for subagents_param in (0, {"spawns": 0}, {"spawns": (0, 0)}):
        convs = generate(subagents=subagents_param)
        assert all(c.root.spawns == () for c in convs)


def test_prompts_grow_by_the_reply_and_new_content_with_block_exact_hash_ids() -> None:
    block = 32
    [conv] = generate(
        conversations=1,
        turns=(8, 8),
        context_growth=(50, 90),
        output_tokens=(5, 20),
        system_prompt_tokens=100,
        block_size=block,
    )
    for _, thread in conv.root.walk():
        calls = thread.calls
        assert 100 + 50 <= calls[0].input_tokens <= 100 + 90
        for prev, call in itertools.pairwise(calls):
            growth = call.input_tokens - prev.input_tokens - prev.output_tokens
            assert 50 <= growth <= 90
            kept = prev.input_tokens // block  # the previous prompt's full blocks
            assert call.hash_ids[:kept] == prev.hash_ids[:kept]
            assert not set(call.hash_ids[kept:]) & set(prev.hash_ids)
        for call in calls:
            assert len(call.hash_ids) == math.ceil(call.input_tokens / block)
            assert 5 <= call.output_tokens <= 20
    # every thread starts with the same system prompt blocks (100 // 32 = 3 full ones)
    system = conv.root.calls[0].hash_ids[:3]
    assert all(sub.calls[0].hash_ids[:3] == system for sub in subagents(conv))
    fourth = conv.root.calls[0].hash_ids[3]
    assert all(sub.calls[0].hash_ids[3] != fourth for sub in subagents(conv))


def test_system_prompt_blocks_are_shared_across_conversations_only_when_asked() -> None:
    def heads(convs: list[AgentConversation]) -> set[tuple[int, ...]]:
        return {c.root.calls[0].hash_ids[:16] for c in convs}

    assert len(heads(generate(conversations=3))) == 3
    shared = generate(conversations=3, shared_system_prompt=True)
    assert len(heads(shared)) == 1
    assert all(c.shared_hashes for c in shared)
    # nothing else is shared: the first call's blocks past the system prompt differ
    assert len({c.root.calls[0].hash_ids[16] for c in shared}) == 3


def test_tool_waits_and_the_join() -> None:
    convs = generate(
        conversations=3,
        tool_time=0.3,
        subagents={"spawns": 1, "width": 2, "background": 0.0},
    )
    for conv in convs:
        root = conv.root
        assert root.calls[0].wait_ns == 0 and root.calls[0].t_ns == 0
        assert all(c.wait_ns == 300 * MS for c in root.calls[1:])
        for k, (prev, call) in enumerate(zip(root.calls, root.calls[1:], strict=False)):
            ready = prev.t_ns + (prev.api_ns or 0)
            spawned = root.spawned_after(k)
            if spawned:  # the next call waits for the subagents, then the tool
                assert all(s.joined and s.offset_ns == 0 for s in spawned)
                assert all(s.thread.calls[0].t_ns == ready for s in spawned)
                ready = max([ready, *(end_ns(s.thread) for s in spawned)])
            assert call.t_ns == ready + 300 * MS
            assert prev.api_ns == nominal_api_ns(prev.input_tokens, prev.output_tokens)
    assert [c.start_ns for c in convs] == [0, 500 * MS, 1000 * MS]  # stagger=0.5


def test_background_subagents_are_not_waited_for() -> None:
    convs = generate(conversations=4, tool_time=0.1, subagents={"spawns": 1, "background": 1.0})
    for conv in convs:
        [k] = {s.after for s in conv.root.spawns}
        assert all(not s.joined for s in conv.root.spawns)
        prev, nxt = conv.root.calls[k], conv.root.calls[k + 1]
        assert nxt.t_ns == prev.t_ns + (prev.api_ns or 0) + 100 * MS


def test_tool_time_distributions_are_drawn_to_the_millisecond() -> None:
    convs = generate(
        conversations=4, turns=(10, 10), tool_time={"distribution": "uniform", "min": 1, "max": 2}
    )
    waits = [c.wait_ns for conv in convs for _, t in conv.root.walk() for c in t.calls[1:]]
    assert all(1000 * MS <= w <= 2000 * MS and w % MS == 0 for w in waits)
    assert len(set(waits)) > len(waits) // 2


def test_max_input_tokens_ends_a_thread_early_and_says_so() -> None:
    [conv] = generate(
        conversations=1,
        turns=(30, 30),
        subagents=0,
        context_growth=200,
        output_tokens=10,
        system_prompt_tokens=0,
        max_input_tokens=1000,
    )
    # 200, 410, 620, 830, then 1040 > 1000: four calls, 26 cut
    assert [c.input_tokens for c in conv.root.calls] == [200, 410, 620, 830]
    assert conv.notes == ("26 calls cut by max_input_tokens=1000",)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"turns": (5, 2)}, r"turns range must be \(min, max\) with min <= max, got \(5, 2\)"),
        ({"turns": 0}, r"turns must be an integer >= 1, got 0"),
        ({"conversations": 0}, r"conversations must be an integer >= 1, got 0"),
        ({"context_growth": (0, 5)}, r"context_growth\[0\] must be an integer >= 1, got 0"),
        ({"output_tokens": "lots"}, r"output_tokens must be an int or a \(min, max\) pair"),
        ({"subagents": "many"}, r"subagents must be 0, a number of fan-outs .* got 'many'"),
        ({"subagents": {"wdth": 2}}, r"subagents does not take 'wdth'; it takes 'spawns'"),
        ({"subagents": {"background": 2}}, r"subagents\['background'\] must be a number betwe"),
        ({"subagents": {"width": (3, 1)}}, r"subagents\['width'\] range must be \(min, max\)"),
        ({"tool_time": -1}, r"tool_time must be a number of seconds >= 0, got -1"),
        ({"tool_time": {"distribution": "normal"}}, r"tool_time\['distribution'\] must be one"),
        ({"system_prompt_tokens": -1}, r"system_prompt_tokens must be an integer >= 0"),
        ({"shared_system_prompt": "yes"}, r"shared_system_prompt must be True or False"),
        ({"stagger": -1}, r"stagger must be a number of seconds >= 0, got -1"),
        ({"max_input_tokens": 0}, r"max_input_tokens must be an integer >= 1, got 0"),
        ({"block_size": 0}, r"block_size must be an integer >= 1, got 0"),
    ],
)
def test_a_bad_parameter_names_the_workload_and_itself(
    params: dict[str, Any], message: str
) -> None:
    with pytest.raises(LlmPerfUsageError, match=r"^workload 'agentic': " + message):
        agentic_params(**params)


def test_the_defaults_describe_themselves() -> None:
    described = agentic_params().describe()
    assert described["turns"] == [4, 8]
    assert described["subagents"] == {
        "spawns": [1, 1],
        "width": [2, 2],
        "turns": [2, 4],
        "background": 0.0,
    }
    assert described["tool_time"] == "exponential, mean 0.2 s"
