"""Agent trees issued against the simulator (a real HTTP server on 127.0.0.1).

The trees are hand-written (:mod:`agent_trees`): every wait, spawn and join is the
test's choice, so each timing rule of :mod:`pytest_llmperf.workloads.agent_script`
is checked on the records the run delivers (client-side times, one monotonic clock).
Timing bounds are generous (a busy 2-core machine): the measured pacing error goes to
``benchmarks/agent_pacing.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
import pytest_asyncio
from agent_trees import MS, Spawn, Thread, TreeSource

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.models import resolve_model
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.issue.local import ShareRun
from pytest_llmperf.loadgen.plan.planner import RunPlan
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

pytestmark = pytest.mark.asyncio

SLACK_NS = 250 * MS  # how late a wait may end on a busy machine (a bound, not a measurement)


@pytest_asyncio.fixture
async def sim() -> AsyncIterator[Endpoint]:
    """The simulator: first token after 20 ms, then one every 2 ms (a call lasts ~26 ms)."""
    async with SimServer("fixed", ttft_ms=20.0, itl_ms=2.0) as server:
        yield Endpoint(server.url + "/v1", timeouts=Timeouts.from_seconds(20))


def spec(source: TreeSource, pattern: str, load: dict[str, Any], **stops: Any) -> RunSpec:
    stops.setdefault("requests", None)
    return RunSpec(
        "test-agent-trees", {"source": source}, 0, LoadSpec.parse(pattern, load), **stops
    )


def trace_load(time_scale: float = 1.0) -> dict[str, Any]:
    return {"path": "agents.json", "format": "weka", "time_scale": time_scale}


async def run(endpoint: Endpoint, run_spec: RunSpec) -> tuple[list[RequestRecord], Any]:
    records: list[RequestRecord] = []
    result = await LoadRun(endpoint, run_spec, observers=[records.append]).execute()
    return records, result


def by_thread(records: Iterable[RequestRecord]) -> dict[tuple[int, str], list[RequestRecord]]:
    out: dict[tuple[int, str], list[RequestRecord]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r.turn):
        out[r.conversation, r.agent].append(r)
    return dict(out)


def span(records: list[RequestRecord]) -> tuple[int, int]:
    return min(r.t_send for r in records), max(r.t_end for r in records)


# a root of 3 calls: after call 0 two joined subagents (one 10 ms later), after call 1 a
# background one whose second call comes long after the root's last
WORKER = Thread("worker", 2, waits_ms=(30,))
LATE = Thread("late", 2, waits_ms=(30,))
BACKGROUND = Thread("bg", 2, waits_ms=(400,))
ROOT = Thread(
    "root",
    3,
    waits_ms=(40, 50),
    spawns=(
        Spawn(0, WORKER),
        Spawn(0, LATE, offset_ms=10),
        Spawn(1, BACKGROUND, offset_ms=5, joined=False),
    ),
)


async def test_a_trace_replays_each_tree_with_its_waits_joins_and_background_subagents(
    sim: Endpoint,
) -> None:
    source = TreeSource([ROOT, ROOT], starts_ms=(0, 60))
    records, result = await run(sim, spec(source, "trace", trace_load()))
    assert result.counts["completed"] == 2 * (3 + 2 + 2 + 2) == len(records)
    threads = by_thread(records)
    assert sorted(threads) == [(c, a) for c in (0, 1) for a in ("", "bg", "late", "worker")]
    for c in (0, 1):
        root, worker, late, bg = (threads[c, a] for a in ("", "worker", "late", "bg"))
        assert [r.turn for r in root] == [0, 1, 2] and [r.turn for r in worker] == [0, 1]
        for r in root + worker + late + bg:  # every call is late by at most a busy turn
            assert r.tracked and r.t_sched <= r.t_send <= r.t_sched + SLACK_NS
        # the recorded waits, held from the end of what came before
        assert [r.think_ns for r in root] == [0, 40 * MS, 50 * MS]
        assert [r.think_ns for r in late] == [10 * MS, 30 * MS]
        assert late[0].t_sched == root[0].t_end + 10 * MS  # launched 10 ms after its parent's call
        assert worker[0].t_sched == root[0].t_end
        assert late[1].t_sched == late[0].t_end + 30 * MS
        # joined: the root's next call waits for both subagents, then its tool wait
        assert root[1].t_sched == max(worker[-1].t_end, late[-1].t_end) + 40 * MS
        # concurrent as recorded: the two joined subagents' calls overlap in time
        (a0, a1), (b0, b1) = span(worker), span(late)
        assert max(a0, b0) < min(a1, b1)
        # background: nobody waits for it; the root ends first, the conversation after it
        assert bg[0].t_sched == root[1].t_end + 5 * MS
        assert root[2].t_sched == root[1].t_end + 50 * MS
        assert root[2].t_end < bg[1].t_send
    first = {c: threads[c, ""][0].t_sched for c in (0, 1)}
    assert first[1] - first[0] == 60 * MS  # each conversation at its recorded start
    report = result.to_dict()
    assert report["workload"]["issue"] == "agent trees at the trace's times"
    # each tree, once over, was folded at once (no open conversation kept to the run's end)
    tracker = result.accumulator.conversations
    assert tracker is not None and not tracker.open
    assert report["conversations"]["count"] == 2 and report["conversations"]["calls"] == 18


async def test_time_scale_stretches_waits_offsets_and_starts(sim: Endpoint) -> None:
    root = Thread("root", 2, waits_ms=(20,), spawns=(Spawn(0, Thread("w", 1), offset_ms=10),))
    records, _ = await run(sim, spec(TreeSource([root, root], (0, 30)), "trace", trace_load(2.0)))
    threads = by_thread(records)
    for c in (0, 1):
        r, w = threads[c, ""], threads[c, "w"]
        assert w[0].think_ns == 20 * MS and w[0].t_sched == r[0].t_end + 20 * MS
        assert r[1].think_ns == 40 * MS and r[1].t_sched == w[0].t_end + 40 * MS
    assert threads[1, ""][0].t_sched - threads[0, ""][0].t_sched == 60 * MS


async def test_a_failed_subagent_call_ends_that_subagent_only(sim: Endpoint) -> None:
    failing = Thread("failing", 3, waits_ms=(5, 5), fail=frozenset({1}))
    root = Thread("root", 2, waits_ms=(10,), spawns=(Spawn(0, failing), Spawn(0, WORKER)))
    records, result = await run(sim, spec(TreeSource([root]), "trace", trace_load()))
    threads = by_thread(records)
    assert [(r.turn, r.ok) for r in threads[0, "failing"]] == [(0, True), (1, False)]
    assert [r.ok for r in threads[0, "worker"]] == [True, True]
    root_calls = threads[0, ""]
    assert [r.ok for r in root_calls] == [True, True]  # the parent resumed at the join
    ends = [threads[0, "failing"][-1].t_end, threads[0, "worker"][-1].t_end]
    assert root_calls[1].t_sched == max(ends) + 10 * MS
    assert result.counts["failed"] == 1


async def test_a_failed_root_call_ends_its_conversation(sim: Endpoint) -> None:
    child = Thread("child", 2, waits_ms=(200,))
    root = Thread(
        "root", 4, waits_ms=(5, 5, 5), fail=frozenset({1}),
        spawns=(Spawn(0, child, joined=False),),
    )  # fmt: skip
    records, _ = await run(sim, spec(TreeSource([root]), "trace", trace_load()))
    threads = by_thread(records)
    assert [(r.turn, r.ok) for r in threads[0, ""]] == [(0, True), (1, False)]
    # the background child's first call went before the failure; its second, due later, not
    assert [r.turn for r in threads[0, "child"]] == [0]


async def test_closed_loop_slots_each_run_one_tree_with_its_subagents(sim: Endpoint) -> None:
    root = Thread(
        "root", 2, waits_ms=(5,),
        spawns=(Spawn(0, Thread("a", 2, waits_ms=(5,))), Spawn(0, Thread("b", 2, waits_ms=(5,)))),
    )  # fmt: skip
    source = TreeSource([root], conversations=50)
    records, result = await run(sim, spec(source, "concurrency", {"concurrency": 2}, requests=36))
    assert result.counts["issued"] == 36 == len(records)  # requests= counts calls
    conversations = defaultdict(list)
    for r in records:
        conversations[r.conversation].append(r)
    assert sorted(conversations) == list(range(len(conversations)))
    spans = {c: span(rs) for c, rs in conversations.items()}
    for c, (start, _) in spans.items():  # at most two trees (= slots) live at any instant
        assert sum(a <= start < b for a, b in spans.values()) <= 2, c
    # ... while more than two calls were in flight: subagents take no slot of their own
    events = sorted(itertools.chain.from_iterable(((r.t_send, 1), (r.t_end, -1)) for r in records))
    in_flight = max(itertools.accumulate(step for _, step in events))
    assert in_flight > 2
    assert result.to_dict()["workload"]["issue"] == "agent trees, one per slot"


async def test_open_loop_arrivals_each_start_a_conversation(sim: Endpoint) -> None:
    root = Thread("root", 3, waits_ms=(30, 30), spawns=(Spawn(1, Thread("a", 1)),))
    source = TreeSource([root], conversations=100)
    records, result = await run(sim, spec(source, "constant", {"rate": 20}, requests=24))
    assert result.counts["issued"] == 24
    firsts = sorted(r.t_sched for r in records if r.agent == "" and r.turn == 0)
    assert {round((b - a) / MS) for a, b in itertools.pairwise(firsts)} == {50}  # 1 / 20 req/s
    assert len(firsts) == len({r.conversation for r in records})
    assert result.to_dict()["workload"]["issue"] == "agent trees, one per arrival"


async def test_warm_up_calls_are_the_first_calls_and_untracked(sim: Endpoint) -> None:
    records, result = await run(
        sim, spec(TreeSource([ROOT], conversations=5), "concurrency", {"concurrency": 1},
                  requests=6, warmup=3)
    )  # fmt: skip
    assert [r.tracked for r in records[:3]] == [False] * 3
    assert sum(r.tracked for r in records) == 6 == result.counts["issued"]


async def test_mid_start_sends_each_warm_up_before_the_clock_then_from_the_first_turn(
    sim: Endpoint,
) -> None:
    root = Thread("root", 4, waits_ms=(5, 5, 5), first_turn=2)
    records, result = await run(
        sim, spec(TreeSource([root] * 3, (0, 0, 10)), "trace", trace_load())
    )
    warm = [r for r in records if not r.tracked]
    tracked = [r for r in records if r.tracked]
    assert sorted(r.conversation for r in warm) == [0, 1, 2]
    assert [r.turn for r in sorted(tracked, key=lambda r: r.t_sched)] == [2, 2, 2, 3, 3, 3]
    assert max(r.t_end for r in warm) <= min(r.t_sched for r in tracked)  # the clock after them
    assert result.counts["issued"] == 6


async def test_worker_shares_split_the_conversations(sim: Endpoint) -> None:
    """``--llm-workers``: each process runs the conversations ``c % count == index`` (run
    here as the two shares a pool would start, in this process)."""
    sim = await resolve_model(sim)
    source = TreeSource([ROOT], starts_ms=(0, 0, 5, 5, 10), conversations=5)
    plan = RunPlan.from_spec(spec(source, "trace", trace_load()))
    seen: dict[int, set[int]] = {}
    for index in (0, 1):
        records: list[RequestRecord] = []
        share = ShareRun(
            sim, plan.for_share(plan.worker_share(index, 2)), observers=[records.append]
        )
        await share.issue(None, dict)
        seen[index] = {r.conversation for r in records}
        assert len(records) == len(seen[index]) * 9 and all(r.ok for r in records)
    assert seen == {0: {0, 2, 4}, 1: {1, 3}}


async def test_a_closed_loop_duration_ends_a_tool_wait_that_outlasts_it(sim: Endpoint) -> None:
    root = Thread("root", 3, waits_ms=(30_000, 5), spawns=(Spawn(0, Thread("a", 2, (30_000,))),))
    started = time.monotonic()
    records, result = await run(
        sim, spec(TreeSource([root], conversations=10), "concurrency", {"concurrency": 2},
                  duration=0.5)
    )  # fmt: skip
    # judged against the 30 s waits it cut short (a run that waited them out takes 30 s)
    assert time.monotonic() - started < 15
    assert result.stop_reason == "duration"
    assert sorted((r.conversation, r.agent, r.turn) for r in records) == [
        (c, a, 0) for c in (0, 1) for a in ("", "a")
    ]


async def test_an_open_loop_duration_sends_no_call_due_after_it(sim: Endpoint) -> None:
    root = Thread("root", 4, waits_ms=(100, 100, 100))
    records, _ = await run(
        sim, spec(TreeSource([root], conversations=100), "constant", {"rate": 10}, duration=0.5)
    )
    first = min(r.t_sched for r in records)
    assert max(r.t_sched for r in records) - first < 500 * MS
    assert len({r.conversation for r in records}) == 5  # arrivals at 0, 0.1, ..., 0.4 s
    assert len(records) < 5 * 4  # the later turns of the late conversations fell past it


async def test_a_stop_during_a_tool_wait_ends_the_run_at_once(sim: Endpoint) -> None:
    root = Thread("root", 2, waits_ms=(30_000,))
    answered: list[RequestRecord] = []
    stopped: list[float] = []

    def stop_once_both_first_calls_are_answered(record: RequestRecord) -> None:
        answered.append(record)  # evidence both trees are in their 30 s tool wait
        if len(answered) == 2:
            stopped.append(time.monotonic())
            load_run.stop()

    load_run = LoadRun(
        sim,
        spec(TreeSource([root], (0, 0), conversations=2), "trace", trace_load()),
        observers=[stop_once_both_first_calls_are_answered],
    )
    result = await asyncio.wait_for(load_run.execute(), 60)
    assert stopped and time.monotonic() - stopped[0] < 10  # not the 30 s wait
    assert result.counts["issued"] == 2 and result.stop_reason == "stop()"


async def test_once_the_calls_are_counted_no_tool_wait_is_waited_out(sim: Endpoint) -> None:
    root = Thread("root", 3, waits_ms=(30_000, 5))
    started = time.monotonic()
    records, result = await run(
        sim, spec(TreeSource([root], conversations=10), "concurrency", {"concurrency": 2},
                  requests=2)
    )  # fmt: skip
    assert time.monotonic() - started < 15  # not the 30 s waits
    assert len(records) == result.counts["completed"] == 2
