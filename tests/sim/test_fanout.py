"""The engine's synchronous fan-out: ready-made chunks, polls from handlers, quiet GC."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import time
from typing import Any

import httpx
import pytest

from pytest_llmperf.sim import SimServer
from pytest_llmperf.sim.gc_control import FALLBACK_YOUNG, YOUNG, GcControl
from pytest_llmperf.sim.prometheus import ServerCounters
from pytest_llmperf.sim.realtime import EngineBackend, EngineStream, _fan_out
from pytest_llmperf.sim.request import Request
from pytest_llmperf.sim.sink import SocketSink

WORDS = " ".join(f"w{i}" for i in range(200))


class FakeTransport:
    def __init__(self) -> None:
        self.data: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.data.append(data)

    def is_closing(self) -> bool:
        return False


class FakeWriter:
    """A TokenWriter that numbers its frames."""

    def __init__(self, n: int) -> None:
        self.tr = FakeTransport()
        self.n = n
        self.k = 0
        self.frame: bytes | None = b"t0"
        self.calls: list[tuple[float, float]] = []

    def wrote(self, planned: float, now: float) -> None:
        self.calls.append((planned, now))
        self.k += 1
        self.frame = None if self.k == self.n else f"t{self.k}".encode()


class FakeBackend:
    timing = "block"

    def __init__(self) -> None:
        self.released: list[Request] = []

    def release(self, req: Request) -> None:
        self.released.append(req)


def _stream(n: int) -> tuple[EngineStream, Request]:
    req = Request(0, 0.0, 10, n)
    stream = EngineStream(FakeBackend(), req)  # type: ignore[arg-type]
    req.owner = stream
    req.state = "running"
    return stream, req


def test_tokens_delivered_before_the_writer_is_attached_are_written_at_once() -> None:
    stream, _req = _stream(4)
    stream.deliver(1.0)
    stream.deliver(2.0)
    w = FakeWriter(4)
    stream.attach_writer(w, lambda exc: None)
    assert w.tr.data == [b"t0", b"t1"]
    assert [p for p, _ in w.calls] == [1.0, 2.0]


def test_fan_out_writes_ready_frames_first_and_skips_aborted_and_finished_streams() -> None:
    streams = [_stream(2) for _ in range(4)]
    writers = []
    for s, _r in streams:
        w = FakeWriter(2)
        s.attach_writer(w, lambda exc: None)
        writers.append(w)
    streams[1][1].state = "aborted"
    writers[2].frame = None  # its stream is over (or its client went away)
    _fan_out(5.0, [r for _s, r in streams])
    assert [w.tr.data for w in writers] == [[b"t0"], [], [], [b"t0"]]
    # bookkeeping gets the planned instant and the time of the write itself
    for w in (writers[0], writers[3]):
        ((planned, now),) = w.calls
        assert planned == 5.0 and now > 0
    assert writers[0].frame == b"t1"


@pytest.mark.asyncio
async def test_a_client_gone_at_its_last_token_does_not_kill_the_engine() -> None:
    """A client that reads one event and leaves (the preflight's field probe does): aiohttp
    cancels the handler, and with it the future the handler awaits, before the handler's
    cleanup takes the request out of the engine. A step in that window writes the stream's
    last token; the sink must take it quietly, for an exception in the fan-out is the
    engine's death, every later request a 500 (``InvalidStateError``, seen with a busy
    loop on each core, where the window is wide)."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stream, req = _stream(2)
    sink = SocketSink(
        FakeTransport(),  # type: ignore[arg-type]
        b"h",
        b"t",
        b"l",
        2,
        0,
        0.0,
        ServerCounters(),
        None,
        [],
        done,
    )
    stream.attach_writer(sink, sink.fail)
    _fan_out(1.0, [req])
    done.cancel()  # the handler is cancelled; its cleanup has not run yet
    _fan_out(2.0, [req])  # the last token is due: no exception
    assert sink.k == 2 and sink.frame is None and done.cancelled()


def test_fan_out_hands_the_time_to_streams_without_a_writer() -> None:
    stream, req = _stream(3)
    _fan_out(7.0, [req])
    assert list(stream._times) == [7.0]


