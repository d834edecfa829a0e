"""The load generator issues the dressed samples: independent requests and conversation turns.

A run against a loopback server that streams a short reply to anything; the
samples the load generator hands to the client are caught where each request
is booked (``IssueBook.new_record``), so this checks the workload's wrapping
reaches the send path (the plan's conversations included) whatever the client does
with the fields.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from loopback import read_request, serve

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.issue.book import IssueBook
from pytest_llmperf.loadgen.plan.planner import PlannedRequest
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads import RequestPathsWorkload, Sample

pytestmark = pytest.mark.asyncio

PATHS: dict[str, Any] = {
    "adapters": {"sim-lora-1": 0.4, "sim-lora-2": 0.4},
    "tools": "sample",
    "tool_choice": "required",
    "greedy": True,
}


class ReplyServer:
    """Streams the chat reply ``"ok"`` (one token) to every request."""

    port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                await read_request(reader)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
                for payload in (
                    {"id": "x", "choices": [{"index": 0, "delta": {"content": "ok"}}]},
                    {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {"id": "x", "choices": [], "usage": usage},
                    "[DONE]",
                ):
                    data = payload if isinstance(payload, str) else json.dumps(payload)
                    event = f"data: {data}\n\n".encode()
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                writer.write(b"0\r\n\r\n")
                await writer.drain()

    def endpoint(self) -> Endpoint:
        return Endpoint(
            f"http://127.0.0.1:{self.port}/v1", model="base", timeouts=Timeouts.from_seconds(20)
        )


@pytest.fixture
def issued(monkeypatch: pytest.MonkeyPatch) -> list[Sample]:
    """Every sample the load generator books a request for, in order."""
    seen: list[Sample] = []
    book = IssueBook.new_record

    def new_record(
        self: IssueBook, item: PlannedRequest, sample: Sample, t_sched: int
    ) -> RequestRecord:
        seen.append(sample)
        return book(self, item, sample, t_sched)

    monkeypatch.setattr(IssueBook, "new_record", new_record)
    return seen


async def test_independent_requests_go_out_dressed(issued: list[Sample]) -> None:
    spec = RunSpec(
        "synthetic",
        {"input_tokens": 8, "output_tokens": 2, **PATHS},
        3,
        LoadSpec.parse("concurrency", {"concurrency": 2}),
        requests=30,
    )
    workload = spec.workload
    assert isinstance(workload, RequestPathsWorkload) and workload.mix is not None
    with serve(ReplyServer()) as server:
        result = await LoadRun(server.endpoint(), spec).execute()
    assert result.counts["completed"] == 30 and len(issued) == 30
    assert all(s.contract is workload.contract for s in issued)
    assert [s.model for s in issued] == [workload.mix.draw(3, s.index) for s in issued]
    assert set(Counter(s.model for s in issued)) == {"sim-lora-1", "sim-lora-2", ""}
    assert result.to_dict()["workload"]["adapters"] == {
        "sim-lora-1": 0.4,
        "sim-lora-2": 0.4,
        "base": 0.2,
    }


async def test_every_turn_of_a_conversation_goes_out_dressed(
    issued: list[Sample], tmp_path: Path
) -> None:
    path = tmp_path / "c.jsonl"
    with path.open("w") as f:
        for c in range(8):
            messages = []
            for k in range(3):
                messages.append({"role": "user", "content": f"c{c} t{k} question"})
                messages.append({"role": "assistant", "content": "one two three"})
            f.write(json.dumps({"messages": messages}) + "\n")
    params = {"path": str(path), "conversations": True, "system_prompt_tokens": 0, **PATHS}
    spec = RunSpec(
        "conversation", params, 0, LoadSpec.parse("concurrency", {"concurrency": 2}), requests=18
    )
    workload = spec.workload
    assert isinstance(workload, RequestPathsWorkload) and workload.mix is not None
    with serve(ReplyServer()) as server:
        result = await LoadRun(server.endpoint(), spec).execute()
    assert result.counts["completed"] == 18 and len(issued) == 18
    by_conversation: dict[int, list[Sample]] = {}
    for s in issued:
        by_conversation.setdefault(s.index, []).append(s)
    assert any(len(turns) == 3 for turns in by_conversation.values())  # later turns were sent
    for index, turns in by_conversation.items():
        assert {s.model for s in turns} == {workload.mix.draw(0, index)}
        assert all(s.contract is workload.contract for s in turns)
    # later turns quote the server's reply: the conversation machinery ran as before
    assert any(
        {"role": "assistant", "content": "ok"} in [dict(m) for m in s.history] for s in issued
    )
