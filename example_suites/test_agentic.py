"""Coding agents: a recorded agentic trace replayed with its structure, and a synthetic one.

An agent's conversation is a chain of calls, each quoting the last prompt, the server's
reply and a tool's result, separated by the time the tool took, with subagents fanned out
in parallel and joined before the root's next call. The first test replays the project's
sample trace (three such conversations, Weka format, shipped with the package:
``agentic_sample("weka")``; the same in ``"agentic"`` and ``"otel"`` formats) on its own
timeline at twice its speed (``time_scale=0.5``: tool waits halved; about 4 s). The
second generates conversations (``llm_workload("agentic")``) and runs four agents at a
time (a closed loop: each slot runs a whole tree, subagents included). What an agent
feels is judged per conversation: its makespan, tool waits excluded
(docs/agentic.md, docs/measurement.md).
"""

import pytest

from pytest_llmperf.workloads.agentic.samples import agentic_sample

WEKA_SAMPLE = str(agentic_sample("weka"))
# Makespans are judged per conversation: a few conversations decide a max, while a p90
# ("conversation.makespan_excl_tools.p90 < 60s") needs about 44 of them to be decided at
# 99% (fewer: inconclusive). Gate a p90 on a run of 50 conversations or more.


@pytest.mark.llm_load("trace", path=WEKA_SAMPLE, format="weka", time_scale=0.5)
@pytest.mark.llm_slo(
    "ttft.p50 < 500ms",
    "conversation.makespan_excl_tools.max < 60s",
    "error_rate < 1%",
)
async def test_replay_a_coding_agent_trace(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.counts["issued"] == 36  # every call of the three conversations' trees


@pytest.mark.llm_workload(
    "agentic",
    seed=1,
    conversations=12,
    turns=(4, 6),
    subagents={"spawns": 1, "width": 2, "turns": (2, 3), "background": 0.25},
    tool_time={"distribution": "exponential", "mean": 0.1},
    output_tokens=(8, 24),
)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo(
    "ttft.p90 < 1s",
    "turns[2-5].ttft.p90 < 1s",
    "conversation.makespan_excl_tools.max < 60s",
    "error_rate < 1%",
)
async def test_synthetic_agents_four_at_a_time(llm_loadgen):
    await llm_loadgen.run()