def test_gc_control_defers_and_restores() -> None:
    saved = gc.get_threshold()
    ctl = GcControl(managed=True)
    ctl.start()
    try:
        assert gc.get_threshold()[0] == FALLBACK_YOUNG
        assert gc.get_threshold()[2] > 1_000_000  # no automatic full collection
        assert gc.get_freeze_count() > 0
        keep = [[] for _ in range(YOUNG + 100)]  # young containers, kept alive
        assert gc.get_count()[0] >= YOUNG
        ctl.after_emit(0.010)
        assert sum(ctl.collections) == 1
        assert gc.get_count()[0] < YOUNG
        del keep
    finally:
        ctl.stop()
    assert gc.get_threshold() == saved
    assert gc.get_freeze_count() == 0


def test_gc_control_unmanaged_keeps_young_collections_automatic() -> None:
    saved = gc.get_threshold()
    ctl = GcControl(managed=False)
    ctl.start()
    try:
        assert gc.get_threshold()[:2] == saved[:2]
        assert gc.get_threshold()[2] > 1_000_000
    finally:
        ctl.stop()
    assert gc.get_threshold() == saved


def _hold_loop_until(t: float) -> None:
    """Keep the event loop from running (as a burst of request handlers would)."""
    while time.monotonic() < t:
        pass


@pytest.mark.asyncio
async def test_a_poll_emits_due_steps_while_the_loop_is_held_and_keeps_the_plan() -> None:
    """Handlers call poll(): tokens that fell due while the loop was busy go out from
    there, and steps missed meanwhile run back to back at their *planned* times."""
    async with (
        SimServer("llama-3.1-8b-h100", record_emit_lag=True, timing="block") as sim,
        httpx.AsyncClient(base_url=sim.url, timeout=20) as c,
    ):
        assert sim.sim is not None
        backend = sim.sim.backend
        assert isinstance(backend, EngineBackend)
        backend.step_log = []
        body = {"prompt": WORDS, "max_tokens": 40, "stream": True}
        async with c.stream("POST", "/v1/completions", json=body) as resp:
            lines = resp.aiter_lines()
            while not (await lines.__anext__()).startswith("data: {"):
                pass  # the first token is out: the request is decoding
            lags = sim.emit_lags
            before = len(lags)
            _hold_loop_until(backend.due + 0.030)  # ~4 decode steps fall due, loop held
            backend.poll()
            caught_up = len(lags) - before
            async for _line in lines:
                pass
        planned = sim.sim.emit_planned
        ends = {backend._wall(end) for _start, end, _batch in backend.step_log}
    assert caught_up >= 3  # written from the poll, without the loop running
    assert len(planned) == 40
    assert all(p in ends for p in planned)  # every token at a step's planned end
    # back to back: the plan is the model's, whatever happened to the loop
    for (_s0, e0, _b0), (s1, _e1, _b1) in itertools.pairwise(backend.step_log):
        assert s1 == e0


@pytest.mark.asyncio
@pytest.mark.parametrize("api", ["chat", "completions"])
async def test_engine_stream_chunks_are_vllm_shaped(api: str, sse: Any) -> None:
    """The fan-out's ready-made chunks parse as the general path's do."""
    async with (
        SimServer("tiny", speedup=4.0) as sim,
        httpx.AsyncClient(base_url=sim.url, timeout=20) as c,
    ):
        if api == "chat":
            path = "/v1/chat/completions"
            body: dict[str, Any] = {"messages": [{"role": "user", "content": "hi there"}]}
        else:
            path = "/v1/completions"
            body = {"prompt": "hi there"}
        body.update(max_tokens=7, stream=True, stream_options={"include_usage": True})
        async with c.stream("POST", path, json=body) as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            events = await sse.read(resp)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    if api == "chat":
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        chunks = chunks[1:]
    tokens, usage = chunks[:-1], chunks[-1]
    assert len(tokens) == 7
    assert len({ch["id"] for ch in chunks}) == 1
    assert [ch["choices"][0]["finish_reason"] for ch in tokens] == [None] * 6 + ["length"]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 7


@pytest.mark.asyncio
async def test_quiet_gc_is_started_and_undone_with_the_server() -> None:
    saved = gc.get_threshold()
    async with SimServer("tiny", quiet_gc=True) as sim:
        assert sim.sim is not None and sim.sim.gc is not None and sim.sim.gc.active
        assert gc.get_freeze_count() > 0
        await asyncio.sleep(0)
    assert gc.get_threshold() == saved
    assert gc.get_freeze_count() == 0
