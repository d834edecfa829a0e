"""A Weka-format trace (written here: no copied data) replayed by the load generator against
the simulator: issue 39's first "Done when", its timing half. Each call goes at the end of
what it waits for plus the recorded tool gap (time-scaled), the subagents launched
together run concurrently, and the root waits for its joined ones.

The waits and offsets expected are the workload's own (its scripts, read from the
trace); what is checked is that the load generator kept them, on the records' clock.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.run import RunSpec

pytestmark = pytest.mark.asyncio

MS = 1_000_000
SLACK_NS = 250 * MS  # how late a call may go on a busy machine (a bound, not a measurement)


def _call(t: float, n_in: int, n_out: int, api: float) -> dict[str, Any]:
    return {"type": "s", "t": t, "in": n_in, "out": n_out, "api_time": api}


def conversation(name: str) -> dict[str, Any]:
    """A root call; two subagents launched together (joined), each two calls with a tool
    gap; the root's next call after both and a tool gap; a background subagent; a last call."""
    return {
        "id": name,
        "block_size": 16,
        "requests": [
            _call(0.0, 40, 4, 0.05),
            {"type": "subagent", "t": 0.1, "agent_id": "explore", "duration_ms": 200,
             "status": "completed",
             "requests": [_call(0.1, 30, 4, 0.05), _call(0.2, 50, 4, 0.05)]},
            {"type": "subagent", "t": 0.1, "agent_id": "search", "duration_ms": 220,
             "status": "completed",
             "requests": [_call(0.1, 30, 4, 0.05), _call(0.23, 50, 4, 0.05)]},
            _call(0.4, 80, 4, 0.05),
            {"type": "subagent", "t": 0.5, "agent_id": "bash", "duration_ms": None,
             "status": "async_launched",
             "requests": [_call(0.5, 20, 3, 0.05)]},
            _call(0.55, 100, 4, 0.05),
        ],
    }  # fmt: skip


@pytest_asyncio.fixture
async def sim() -> AsyncIterator[Endpoint]:
    async with SimServer("fixed", ttft_ms=10.0, itl_ms=2.0) as server:
        yield Endpoint(server.url + "/v1", timeouts=Timeouts.from_seconds(20))


def weka_spec(path: Path, **load: Any) -> RunSpec:
    return RunSpec.from_markers(
        (), {}, ("trace",), {"path": str(path), "format": "weka", "conversations": 2, **load}
    )


@pytest.mark.parametrize("time_scale", [1.0, 0.5])
async def test_a_weka_trace_keeps_its_tool_gaps_and_runs_its_subagents_together(
    sim: Endpoint, tmp_path: Path, time_scale: float
) -> None:
    path = tmp_path / "agents.json"
    path.write_text(json.dumps(conversation("conv-a")))
    spec = weka_spec(path, time_scale=time_scale)
    source = spec.workload.agent_source  # type: ignore[attr-defined]
    records: list[RequestRecord] = []
    result = await LoadRun(sim, spec, observers=[records.append]).execute()
    assert result.counts["completed"] == 2 * 8 == len(records)
    assert result.to_dict()["workload"]["issue"] == "agent trees at the trace's times"
    threads: dict[tuple[int, str], list[RequestRecord]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r.turn):
        threads[r.conversation, r.agent].append(r)
    assert sorted({a for _, a in threads}) == ["", "bash", "explore", "search"]
    for c in (0, 1):
        root = source.conversation(c)
        calls = threads[c, ""]
        assert [r.turn for r in calls] == [0, 1, 2]
        explore, search = threads[c, "explore"], threads[c, "search"]
        subs = {s.script.agent_id: s for s in root.spawns(0)}
        assert set(subs) == {"explore", "search"}
        for name, sub_calls in (("explore", explore), ("search", search)):
            sub = subs[name]
            offset = round(sub.offset_ns * time_scale)
            assert sub_calls[0].t_sched == calls[0].t_end + offset
            gap = round(sub.script.think_ns(1) * time_scale)
            assert gap > 0 and sub_calls[1].think_ns == gap
            assert sub_calls[1].t_sched == sub_calls[0].t_end + gap  # the tool gap, held
        # launched together, concurrent as recorded
        assert max(explore[0].t_send, search[0].t_send) < min(explore[-1].t_end, search[-1].t_end)
        # joined: the root's next call after both, plus its own recorded wait
        wait = round(root.think_ns(1) * time_scale)
        assert calls[1].t_sched == max(explore[-1].t_end, search[-1].t_end) + wait
        assert calls[2].t_sched == calls[1].t_end + round(root.think_ns(2) * time_scale)
        assert len(threads[c, "bash"]) == 1  # the background one ran, nobody waited for it
        for r in records:
            assert r.t_sched <= r.t_send <= r.t_sched + SLACK_NS
