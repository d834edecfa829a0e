"""Every chat-like workload takes ``structured=, tools=, tool_choice=, adapters=, greedy=``.

``build_workload`` takes them off, builds the workload from its own parameters
and wraps it: each sample (and each turn of a multi-turn conversation) carries
its drawn model and the output contract, and nothing else about it changes.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads import (
    OutputContract,
    RequestPathsWorkload,
    Sample,
    Workload,
    build_workload,
    workload_names,
)
from pytest_llmperf.workloads.adapters import AdapterMix
from pytest_llmperf.workloads.conversations import (
    ConversationScript,
    ConversationSource,
    TurnResult,
    conversations_of,
)
from pytest_llmperf.workloads.request_paths import DressedConversations

TRACES = Path(__file__).parent / "data" / "traces"
SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
ADAPTERS = {"sim-lora-1": 0.4, "sim-lora-2": 0.4}
PATHS: dict[str, Any] = {
    "structured": SCHEMA,
    "tools": "sample",
    "tool_choice": "search",
    "adapters": ADAPTERS,
    "greedy": True,
}
# each registered workload with parameters that build it here (a new workload must be added)
OWN: dict[str, dict[str, Any]] = {
    "synthetic": {"input_tokens": (16, 64), "output_tokens": (4, 16)},
    "synthetic-uniform": {},
    "synthetic-skewed": {},
    "conversation": {},
    "shared-prefix": {},
    "code-completion": {},
    "long-context": {},
    "trace": {"path": str(TRACES / "mooncake_sample.jsonl")},
    "agentic": {"conversations": 2},
}
SEED = 5
N = 40


def plain_and_wrapped(
    name: str, own: dict[str, Any] | None = None, **paths: Any
) -> tuple[Workload, RequestPathsWorkload]:
    """The workload ``name`` built without the paths and with them."""
    params = {**OWN[name], **(own or {})}
    plain = build_workload(name, seed=SEED, **params)
    wrapped = build_workload(name, seed=SEED, **params, **paths)
    assert isinstance(wrapped, RequestPathsWorkload)
    return plain, wrapped


def bare(sample: Sample) -> Sample:
    return dataclasses.replace(sample, model=None, contract=None)


def test_the_test_covers_every_registered_workload() -> None:
    # "test-..." workloads are registered by other test modules (in this process: xdist
    # runs modules of several directories in one worker), not shipped
    shipped = {name for name in workload_names() if not name.startswith("test-")}
    assert set(OWN) == shipped


@pytest.mark.parametrize("name", sorted(OWN))
def test_every_workload_takes_every_path_and_keeps_its_samples(name: str) -> None:
    plain, wrapped = plain_and_wrapped(name, **PATHS)
    assert isinstance(wrapped, Workload)
    assert (wrapped.name, wrapped.seed, wrapped.size) == (plain.name, plain.seed, plain.size)
    contract = wrapped.contract
    assert isinstance(contract, OutputContract)
    assert contract.schema == SCHEMA and contract.named_tool == "search" and contract.greedy
    assert contract.greedy_seed == SEED
    mix = wrapped.mix
    assert isinstance(mix, AdapterMix)
    models = []
    for i in range(N):
        got, want = wrapped.sample(i), plain.sample(i)
        assert want.model is None and want.contract is None  # the workload itself sets neither
        assert bare(got) == want  # prompts, lengths, history, fields: the workload's own
        assert got.contract is contract
        assert got.model == mix.draw(SEED, i)
        models.append(got.model)
    assert {"sim-lora-1", "sim-lora-2", ""} == set(models)  # both adapters and the base model
    described = wrapped.describe()
    own = plain.describe()
    if "output_control" in own:  # a checked output goes out without ignore_eos
        own["output_control"] = "max_tokens"
    assert described == {
        **own,
        "structured": "output",
        "tools": ["get_weather", "search", "create_event"],
        "tool_choice": "search",
        "greedy": True,
        "adapters": {"sim-lora-1": 0.4, "sim-lora-2": 0.4, "base": 0.2},
    }


@pytest.mark.parametrize(
    ("paths", "described", "model_set", "with_contract"),
    [
        ({}, {}, False, False),
        ({"greedy": False}, {}, False, False),
        ({"adapters": {"a": 0.5}}, {"adapters": {"a": 0.5, "base": 0.5}}, True, False),
        ({"greedy": True}, {"greedy": True}, False, True),
        ({"structured": SCHEMA}, {"structured": "output"}, False, True),
        ({"tools": "sample"}, {"tools": ["get_weather", "search", "create_event"]}, False, True),
    ],
)
def test_only_what_is_given_is_described_and_set(
    paths: dict[str, Any], described: dict[str, Any], model_set: bool, with_contract: bool
) -> None:
    plain = build_workload("synthetic", seed=SEED)
    built = build_workload("synthetic", seed=SEED, **paths)
    if not described:  # nothing asked: the workload itself, unwrapped
        assert type(built) is type(plain) and built == plain
        return
    extra = {k: v for k, v in built.describe().items() if k not in plain.describe()}
    assert extra == described
    s = built.sample(3)
    assert (s.model is not None) is model_set
    assert (s.contract is not None) is with_contract


@pytest.mark.parametrize(
    ("name", "params", "named"),
    [
        ("long-context", {"tools": "all"}, r"^workload 'long-context': tools must be \"sample\""),
        ("synthetic-skewed", {"adapters": [1]}, r"^workload 'synthetic-skewed': adapters must"),
        ("shared-prefix", {"greedy": "on"}, r"^workload 'shared-prefix': greedy must be True"),
        ("trace", {"structured": 3}, r"^workload 'trace': structured must be a JSON Schema"),
        ("conversation", {"tool_choice": "auto"}, r"^workload 'conversation': tool_choice='auto'"),
    ],
)
def test_bad_paths_are_usage_errors_before_the_workload_is_built(
    name: str, params: dict[str, Any], named: str
) -> None:
    # the trace has no path and the conversation a missing file: the path is checked first
    own: dict[str, Any] = {"conversation": {"path": "no/such/file.jsonl"}}.get(name, {})
    with pytest.raises(LlmPerfUsageError, match=named):
        build_workload(name, **own, **params)


def test_the_workload_s_own_errors_still_name_it() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"workload 'synthetic': .*temperature"):
        build_workload("synthetic", greedy=True, temperature=0)
    with pytest.raises(LlmPerfUsageError, match=r"input_tokens must be an int"):
        build_workload("synthetic", greedy=True, input_tokens="x")


def test_every_other_attribute_is_the_inner_workload_s() -> None:
    _, wrapped = plain_and_wrapped("trace", greedy=True)
    trace: Any = wrapped.inner
    assert wrapped.trace is trace.trace  # what the planner reads for a trace load
    assert wrapped.timestamps_s is trace.timestamps_s
    assert wrapped.tokenizer is trace.tokenizer
    assert wrapped.block_size == trace.block_size == 512
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = wrapped.no_such_thing


def test_the_wrapper_copies_and_pickles() -> None:
    _, wrapped = plain_and_wrapped("synthetic", **PATHS)
    for other in (pickle.loads(pickle.dumps(wrapped)), copy.deepcopy(wrapped)):
        assert isinstance(other, RequestPathsWorkload)
        assert [other.sample(i) for i in range(5)] == [wrapped.sample(i) for i in range(5)]


# -- multi-turn conversations: turns built outside sample() are dressed too ----------------


def turns_of(source: ConversationSource, index: int) -> list[Sample]:
    """Every turn of conversation ``index``, each given made-up replies to the earlier ones."""
    script = source.conversation(index)
    earlier = [TurnResult(f"reply {k}", 50 + k, 5) for k in range(script.turns)]
    return [script.turn(k, earlier[:k]) for k in range(script.turns)]


def test_multi_turn_conversations_dress_every_turn_and_keep_one_model_per_conversation() -> None:
    plain, wrapped = plain_and_wrapped("conversation", {"conversations": True}, **PATHS)
    inner_source, source = conversations_of(plain), conversations_of(wrapped)
    assert inner_source is not None and isinstance(source, DressedConversations)
    assert isinstance(source, ConversationSource)
    assert (source.count, source.timed) == (inner_source.count, inner_source.timed)
    assert source.describe() == inner_source.describe()
    models = set()
    multi_turn = 0
    for index in range(12):
        script, inner = source.conversation(index), inner_source.conversation(index)
        assert isinstance(script, ConversationScript)
        assert (script.index, script.conversation_id, script.turns) == (
            inner.index,
            inner.conversation_id,
            inner.turns,
        )
        assert (script.tracks_turns, script.replies) == (inner.tracks_turns, inner.replies)
        assert [script.think_ns(k) for k in range(1, script.turns)] == [
            inner.think_ns(k) for k in range(1, inner.turns)
        ]
        got, want = turns_of(source, index), turns_of(inner_source, index)
        assert [bare(s) for s in got] == want  # the same turns, quoting the same replies
        model = wrapped.mix.draw(SEED, index) if wrapped.mix else None
        assert {s.model for s in got} == {model}  # one model for the whole conversation
        assert all(s.contract is wrapped.contract for s in got)
        models.add(model)
        multi_turn += len(got) > 1
    assert multi_turn and models == {"sim-lora-1", "sim-lora-2", ""}


def test_trace_conversations_dress_every_row_and_keep_one_model_per_conversation() -> None:
    paths: dict[str, Any] = {"adapters": {"a": 0.5, "b": 0.5}, "greedy": True}
    plain = build_workload("trace", path=TRACES / "sessions_sample.jsonl", format="jsonl")
    wrapped = build_workload(
        "trace", path=TRACES / "sessions_sample.jsonl", format="jsonl", **paths
    )
    assert isinstance(wrapped, RequestPathsWorkload) and wrapped.mix is not None
    inner_source, source = conversations_of(plain), conversations_of(wrapped)
    assert inner_source is not None and isinstance(source, DressedConversations)
    assert source.timed and source.count == inner_source.count
    assert [source.place(i) for i in range(8)] == [inner_source.place(i) for i in range(8)]
    assert source.conversation(0).conversation_id == "harbour" and source.conversation(0).turns == 3
    for index in range(source.count):
        got, want = turns_of(source, index), turns_of(inner_source, index)
        assert [bare(s) for s in got] == want
        assert {s.model for s in got} == {wrapped.mix.draw(0, index)}
        assert all(s.contract is wrapped.contract for s in got)


def test_a_workload_without_conversations_has_none_wrapped_or_not() -> None:
    for name in ("synthetic", "conversation", "trace"):
        _, wrapped = plain_and_wrapped(name, greedy=True)
        assert conversations_of(wrapped) is None
        assert wrapped.conversation_source is None


def _calls_of(script: Any) -> list[Any]:
    """Every call of an agent tree (turns quote a fixed reply), subagents depth first."""
    from pytest_llmperf.workloads.conversations import TurnResult

    out = []
    earlier: list[TurnResult] = []
    for k in range(script.turns):
        sample = script.turn(k, earlier)
        out.append(sample)
        earlier.append(TurnResult("ok", sample.input_tokens, 2))
        for child in script.spawns(k):
            out.extend(_calls_of(child.script))
    return out


def test_agentic_conversations_dress_every_call_of_every_thread_with_one_model() -> None:
    """``greedy=`` / ``adapters=`` on an agentic workload reach the subagents' calls too
    (the wrapper once passed ``agent_source`` through undressed)."""
    from pytest_llmperf.workloads.agent_script import AgentSource, agents_of
    from pytest_llmperf.workloads.request_paths import DressedAgents

    paths: dict[str, Any] = {"adapters": {"a": 0.5, "b": 0.5}, "greedy": True}
    own = {"conversations": 4, "turns": (2, 3), "subagents": 1}
    plain = build_workload("agentic", seed=SEED, **own)
    wrapped = build_workload("agentic", seed=SEED, **own, **paths)
    assert isinstance(wrapped, RequestPathsWorkload) and wrapped.mix is not None
    inner_source, source = agents_of(plain), agents_of(wrapped)
    assert inner_source is not None and isinstance(source, DressedAgents)
    assert isinstance(source, AgentSource) and source.count == inner_source.count
    assert source.describe() == inner_source.describe()
    spawned = 0
    for index in range(source.count):
        script, inner = source.conversation(index), inner_source.conversation(index)
        assert (script.conversation_id, script.agent_id, script.turns) == (
            inner.conversation_id,
            inner.agent_id,
            inner.turns,
        )
        assert source.start_ns(index) == inner_source.start_ns(index)
        got, want = _calls_of(script), _calls_of(inner)
        assert [bare(s) for s in got] == want
        spawned += len(got) > inner.turns
        assert {s.model for s in got} == {wrapped.mix.draw(SEED, index)}
        assert all(s.contract is wrapped.contract for s in got)
    assert spawned  # some conversation had subagents, and their calls were dressed too
