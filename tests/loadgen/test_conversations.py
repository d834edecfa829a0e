"""Multi-turn conversations against real local servers (loopback sockets).

``EchoServer`` (below) records every request it receives, with its receive and
end times on this process's clock, and answers request ``n`` with the reply
``"reply-<n>"``: so a test can check that turn ``k+1`` quotes the *server's*
reply to turn ``k``, byte for byte, and when each turn went. The simulator
tests show what the prefix cache does for later turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from loopback import read_request, serve

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

pytestmark = pytest.mark.asyncio

HEADER = "X-Conversation-ID"


# -- the echo server -----------------------------------------------------------------------


@dataclass
class Seen:
    """One request as the server saw it (monotonic ns, on the test process's clock).

    ``ended_ns`` is taken just before the answer's bytes are written (they all go in
    one write), so the client cannot have seen the answer end before it.
    """

    n: int
    received_ns: int
    headers: dict[str, str]
    body: dict[str, Any]
    ended_ns: int = 0
    status: int = 200

    @property
    def messages(self) -> list[dict[str, str]]:
        return list(self.body.get("messages", []))

    @property
    def last_user(self) -> str:
        return self.messages[-1]["content"]

    @property
    def conversation(self) -> str:
        return self.headers.get(HEADER.lower(), "")


@dataclass
class EchoServer:
    """Streams ``reply-<n>`` to request ``n`` after ``delay_s``; fails (500) the requests
    whose last user message contains ``fail_word``."""

    delay_s: float = 0.005
    fail_word: str = "FAIL"
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    def endpoint(self) -> Endpoint:
        return Endpoint(
            f"http://127.0.0.1:{self.port}/v1", model="echo", timeouts=Timeouts.from_seconds(20)
        )

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                request = await read_request(reader)
                seen = Seen(
                    len(self.seen), request.received_ns, request.headers, json.loads(request.body)
                )
                self.seen.append(seen)
                await asyncio.sleep(self.delay_s)
                seen.ended_ns = time.monotonic_ns()  # the client's end of it comes later
                if self.fail_word in seen.last_user:
                    seen.status = 500
                    body = b'{"error": {"message": "no"}}'
                    writer.write(
                        b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                    await writer.drain()
                    continue
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                words = sum(len(m["content"].split()) for m in seen.messages)
                usage = {"prompt_tokens": words, "completion_tokens": 1, "total_tokens": words + 1}
                for payload in (
                    _chunk({"role": "assistant", "content": ""}),
                    _chunk({"content": f"reply-{seen.n}"}),
                    _chunk({}, "length"),
                    {"id": "x", "choices": [], "usage": usage},
                    "[DONE]",
                ):
                    data = payload if isinstance(payload, str) else json.dumps(payload)
                    event = f"data: {data}\n\n".encode()
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                writer.write(b"0\r\n\r\n")
                await writer.drain()

    def by_conversation(self) -> dict[str, list[Seen]]:
        out: dict[str, list[Seen]] = {}
        for s in self.seen:
            out.setdefault(s.conversation, []).append(s)
        return out


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "x", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


# -- workloads -----------------------------------------------------------------------------


def conversations(path: Path, turns: int = 3, count: int = 6, fail: int | None = None) -> str:
    """``count`` conversations of ``turns`` answered user turns; the user message of turn
    ``fail`` (of every conversation) makes the echo server answer 500."""
    with path.open("w") as f:
        for c in range(count):
            messages = []
            for k in range(turns):
                word = "FAIL" if fail == k else "ask"
                messages.append({"role": "user", "content": f"c{c} t{k} {word} question"})
                messages.append({"role": "assistant", "content": "one two three"})
            f.write(json.dumps({"messages": messages}) + "\n")
    return str(path)


def conversation_spec(
    path: str, pattern: str, load: dict[str, Any], *, requests: int | None = None, **params: Any
) -> RunSpec:
    params = {"path": path, "conversations": True, "system_prompt_tokens": 0, **params}
    return RunSpec(
        "conversation", params, 0, LoadSpec.parse(pattern, load), requests=requests,
        warmup=params.pop("warmup", 0),
    )  # fmt: skip


def check_replies_quoted(conversation: list[Seen]) -> None:
    """Turn ``k+1`` sends every earlier user turn, each followed by the server's reply to it."""
    for k, turn in enumerate(conversation):
        expected = []
        for earlier in conversation[:k]:
            expected.append({"role": "user", "content": earlier.last_user})
            expected.append({"role": "assistant", "content": f"reply-{earlier.n}"})
        assert turn.messages[:-1] == expected, (k, turn.messages)


