"""The compiled per-read path and its pure-Python twin give the same records.

:mod:`pytest_llmperf.client.speedups` picks one of the two at import
(``_speedups``, Cython, where it was built; ``_speedups_py`` else, or with
``LLMPERF_PURE_PYTHON=1``). Here both run in one process on the same bytes: the
connection and the request's sink are the client's own classes
(:class:`~pytest_llmperf.client.http1.Http1Connection`, the request's ``_Reading``)
set on each twin's base in turn, fed whole HTTP responses (chat, completions,
Responses events, the usage chunk, ``[DONE]``, comments, CRLF, an escape) split at
every byte boundary, a read per event, two events a read, and a byte a read. The
records must match field for field, with each timestamp read as *which read* it is
(each read has its own ``monotonic_ns``); and each stream's token events are
counted independently, so the two cannot agree on a wrong answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.client import _speedups_py, speedups
from pytest_llmperf.client.endpoint import Timeouts
from pytest_llmperf.client.http1 import Http1Connection
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.client.request import _Reading

try:
    _compiled: Any = importlib.import_module("pytest_llmperf.client._speedups")
except ImportError:
    _compiled = None

REQUIRE_COMPILED = os.environ.get("LLMPERF_REQUIRE_COMPILED") == "1"  # CI: it must be built
needs_compiled = pytest.mark.skipif(_compiled is None, reason="the extension is not built")


def _rebased(cls: type, base: type) -> type:
    """``cls``'s own methods on another twin's base (the class body is the same code)."""
    own = dict(vars(cls))
    slots = own.pop("__slots__", None)
    for name in (*(slots or ()), "__dict__", "__weakref__"):
        own.pop(name, None)
    if slots is not None:
        own["__slots__"] = slots
    rest = tuple(b for b in cls.__bases__ if b.__name__ not in ("ConnectionReads", "SinkReads"))
    return type(cls.__name__, (base, *rest), own)


_CLASSES: dict[str, tuple[type, type]] = {}


def _classes(module: Any) -> tuple[type, type]:
    if module.__name__ not in _CLASSES:
        _CLASSES[module.__name__] = (
            _rebased(Http1Connection, module.ConnectionReads),
            _rebased(_Reading, module.SinkReads),
        )
    return _CLASSES[module.__name__]


class _Transport:
    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass

    def get_extra_info(self, name: str) -> None:
        return None


def _read(module: Any, api: str, reads: Iterable[bytes]) -> dict[str, Any]:
    """The record of one response fed in ``reads`` (in a running event loop: the sink's
    future); its timestamps as read numbers."""
    conn_cls, reading_cls = _classes(module)
    conn = conn_cls()
    conn.connection_made(_Transport())
    record = RequestRecord(0, 1)
    reading = reading_cls(record, Timeouts.from_seconds(100), 1, api=api)
    conn.send(b"", reading)
    stamps: dict[int, int] = {}
    for number, data in enumerate(reads, 1):
        view = memoryview(bytearray(data))
        conn._buffer = view
        conn.buffer_updated(len(view))
        if conn._now and conn._now not in stamps:
            stamps[conn._now] = number
    reading.stop_watching()
    return _normal(record, stamps)


def _in_loop(check: Callable[[], None]) -> None:
    async def run() -> None:
        check()

    asyncio.run(run())


def _normal(record: RequestRecord, stamps: dict[int, int]) -> dict[str, Any]:
    fields = dataclasses.asdict(record)
    for name in ("t_first", "t_last", "t_out", "t_end"):
        fields[name] = stamps.get(fields[name], fields[name] and "?")
    if record.t_first:  # each token event's read, from the first one and the gaps
        times = accumulate(record.gaps_ns, initial=record.t_first)
        fields["gaps_ns"] = [stamps.get(t, "?") for t in times]
    return fields


def _http(body: bytes, *, crlf: bool = False, chunks: list[bytes] | None = None) -> list[bytes]:
    """A chunked 200 event-stream response as its pieces: the head, then one HTTP chunk
    per event (or per ``chunks``), then the last chunk."""
    parts = chunks if chunks is not None else [e + b"\n\n" for e in body.split(b"\n\n") if e]
    if crlf:
        parts = [p.replace(b"\n", b"\r\n") for p in parts]
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    framed = [b"%x\r\n%s\r\n" % (len(p), p) for p in parts]
    return [head, *framed, b"0\r\n\r\n"]


def _chat(text: str) -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def _chat_stream(tokens: list[str]) -> bytes:
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": len(tokens)}}
    out = [b"data: " + json.dumps(role).encode() + b"\n\n"]
    out += [_chat(t) for t in tokens]
    out += [b"data: " + json.dumps(o).encode() + b"\n\n" for o in (finish, usage)]
    return b"".join(out) + b"data: [DONE]\n\n"


def _completions_stream(tokens: list[str]) -> bytes:
    def chunk(text: str, finish: str | None = None) -> bytes:
        obj = {"id": "cmpl-1", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    return b"".join(chunk(t) for t in tokens) + chunk("", "stop") + b"data: [DONE]\n\n"


def _responses_stream(tokens: list[str]) -> bytes:
    def event(obj: dict[str, Any]) -> bytes:
        return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()

    created = {"type": "response.created", "response": {"id": "r1", "status": "in_progress"}}
    deltas = [
        {"type": "response.output_text.delta", "item_id": "m1", "output_index": 0, "delta": t}
        for t in tokens
    ]
    usage = {"input_tokens": 3, "output_tokens": len(tokens)}
    done = {
        "type": "response.completed",
        "response": {"id": "r1", "status": "completed", "usage": usage},
    }
    return b"".join(event(o) for o in [created, *deltas, done])


TOKENS = ["Hel", "lo", " wor", "ld", "!", " é", "x"]
STREAMS = {
    "chat": ("chat", _chat_stream(TOKENS), len(TOKENS)),
    "chat-escape-comment": (
        "chat",
        _chat_stream(["a", 'say "b"', "c", "d"]).replace(
            b'\n\ndata: {"id', b'\n\n: ping\n\ndata: {"id', 1
        ),
        4,
    ),
    "completions": ("completions", _completions_stream(TOKENS), len(TOKENS)),
    "responses": ("responses", _responses_stream(TOKENS), len(TOKENS)),
}


def _splits(name: str, crlf: bool) -> Iterator[tuple[str, list[bytes]]]:
    _, body, _ = STREAMS[name]
    pieces = _http(body, crlf=crlf)
    whole = b"".join(pieces)
    yield "a read per event", pieces
    yield (
        "two events a read",
        [pieces[0]] + [b"".join(pieces[i : i + 2]) for i in range(1, len(pieces), 2)],
    )
    yield "one read", [whole]
    yield "a byte a read", [whole[i : i + 1] for i in range(len(whole))]
    for at in range(1, len(whole)):
        yield f"split at {at}", [whole[:at], whole[at:]]


@needs_compiled
@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("name", list(STREAMS))
def test_the_twins_give_the_same_record_at_every_split(name: str, crlf: bool) -> None:
    api, _, events = STREAMS[name]

    def check() -> None:
        for how, reads in _splits(name, crlf):
            pure, compiled = _read(_speedups_py, api, reads), _read(_compiled, api, reads)
            assert compiled == pure, f"{name} ({'crlf' if crlf else 'lf'}), {how}"
            assert pure["error"] is None, (how, pure["error_detail"])
            assert pure["token_events"] == events, how
            assert "?" not in pure["gaps_ns"], how

    _in_loop(check)


@needs_compiled
def test_the_twins_take_a_run_of_common_chunks_in_one_read() -> None:
    """A read of nothing but common chunks is one stamp for all its events, on both."""
    api, body, _ = STREAMS["chat"]
    pieces = _http(body)
    # the head, the role chunk, two single tokens (the shape is learned), then the other
    # five tokens in one read, then the finish, usage, [DONE] and the stream's end
    reads = [*pieces[:4], b"".join(pieces[4:9]), b"".join(pieces[9:])]

    def check() -> None:
        pure, compiled = _read(_speedups_py, api, reads), _read(_compiled, api, reads)
        assert compiled == pure
        assert pure["gaps_ns"] == [3, 4, 5, 5, 5, 5, 5]  # the events' reads
        assert pure["t_end"] == 6 and pure["finish_reason"] == "length"

    _in_loop(check)


@needs_compiled
def test_the_compiled_count_is_the_readers_on_odd_reads() -> None:
    """The compiled twin of ``ChunkReader.sse_run`` on reads that are almost a run."""
    from pytest_llmperf.apis.chunk_shapes import ChunkReader

    reader = ChunkReader()
    assert reader.event_framing is None  # nothing learned: the client asks the reader
    for token in ("a", "b"):
        reader(_chat(token)[6:-2].decode())
    assert reader.event_framing is not None
    one = _chat("xy")
    reads = [
        one,
        one * 3,
        _chat(""),
        _chat('q"'),
        one + b": c\n\n",
        one[:-1],
        one + b"\n\n",
        one + b"\n",
        b"\n\n" + one,
        one.replace(b"data: ", b"data:"),
        one + _chat("tab\t"),
    ]
    for read in reads:
        assert _compiled._sse_run_for_tests(read, *reader.event_framing) == reader.sse_run(read)


def test_the_choice_is_visible_and_follows_the_environment() -> None:
    forced = os.environ.get(speedups.PURE_PYTHON_ENV) == "1"
    if forced:
        assert not speedups.speedups_in_use()
    else:
        assert speedups.speedups_in_use() is (_compiled is not None)
    if REQUIRE_COMPILED:
        assert _compiled is not None, "LLMPERF_REQUIRE_COMPILED=1 but the extension is not built"
    bases = {b.__module__ for b in Http1Connection.__mro__} | {
        b.__module__ for b in _Reading.__mro__
    }
    expected = "_speedups" if speedups.speedups_in_use() else "_speedups_py"
    assert f"pytest_llmperf.client.{expected}" in bases


@needs_compiled
def test_pure_python_env_forces_the_fallback(tmp_path: Path) -> None:
    code = (
        "from pytest_llmperf.client.speedups import speedups_in_use;"
        "from pytest_llmperf.client.http1 import Http1Connection as C;"
        "print(speedups_in_use(), C.__mro__[1].__module__)"
    )
    for value, expected in (
        ("1", "False pytest_llmperf.client._speedups_py"),
        ("", "True pytest_llmperf.client._speedups"),
    ):
        env = {**os.environ, speedups.PURE_PYTHON_ENV: value}
        out = subprocess.run(  # not in the checkout: ``-c`` puts the cwd on sys.path
            [sys.executable, "-c", code],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == expected


def test_the_session_header_says_which_path_reads(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    word = "reads=compiled" if speedups.speedups_in_use() else "reads=python"
    result.stdout.fnmatch_lines([f"llmperf: api=* {word}"])
