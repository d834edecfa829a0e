"""Delta plans and shaped chunks without a server: seeding, boundaries, exact bytes."""

from __future__ import annotations

import asyncio
import json

from pytest_llmperf.sim.deltas import DeltaPlan, ShapedChunks, plan_deltas
from pytest_llmperf.sim.profiles import load_profile
from pytest_llmperf.sim.prometheus import ServerCounters
from pytest_llmperf.sim.sink import ShapedSocketSink, SocketSink
from pytest_llmperf.sim.text import token_text
from pytest_llmperf.sim.wire import ChunkWriter


def test_empty_delta_rate_is_the_share_of_empty_chunks() -> None:
    profile = load_profile("fixed", empty_delta_rate=0.3)
    plans = [plan_deltas(profile, 0, i, 500, "chat") for i in range(20)]
    share = sum(sum(p.empty) for p in plans if p) / (20 * 500)
    assert 0.27 < share < 0.33


def test_no_plan_when_every_mode_is_off() -> None:
    assert plan_deltas(load_profile("fixed"), 0, 0, 10, "chat") is None
    assert plan_deltas(load_profile("tiny"), 0, 0, 10, "completions") is None


def test_last_reasoning_token_before_an_answer_is_never_empty() -> None:
    profile = load_profile("fixed", reasoning_tokens=4, empty_delta_rate=1.0)
    plan = plan_deltas(profile, 0, 0, 8, "chat")
    assert plan is not None and list(plan.empty) == [1, 1, 1, 0, 1, 1, 1, 1]


def test_shaped_chunks_match_token_chunk() -> None:
    """The pre-rendered bytes are exactly what json.dumps-built chunks would be."""
    profile = load_profile(
        "fixed", reasoning_tokens=3, empty_delta_rate=0.5, separate_finish_chunk=True
    )
    plan = plan_deltas(profile, 3, 7, 12, "chat")
    assert plan is not None
    w = ChunkWriter("chat", profile.model)
    shaped = ShapedChunks(w, plan, 91, "stop")
    pending = ""
    for k in range(12):
        pending += token_text(k, 91)
        text = "" if plan.empty[k] else pending
        if not plan.empty[k]:
            pending = ""
        expected = w.token_chunk(text, None, reasoning=k < 3)
        if k == 11:
            expected += w.finish_chunk("stop")
        assert shaped.chunk(k) == expected


def test_multi_token_chunks_carry_held_back_text() -> None:
    profile = load_profile("fixed", empty_delta_rate=0.5)
    plan = plan_deltas(profile, 0, 3, 9, "chat")
    assert plan is not None
    w = ChunkWriter("chat", profile.model)
    shaped = ShapedChunks(w, plan, 39, "length")
    one_by_one = ShapedChunks(w, plan, 39, "length")
    texts = [one_by_one.chunk(k) for k in range(9)]
    got = [shaped.chunk(0, 4), shaped.chunk(4, 5)]
    # a grouped chunk's text is what its tokens' chunks would have carried together
    for chunk, part in zip(got, (texts[:4], texts[4:]), strict=True):
        text = "".join(json.loads(c[6:])["choices"][0]["delta"]["content"] for c in part)
        assert json.loads(chunk[6:])["choices"][0]["delta"]["content"] == text
    assert json.loads(got[1][6:])["choices"][0]["finish_reason"] == "length"


def test_a_final_empty_delta_drops_its_text_as_vllm_does() -> None:
    profile = load_profile("fixed", empty_delta_rate=1.0)
    plan = DeltaPlan(n=3, n_reasoning=0, empty=bytes([0, 1, 1]), separate_finish=False)
    w = ChunkWriter("chat", profile.model)
    shaped = ShapedChunks(w, plan, 0, "length")
    assert [shaped.chunk(k) for k in range(3)] == [
        w.token_chunk(token_text(0, 0)),
        w.token_chunk(""),
        w.token_chunk("", "length"),
    ]


def test_empty_deltas_alone_never_make_a_plan_all_empty() -> None:
    """Partial characters are a shape, not a blank reply: the last token of an all-empty
    draw carries the text held back (a blank reply is blank_reply_rate's)."""
    profile = load_profile("fixed", empty_delta_rate=1.0)
    for n in (1, 3):
        plan = plan_deltas(profile, 0, 0, n, "chat")
        assert plan is not None and list(plan.empty) == [1] * (n - 1) + [0]
        assert not plan.blank


