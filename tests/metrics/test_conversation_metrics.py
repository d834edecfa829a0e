"""What an agent feels (results/conversations.py): each figure on records built by hand,
with the instants chosen so the expected value is worked out in the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.event_log import analyse_event_log, read_records
from pytest_llmperf.results.recorder import EventRecorder
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.specs.conversation_names import prompt_band, turn_band

MS = 1_000_000
BASE = 10_000.0  # ms: a monotonic clock is never 0 (an unsent request's t_send is)


def call(
    conv: int,
    sched_ms: float,
    send_ms: float,
    end_ms: float,
    *,
    agent: str = "",
    turn: int = 0,
    replica: str = "",
    prompt: int | None = None,
    cached: int | None = None,
    ttft_ms: float = 1.0,
    failed: bool = False,
) -> RequestRecord:
    """A completed (or failed) call of conversation ``conv`` with its instants in ms."""
    sched_ms, send_ms, end_ms = sched_ms + BASE, send_ms + BASE, end_ms + BASE
    r = RequestRecord(index=0, t_sched=int(sched_ms * MS), t_send=int(send_ms * MS))
    r.conversation, r.agent, r.turn, r.replica = conv, agent, turn, replica
    r.t_first = int((send_ms + ttft_ms) * MS)
    r.t_last = r.t_end = int(end_ms * MS)
    r.token_events, r.gaps_ns = 2, [r.t_last - r.t_first]  # two token events, one gap
    r.usage_prompt_tokens, r.usage_cached_tokens = prompt, cached
    if failed:
        r.fail(ErrorKind.HTTP, "500", now=int(end_ms * MS))
    return r


def run_of(records: list[RequestRecord]) -> RunResult:
    acc = MetricsAccumulator()
    for r in records:
        acc.add(r)
    return RunResult(workload={}, load={}, endpoint={}, accumulator=acc)


def agent_tree() -> list[RequestRecord]:
    """Root call 0-100 ms (planned at -5), tool wait, root spawns two subagents whose
    calls overlap (200-300, 250-400, then 450-500 on one of them), root's last call
    600-700 ms. In flight: [0,100] + [200,400] + [450,500] + [600,700] = 450 ms."""
    return [
        call(7, -5, 0, 100, turn=0, replica="r1"),
        call(7, 200, 200, 300, agent="a", turn=0, replica="r1"),
        call(7, 250, 250, 400, agent="b", turn=0, replica="r2"),
        call(7, 450, 450, 500, agent="a", turn=1, replica="r1"),
        call(7, 600, 600, 700, turn=1, replica="r2"),
    ]


def test_makespan_includes_tools_and_counts_overlapping_subagents_once() -> None:
    stats = run_of(agent_tree()).conversation_stats
    assert stats.conversations == 1 and stats.calls == 5
    assert stats.makespan.max == pytest.approx(705, rel=1e-3)  # -5 ms plan to 700 ms end
    assert stats.makespan_excl_tools.max == pytest.approx(450, rel=1e-3)


def test_fan_out_is_the_most_calls_in_flight_and_threads_are_counted() -> None:
    stats = run_of(agent_tree()).conversation_stats
    assert dict(stats.fan_out) == {2: 1}  # 250-300 ms: a and b together
    assert dict(stats.threads) == {3: 1}  # root, a, b
    # a call that starts at the instant another ends does not overlap it
    touching = run_of([call(1, 0, 0, 10), call(1, 10, 10, 20)]).conversation_stats
    assert dict(touching.fan_out) == {1: 1}
    assert touching.makespan_excl_tools.max == pytest.approx(20, rel=1e-3)


def test_same_replica_within_threads_and_across_the_tree() -> None:
    stats = run_of(agent_tree()).conversation_stats
    # threads: root r1 -> r2 (differs), a r1 -> r1 (same), b alone: 1 of 2 pairs
    assert (stats.thread_same, stats.thread_pairs) == (1, 2)
    # by send time: r1 r1 r2 r1 r2: same once of 4 pairs
    assert (stats.tree_same, stats.tree_pairs) == (1, 4)
    assert stats.same_replica_rate == pytest.approx(0.5)
    assert (stats.attributed, stats.one_replica) == (1, 0)


def test_calls_without_a_replica_are_not_attributed() -> None:
    records = [call(1, 0, 0, 10), call(1, 20, 20, 30, turn=1)]
    result = run_of(records)
    stats = result.conversation_stats
    assert stats.thread_pairs == 0 and stats.same_replica_rate is None
    block = result.conversations
    assert block is not None and block["affinity"]["same_replica_rate"] is None
    one = run_of([call(2, 0, 0, 10, replica="x"), call(2, 20, 20, 30, turn=1, replica="x")])
    assert one.conversation_stats.one_replica == 1
    assert one.conversation_stats.same_replica_rate == 1.0


def test_a_conversation_with_a_failed_call_is_counted_apart() -> None:
    records = [*agent_tree(), call(8, 0, 0, 10), call(8, 20, 20, 30, turn=1, failed=True)]
    stats = run_of(records).conversation_stats
    assert (stats.conversations, stats.failed) == (1, 1)
    assert stats.makespan.count == 1


def test_turn_and_prompt_bands() -> None:
    assert [turn_band(k) for k in (0, 1, 4, 5, 9, 10, 19, 20, 49, 50, 300)] == [
        "1", "2-5", "2-5", "6-10", "6-10", "11-20", "11-20", "21-50", "21-50", "51+", "51+",
    ]  # fmt: skip
    assert [prompt_band(n) for n in (0, 1023, 1024, 4095, 4096, 16384, 65535, 65536)] == [
        "<1k", "<1k", "1k-4k", "1k-4k", "4k-16k", "16k-64k", "16k-64k", "64k+",
    ]  # fmt: skip


def test_ttft_and_cache_hit_by_turn_band() -> None:
    records = [
        call(1, 0, 0, 50, turn=0, prompt=500, cached=0, ttft_ms=40),
        call(1, 60, 60, 80, turn=1, prompt=2000, cached=1500, ttft_ms=5),
        call(1, 90, 90, 99, turn=2, prompt=3000, cached=2900, ttft_ms=3),
        call(1, 100, 100, 120, turn=3, prompt=3500),  # cached tokens not reported
    ]
    block = run_of(records).conversations
    assert block is not None
    turns = {row["turns"]: row for row in block["by_turn_band"]}
    assert list(turns) == ["1", "2-5"]
    assert turns["1"]["cache_hit_rate"] == 0.0
    # (1500 + 2900) / (2000 + 3000): the third request said nothing of its cache
    assert turns["2-5"]["cache_hit_rate"] == pytest.approx(4400 / 5000)
    assert turns["2-5"]["cache_reported"] == 2
    assert turns["1"]["ttft"]["max"] == pytest.approx(40, rel=1e-3)
    assert turns["2-5"]["ttft"]["count"] == 3
    prompts = {row["prompt"]: row["counts"]["completed"] for row in block["by_prompt_band"]}
    assert prompts == {"<1k": 1, "1k-4k": 3}


def test_no_cached_tokens_reported_is_null_not_zero() -> None:
    block = run_of([call(1, 0, 0, 10, prompt=100)]).conversations
    assert block is not None and block["by_turn_band"][0]["cache_hit_rate"] is None


def test_state_round_trip_and_merge() -> None:
    one = run_of(agent_tree()).accumulator
    two = run_of([call(3, 0, 0, 30, replica="r1"), call(3, 40, 40, 50, turn=1, replica="r1")])
    back = MetricsAccumulator.from_state(one.to_state())
    back.merge(two.accumulator)
    again = MetricsAccumulator.from_state(back.to_state())
    result = RunResult(workload={}, load={}, endpoint={}, accumulator=again)
    stats = result.conversation_stats
    assert stats.conversations == 2 and stats.calls == 7
    assert (stats.thread_same, stats.thread_pairs) == (2, 3)
    assert result.accumulator.turn_bands["2-5"].completed == 3
    assert result.to_dict()["conversations"]["count"] == 2


def test_reading_mid_run_leaves_open_conversations_growing() -> None:
    acc = MetricsAccumulator()
    acc.add(call(1, 0, 0, 10))
    result = RunResult(workload={}, load={}, endpoint={}, accumulator=acc)
    assert result.conversation_stats.calls == 1
    acc.add(call(1, 20, 20, 40, turn=1))
    stats = result.conversation_stats
    assert (stats.conversations, stats.calls) == (1, 2)
    assert stats.makespan.max == pytest.approx(40, rel=1e-3)
    acc.end_conversation(1)  # folded and dropped: a later call would start a new one
    assert acc.conversations is not None
    assert not acc.conversations.open and result.conversation_stats.calls == 2


def test_a_run_without_conversations_has_no_block_and_no_band_cost() -> None:
    acc = MetricsAccumulator()
    acc.add(RequestRecord(index=0, t_sched=0, t_send=0, t_first=MS, t_last=2 * MS, t_end=2 * MS))
    result = RunResult(workload={}, load={}, endpoint={}, accumulator=acc)
    assert result.conversations is None and "conversations" not in result.to_dict()
    assert not acc.turn_bands and acc.conversations is None


def test_band_breakdowns_leave_the_per_token_itl_out() -> None:
    r = call(1, 0, 0, 10, turn=0)
    r.gaps_ns = [MS, MS]
    acc = run_of([r]).accumulator
    assert acc.histograms["itl"].count == 2
    assert acc.turn_bands["1"].histograms["itl"].count == 0


def test_an_event_log_replays_the_conversation_figures(tmp_path: Path) -> None:
    records = agent_tree()
    records[2].think_ns = 5 * MS
    path = tmp_path / "events.sqlite"
    with EventRecorder(path, meta={"request_limits_ms": {}}) as recorder:
        for position, record in enumerate(records):
            recorder.record(record, position)
    replayed = list(read_records(path))
    assert [(r.conversation, r.agent, r.turn, r.replica) for r in replayed] == [
        (r.conversation, r.agent, r.turn, r.replica) for r in records
    ]
    assert replayed[2].think_ns == 5 * MS
    again = RunResult(workload={}, load={}, endpoint={}, accumulator=analyse_event_log(path))
    assert again.conversations == run_of(records).conversations