# -- closed loop ---------------------------------------------------------------------------


async def test_closed_loop_turns_quote_the_servers_replies_after_the_think_time(
    tmp_path: Path,
) -> None:
    path = conversations(tmp_path / "c.jsonl")
    with serve(EchoServer()) as server:
        spec = conversation_spec(
            path, "concurrency", {"concurrency": 1}, requests=9, think_time=0.05,
            conversation_header=HEADER,
        )  # fmt: skip
        records: list[RequestRecord] = []
        result = await LoadRun(server.endpoint(), spec, observers=[records.append]).execute()
    assert result.counts["completed"] == 9
    by_id = server.by_conversation()
    assert list(by_id) == ["s0-0", "s0-1", "s0-2"]  # one slot: one conversation after another
    for turns in by_id.values():
        assert len(turns) == 3
        check_replies_quoted(turns)
        for before, after in itertools.pairwise(turns):
            assert after.received_ns - before.ended_ns >= 50e6  # the think time, server-side
    # the records: turn index, the collected reply (only where a later turn needs it)
    assert [r.turn for r in records] == [0, 1, 2] * 3
    assert [r.conversation for r in records] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [r.reply for r in records[:3]] == [["reply-0"], ["reply-1"], None]
    report = result.to_dict()
    # every conversation's own figures (issue 39): three whole conversations, three calls each
    assert report["conversations"]["count"] == 3 and report["conversations"]["calls"] == 9
    assert report["conversations"]["makespan"]["count"] == 3
    assert [t["turn"] for t in report["turns"]] == [1, 2, 3]
    assert [t["counts"]["completed"] for t in report["turns"]] == [3, 3, 3]
    assert sum(t["metrics"]["ttft"]["count"] for t in report["turns"]) == 9
    assert report["workload"]["sessions"]["think_time"] == "0.05 s"