def test_blank_reply_rate_is_the_share_of_replies_with_every_token_empty() -> None:
    profile = load_profile("fixed", blank_reply_rate=0.25, reasoning_tokens=2)
    plans = [plan_deltas(profile, 7, i, 6, "chat") for i in range(400)]
    blank = [p for p in plans if p is not None and p.blank]
    assert 0.19 < len(blank) / 400 < 0.31
    # a blank plan is empty to its last token, reasoning included; the others have text
    assert all(list(p.empty) == [1] * 6 for p in blank)
    assert all(not all(p.empty) for p in plans if p is not None and not p.blank)
    # seeded: the same requests are blank on every draw
    again = [plan_deltas(profile, 7, i, 6, "chat") for i in range(400)]
    assert [p.blank for p in plans if p] == [p.blank for p in again if p]


def test_a_blank_plan_streams_empty_deltas_and_a_blank_finish() -> None:
    """vLLM's shape of a token that decodes to nothing: one "" delta per token, the last
    on the finishing chunk; the usage (not here) still counts every token."""
    w = ChunkWriter("chat", "m")
    plan = plan_deltas(load_profile("fixed", blank_reply_rate=1.0), 0, 0, 3, "chat")
    assert plan is not None and plan.blank
    shaped = ShapedChunks(w, plan, 0, "length")
    assert [shaped.chunk(k) for k in range(3)] == [
        w.token_chunk(""),
        w.token_chunk(""),
        w.token_chunk("", "length"),
    ]


def test_completions_plans_have_no_reasoning_part() -> None:
    profile = load_profile("fixed", reasoning_tokens=5)
    plan = plan_deltas(profile, 0, 0, 8, "completions")
    assert plan is not None and plan.n_reasoning == 0
    chat = plan_deltas(profile, 0, 0, 8, "chat")
    assert chat is not None and chat.n_reasoning == 5


class _Transport:
    def __init__(self) -> None:
        self.closing = False

    def is_closing(self) -> bool:
        return self.closing


def test_shaped_socket_sink_frames_for_chunked_encoding() -> None:
    """The engine's fan-out writes a shaped sink's frames: HTTP chunks of the shaped bytes."""
    profile = load_profile(
        "tiny", reasoning_tokens=2, empty_delta_rate=0.5, separate_finish_chunk=True
    )
    plan = plan_deltas(profile, 0, 0, 6, "chat")
    assert plan is not None
    w = ChunkWriter("chat", profile.model)
    expected = ShapedChunks(w, plan, 0, "stop")
    loop = asyncio.new_event_loop()
    try:
        done: asyncio.Future[None] = loop.create_future()
        sink = ShapedSocketSink(
            _Transport(),  # type: ignore[arg-type]
            ShapedChunks(w, plan, 0, "stop"),
            6,
            0,
            0.0,
            ServerCounters(),
            None,
            [],
            done,
        )
        for k in range(6):
            data = expected.chunk(k)
            assert sink.frame == b"%x\r\n%b\r\n" % (len(data), data)
            sink.wrote(k * 0.01, k * 0.01)
        assert sink.frame is None and done.done()
    finally:
        loop.close()


def test_plain_socket_sink_is_unchanged() -> None:
    """With every mode off the engine keeps the plain sink: vLLM's shape, word by word."""
    w = ChunkWriter("chat", "m")
    head, tail, last_tail = w.token_template("length")
    loop = asyncio.new_event_loop()
    try:
        sink = SocketSink(
            _Transport(),  # type: ignore[arg-type]
            head,
            tail,
            last_tail,
            3,
            26,
            0.0,
            ServerCounters(),
            None,
            [],
            loop.create_future(),
        )
        for k in range(3):
            data = w.token_chunk(token_text(k, 26), "length" if k == 2 else None)
            assert sink.frame == b"%x\r\n%b\r\n" % (len(data), data)
            sink.wrote(0.0, 0.0)
    finally:
        loop.close()
