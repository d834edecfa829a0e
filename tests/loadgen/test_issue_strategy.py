"""How a plan is issued is chosen once, when the plan is built, and maps to one function.

The share run looks the plan's :class:`IssueStrategy` up in ``STRATEGIES`` and awaits
it: no issue loop asks whether its workload runs conversations or its load is a
trace. (What each strategy sends is checked by the run tests: test_load_shapes,
test_conversations, test_trace_replay.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.loadgen.issue.strategies import STRATEGIES
from pytest_llmperf.loadgen.plan.planner import RunPlan, ScheduleShare
from pytest_llmperf.loadgen.plan.strategy import IssueStrategy, choose_strategy
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec


def test_every_strategy_has_one_function() -> None:
    assert set(STRATEGIES) == set(IssueStrategy)
    assert len(set(STRATEGIES.values())) == len(IssueStrategy)


@pytest.mark.parametrize(
    ("open_loop", "conversations", "timed_trace", "expected"),
    [
        (True, False, False, IssueStrategy.OPEN_LOOP),
        (True, False, True, IssueStrategy.OPEN_LOOP),  # a trace of independent requests
        (False, False, False, IssueStrategy.CLOSED_LOOP),
        (True, True, False, IssueStrategy.CONVERSATIONS_OPEN_LOOP),
        (True, True, True, IssueStrategy.CONVERSATIONS_TRACE),
        (False, True, False, IssueStrategy.CONVERSATIONS_CLOSED_LOOP),
    ],
)
def test_the_choice(
    open_loop: bool, conversations: bool, timed_trace: bool, expected: IssueStrategy
) -> None:
    got = choose_strategy(open_loop=open_loop, conversations=conversations, timed_trace=timed_trace)
    assert got is expected
    assert not got.agents


@pytest.mark.parametrize(
    ("open_loop", "timed_trace", "expected"),
    [
        (True, True, IssueStrategy.AGENTS_TRACE),
        (True, False, IssueStrategy.AGENTS_OPEN_LOOP),
        (False, False, IssueStrategy.AGENTS_CLOSED_LOOP),
    ],
)
def test_agent_trees_win_over_conversations(
    open_loop: bool, timed_trace: bool, expected: IssueStrategy
) -> None:
    for conversations in (False, True):
        got = choose_strategy(
            open_loop=open_loop, conversations=conversations, timed_trace=timed_trace, agents=True
        )
        assert got is expected and got.agents and not got.latency_from_send


def _chats(path: Path) -> str:
    with path.open("w") as f:
        for c in range(3):
            messages = []
            for k in range(2):
                messages.append({"role": "user", "content": f"c{c} t{k} question"})
                messages.append({"role": "assistant", "content": "one two"})
            f.write(json.dumps({"messages": messages}) + "\n")
    return str(path)


def _spec(workload: str, params: dict[str, Any], pattern: str, load: dict[str, Any]) -> RunSpec:
    return RunSpec(workload, params, 0, LoadSpec.parse(pattern, load), requests=6)


def test_a_plan_carries_its_strategy_and_every_share_keeps_it(tmp_path: Path) -> None:
    synthetic = {"input_tokens": 8, "output_tokens": 2}
    chats = {"path": _chats(tmp_path / "c.jsonl"), "conversations": True}
    rows = [
        {"timestamp": 0, "session_id": "a", "input_length": 8, "output_length": 2},
        {"timestamp": 10, "input_length": 9, "output_length": 2},
    ]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    trace = RunSpec.from_markers(
        ("trace",), {}, ("trace",), {"path": str(tmp_path / "t.jsonl"), "format": "jsonl"}
    )
    cases = {
        IssueStrategy.OPEN_LOOP: _spec("synthetic", synthetic, "poisson", {"rate": 10}),
        IssueStrategy.CLOSED_LOOP: _spec("synthetic", synthetic, "concurrency", {"concurrency": 2}),
        IssueStrategy.CONVERSATIONS_OPEN_LOOP: _spec(
            "conversation", chats, "constant", {"rate": 5}
        ),
        IssueStrategy.CONVERSATIONS_CLOSED_LOOP: _spec(
            "conversation", chats, "concurrency", {"concurrency": 2}
        ),
        IssueStrategy.CONVERSATIONS_TRACE: trace,
    }
    for expected, spec in cases.items():
        plan = RunPlan.from_spec(spec)
        assert plan.strategy is expected, spec
        share = plan.worker_share(1, 2)
        assert RunPlan.for_worker(plan.worker_args, share).strategy is expected
        assert plan.for_share(ScheduleShare(1, 2)).strategy is expected