async def test_a_closed_loop_slot_runs_one_conversation_at_a_time(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl", count=8)
    with serve(EchoServer(delay_s=0.01)) as server:
        spec = conversation_spec(
            path, "concurrency", {"concurrency": 2}, requests=18, think_time=0.03,
            conversation_header=HEADER,
        )  # fmt: skip
        result = await LoadRun(server.endpoint(), spec).execute()
    assert result.counts["completed"] == 18
    by_id = server.by_conversation()
    # the slots share the 18 turns as their timing has it: one conversation per slot may be cut
    assert sorted(by_id, key=lambda sid: int(sid[3:])) == [f"s0-{i}" for i in range(len(by_id))]
    assert sorted(len(t) for t in by_id.values())[2:] == [3] * (len(by_id) - 2)
    spans = [(t[0].received_ns, t[-1].ended_ns) for t in by_id.values()]
    for start, _ in spans:  # at most two conversations (= slots) live at any instant
        assert sum(a <= start < b for a, b in spans) <= 2
    for turns in by_id.values():
        check_replies_quoted(turns)
        for before, after in itertools.pairwise(turns):  # never two turns at once
            assert after.received_ns >= before.ended_ns + 30e6


async def test_a_failed_turn_ends_its_conversation(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl", count=3, fail=1)
    with serve(EchoServer()) as server:
        spec = conversation_spec(
            path, "concurrency", {"concurrency": 1}, requests=5, conversation_header=HEADER
        )
        result = await LoadRun(server.endpoint(), spec).execute()
    by_id = server.by_conversation()
    assert list(by_id) == ["s0-0", "s0-1", "s0-2"]
    assert [[t.status for t in s] for s in by_id.values()] == [[200, 500], [200, 500], [200]]
    assert result.counts == {
        "issued": 5, "completed": 3, "failed": 2, "incomplete": 0, "cancelled": 0,
        "connection_retries": 0,
        "invalid": 0,
        "blank": 0,
    }  # fmt: skip


async def test_a_cancelled_turn_ends_its_conversation(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl")
    load = {"concurrency": 1, "cancel": {"share": 1.0, "after_tokens": 1}}
    with serve(EchoServer()) as server:
        spec = conversation_spec(path, "concurrency", load, requests=3, conversation_header=HEADER)
        records: list[RequestRecord] = []
        result = await LoadRun(server.endpoint(), spec, observers=[records.append]).execute()
    assert [(r.turn, r.cancelled) for r in records] == [(0, True)] * 3
    assert result.counts["cancelled"] == 3
    assert list(server.by_conversation()) == ["s0-0", "s0-1", "s0-2"]


async def test_warm_up_turns_are_whole_turns_and_untracked(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl")
    with serve(EchoServer()) as server:
        spec = conversation_spec(
            path,
            "concurrency",
            {"concurrency": 1},
            requests=4,
            warmup=2,
            conversation_header=HEADER,
        )
        records: list[RequestRecord] = []
        result = await LoadRun(server.endpoint(), spec, observers=[records.append]).execute()
    assert len(server.seen) == 6
    assert [(r.tracked, r.turn) for r in records] == [
        (False, 0), (False, 1), (True, 2), (True, 0), (True, 1), (True, 2),
    ]  # fmt: skip
    assert result.counts["issued"] == 4
    turns = {t["turn"]: t["counts"]["issued"] for t in result.to_dict()["turns"]}
    assert turns == {1: 1, 2: 1, 3: 2}
    check_replies_quoted(
        server.by_conversation()["s0-0"]
    )  # the conversation went on past the warm-up


async def test_no_conversation_header_unless_asked(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl")
    with serve(EchoServer()) as server:
        spec = conversation_spec(path, "concurrency", {"concurrency": 1}, requests=3)
        await LoadRun(server.endpoint(), spec).execute()
    assert [HEADER.lower() in s.headers for s in server.seen] == [False] * 3
    check_replies_quoted(server.seen)


async def test_a_stop_during_a_think_time_ends_the_run_at_once(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl")
    with serve(EchoServer()) as server:
        spec = conversation_spec(
            path, "concurrency", {"concurrency": 2}, requests=50, think_time=30
        )
        answered: list[RequestRecord] = []
        stopped: list[float] = []

        def stop_once_both_first_turns_are_answered(record: RequestRecord) -> None:
            # evidence that both conversations are in their 30 s think time, not a timer
            # (which a busy machine can fire before the first turns were even sent)
            answered.append(record)
            if len(answered) == 2:
                stopped.append(time.monotonic())
                run.stop()

        run = LoadRun(server.endpoint(), spec, observers=[stop_once_both_first_turns_are_answered])
        result = await asyncio.wait_for(run.execute(), 60)
        ended = time.monotonic()
    # "at once" is judged against the think time it cut short: a run that waited the 30 s
    # out would take 30 s; scheduling noise cannot add a third of that
    assert stopped and ended - stopped[0] < 10
    assert result.counts["issued"] == result.counts["completed"] == 2
    assert result.stop_reason == "stop()"


async def test_closed_loop_duration_counts_turns_and_ends_the_think_time(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl")
    with serve(EchoServer()) as server:
        spec = RunSpec(
            "conversation",
            {"path": path, "conversations": True, "think_time": 30},
            0,
            LoadSpec.parse("concurrency", {"concurrency": 3}),
            requests=None,
            duration=0.4,
        )
        started = time.monotonic()
        result = await LoadRun(server.endpoint(), spec).execute()
    # the 30 s think time is cut at the 0.4 s duration: judged against the 30 s, a bound
    # scheduling noise cannot reach (a run that waited the think time out would take 30 s)
    assert time.monotonic() - started < 10
    assert result.counts["issued"] == 3  # three conversations' first turns; the think time outlasts
    assert result.stop_reason == "duration"


async def test_workers_split_the_conversations_exactly(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl", count=8)
    with serve(EchoServer()) as server:
        spec = conversation_spec(
            path, "concurrency", {"concurrency": 2}, requests=12, conversation_header=HEADER
        )
        result = await LoadRun(server.endpoint(), spec, workers=2).execute()
    assert result.counts["completed"] == 12
    by_id = server.by_conversation()
    # worker w runs conversations w, w + 2, ...: its slot's 6 turns = two 3-turn conversations
    assert sorted(by_id) == ["s0-0", "s0-1", "s0-2", "s0-3"]
    for turns in by_id.values():
        assert len(turns) == 3
        check_replies_quoted(turns)  # the conversation's state lived in one process
    turns_report = {t["turn"]: t["counts"]["completed"] for t in result.to_dict()["turns"]}
    assert turns_report == {1: 4, 2: 4, 3: 4}  # merged across the workers


# -- open loop -----------------------------------------------------------------------------


async def test_open_loop_arrivals_are_turns_and_conversations_interleave(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl", count=10)
    with serve(EchoServer(delay_s=0.01)) as server:
        spec = conversation_spec(
            path, "constant", {"rate": 50}, requests=24, think_time=0.1, conversation_header=HEADER
        )
        records: list[RequestRecord] = []
        result = await LoadRun(server.endpoint(), spec, observers=[records.append]).execute()
    assert result.counts["completed"] == 24
    # the pattern's schedule is kept: one turn every 20 ms, latency counted from it
    planned = sorted(r.t_sched for r in records)
    assert {round((b - a) / 1e6) for a, b in itertools.pairwise(planned)} == {20}
    by_id = server.by_conversation()
    assert len(by_id) >= 6  # a conversation is busy ~110 ms per turn: new ones start meanwhile
    order = [s.conversation for s in server.seen]
    first, second = by_id["s0-0"][0].n, by_id["s0-0"][1].n
    assert len(set(order[first + 1 : second])) >= 3  # other conversations' turns in between
    for turns in by_id.values():
        check_replies_quoted(turns)
        for before, after in itertools.pairwise(turns):
            assert after.received_ns - before.ended_ns >= 100e6
    assert [t["turn"] for t in result.to_dict()["turns"]] == [1, 2, 3]


async def test_open_loop_sends_the_conversation_ready_the_longest(tmp_path: Path) -> None:
    """Think time 0 and a slow server: at each arrival the conversation whose reply came first goes;
    a new conversation starts only when none is ready."""
    path = conversations(tmp_path / "c.jsonl", count=10, turns=4)
    with serve(EchoServer(delay_s=0.05)) as server:
        spec = conversation_spec(
            path, "constant", {"rate": 40}, requests=30, conversation_header=HEADER
        )
        records: list[RequestRecord] = []
        await LoadRun(server.endpoint(), spec, observers=[records.append]).execute()
    assert len(records) == 30
    margin = 10e6  # a reply ended this long before the arrival has surely been noted
    waiting: dict[int, int] = {}  # conversation -> when its last turn ended (= ready: think 0)
    for r in sorted(records, key=lambda r: r.t_sched):
        ready = {s: end for s, end in waiting.items() if end + margin <= r.t_sched}
        if r.turn == 0:
            assert not ready, (r.index, ready)  # a conversation was ready: no new one
        else:
            assert r.index in waiting and r.t_sched >= waiting[r.index]
            assert all(waiting[r.index] <= end for end in ready.values())
            del waiting[r.index]
        if r.turn + 1 < 4:
            waiting[r.index] = r.t_end
    starts = [r.index for r in sorted(records, key=lambda r: r.t_sched) if r.turn == 0]
    assert starts == list(range(len(starts)))  # conversations start in order
    assert len(starts) >= 3  # and several interleave


async def test_a_capped_open_loop_queues_turns_and_keeps_the_conversations(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl")
    with serve(EchoServer(delay_s=0.03)) as server:
        load = {"rate": 50, "max_concurrency": 1}
        spec = conversation_spec(path, "constant", load, requests=10, conversation_header=HEADER)
        result = await LoadRun(server.endpoint(), spec).execute()
    assert result.counts["completed"] == 10
    assert result.histogram("queue_wait").p(90) > 10  # ms: turns waited for the one slot
    for turns in server.by_conversation().values():
        check_replies_quoted(turns)
    spans = sorted((s.received_ns, s.ended_ns) for s in server.seen)
    assert all(b[0] >= a[1] for a, b in itertools.pairwise(spans))  # one at a time


async def test_open_loop_workers_split_arrivals_and_conversations(tmp_path: Path) -> None:
    path = conversations(tmp_path / "c.jsonl", count=10)
    with serve(EchoServer()) as server:
        spec = conversation_spec(
            path, "constant", {"rate": 40}, requests=20, think_time=0.2, conversation_header=HEADER
        )
        result = await LoadRun(server.endpoint(), spec, workers=2).execute()
    assert result.counts["completed"] == 20
    by_id = server.by_conversation()
    ids = sorted(int(s.split("-")[1]) for s in by_id)
    evens = [i for i in ids if i % 2 == 0]
    odds = [i for i in ids if i % 2 == 1]
    assert evens == list(range(0, 2 * len(evens), 2))  # each worker starts its own in order
    assert odds == list(range(1, 2 * len(odds), 2))
    for turns in by_id.values():
        check_replies_quoted(turns)


# -- traces whose rows carry session_id (the trace files' own field name) -------------------


def trace_file(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def trace_spec(path: str, **load: Any) -> RunSpec:
    return RunSpec.from_markers(
        ("trace",), {}, ("trace",), {"path": path, "format": "jsonl", **load}
    )


async def test_a_trace_conversation_turn_waits_for_the_previous_turn(tmp_path: Path) -> None:
    rows = [  # input lengths name the rows below
        {"timestamp": 0, "session_id": "a", "input_length": 8, "output_length": 2},
        {"timestamp": 10, "session_id": "a", "input_length": 12, "output_length": 2},
        {"timestamp": 20, "input_length": 9, "output_length": 2},
        {"timestamp": 30, "session_id": "b", "input_length": 10, "output_length": 2},
        {"timestamp": 1000, "session_id": "a", "input_length": 16, "output_length": 2},
    ]
    path = trace_file(tmp_path / "t.jsonl", rows)
    with serve(EchoServer(delay_s=0.1)) as server:
        records: list[RequestRecord] = []
        run = LoadRun(server.endpoint(), trace_spec(path), observers=[records.append])
        result = await run.execute()
    assert result.counts["completed"] == 5
    a0, a1, alone, b0, a2 = (
        next(r for r in records if r.input_requested == n) for n in (8, 12, 9, 10, 16)
    )
    t0 = a0.t_sched
    assert [round((r.t_sched - t0) / 1e6, 3) for r in (alone, b0, a2)] == [20, 30, 1000]
    # a1 was due at 10 ms, but a0 was still in flight: it went at a0's end, and that is its plan
    assert a1.t_sched == a0.t_end and a1.t_sched - t0 > 100e6
    # no schedule lag for the wait on a0: a send held to the next row's instant (1 s) would
    # lag 900 ms; a busy machine adds up to ~180 ms
    assert 0 <= a1.t_send - a1.t_sched < 500e6
    assert [r.turn for r in (a0, a1, a2, b0, alone)] == [0, 1, 2, 0, -1]
    turns = {t["turn"]: t["counts"]["issued"] for t in result.to_dict()["turns"]}
    assert turns == {1: 2, 2: 1, 3: 1}


async def test_a_failed_trace_turn_drops_the_rest_of_its_conversation(tmp_path: Path) -> None:
    rows = [
        {"timestamp": 0, "session_id": "a", "messages": [{"role": "user", "content": "FAIL"}],
         "output_length": 2},
        {"timestamp": 10, "session_id": "a", "input_length": 12, "output_length": 2},
        {"timestamp": 20, "session_id": "b", "input_length": 8, "output_length": 2},
        {"timestamp": 30, "session_id": "a", "input_length": 12, "output_length": 2},
    ]  # fmt: skip
    path = trace_file(tmp_path / "t.jsonl", rows)
    with serve(EchoServer(delay_s=0.05)) as server:
        result = await LoadRun(server.endpoint(), trace_spec(path)).execute()
    assert len(server.seen) == 2  # a's first turn (failed) and b's; a's other rows not sent
    assert result.counts == {
        "issued": 2, "completed": 1, "failed": 1, "incomplete": 0, "cancelled": 0,
        "connection_retries": 0,
        "invalid": 0,
        "blank": 0,
    }  # fmt: skip


async def test_trace_conversations_split_by_conversation_across_workers(tmp_path: Path) -> None:
    rows = []
    for k in range(3):
        for s in range(4):
            rows.append({"timestamp": 30 * k + s, "session_id": f"s{s}",
                         "messages": [{"role": "user", "content": f"s{s} turn {k}"}],
                         "output_length": 2})  # fmt: skip
    path = trace_file(tmp_path / "t.jsonl", rows)
    with serve(EchoServer(delay_s=0.05)) as server:
        result = await LoadRun(server.endpoint(), trace_spec(path), workers=2).execute()
    assert result.counts["completed"] == 12
    by_conversation: dict[str, list[Seen]] = {}
    for s in server.seen:
        by_conversation.setdefault(s.last_user.split()[0], []).append(s)
    for (
        turns
    ) in by_conversation.values():  # in order, never overlapping: one process per conversation
        assert [t.last_user.split()[-1] for t in turns] == ["0", "1", "2"]
        for before, after in itertools.pairwise(turns):
            assert after.received_ns >= before.ended_ns


# -- the simulator: prefix-cache benefit ---------------------------------------------------


def long_conversations(path: Path, count: int = 4, turns: int = 4, words: int = 400) -> str:
    """Distinct conversations (no two share a word), ``words`` per user turn."""
    vocab = ["harbour", "lamp", "tide", "ferry", "quay", "rope", "gull", "anchor"]
    with path.open("w") as f:
        for c in range(count):
            messages = []
            for k in range(turns):
                text = " ".join(f"{vocab[(c * 7 + k * 3 + i) % 8]}{c}" for i in range(words))
                messages.append({"role": "user", "content": text})
                messages.append({"role": "assistant", "content": " ".join(["word"] * 16)})
            f.write(json.dumps({"messages": messages}) + "\n")
    return str(path)


async def test_on_the_simulator_later_turns_hit_the_prefix_cache(tmp_path: Path) -> None:
    """Turn k+1 quotes turn k's prompt and the simulator's own reply: all but the new user
    turn (and a partial block) is cached, and its TTFT stays flat; without prefix caching
    the TTFT grows with the history."""
    path = long_conversations(tmp_path / "c.jsonl")
    spec = conversation_spec(path, "concurrency", {"concurrency": 4}, requests=16, think_time=0.01)
    runs: dict[bool, tuple[list[dict[str, Any]], list[RequestRecord]]] = {}
    for caching in (True, False):
        async with SimServer("llama-3.1-8b-h100", enable_prefix_caching=caching) as sim:
            endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(30))
            records: list[RequestRecord] = []
            result = await LoadRun(endpoint, spec, observers=[records.append]).execute()
        assert result.counts["completed"] == 16
        runs[caching] = (result.to_dict()["turns"], records)
    turns, records = runs[True]
    assert [t["counts"]["completed"] for t in turns] == [4, 4, 4, 4]
    assert turns[0]["metrics"]["cached_tokens"] == 0  # distinct first turns share nothing
    for r in records:
        # the estimate of a later turn's input is what the simulator counted
        assert r.input_requested == r.usage_prompt_tokens
        if r.turn >= 1:  # cached: everything but the new 400-word turn and a partial block
            assert r.usage_cached_tokens is not None
            assert r.usage_cached_tokens >= (r.usage_prompt_tokens or 0) - 400 - 2 * 16
    uncached, _ = runs[False]
    assert {t["metrics"]["cached_tokens"] for t in uncached} == {0}
    # the last turn's prefill, as the engine's clock times it (its step plan, in the usage's
    # per-request metrics): the client's TTFT would add what a busy machine adds to each side
    last_hit, last_miss = (
        statistics.median(
            r.server_ttft_ms for r in records_of if r.turn == 3 and r.server_ttft_ms is not None
        )
        for records_of in (records, runs[False][1])
    )
    assert last_hit < 0.7 * last_miss, (last_hit, last_miss)
