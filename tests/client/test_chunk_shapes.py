"""A stream's common chunk recognised without decoding it: the same answer as the full
parser for every chunk, on every server's shape, or the full parser's own answer.

Each stream below is a real server's chunk shape (vLLM, SGLang, llama.cpp, TGI, the
OpenAI API; chat and completions) with its tokens, its escapes, its empty deltas and
its last chunks; a :class:`ChunkReader` must say of every chunk exactly what
:func:`parse_chunk` says, and must take the fast path where the shape allows it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmperf.apis.chunk_shapes import ChunkReader
from pytest_llmperf.apis.chunks import parse_chunk
from pytest_llmperf.apis.events import ChunkInfo
from pytest_llmperf.apis.registry import chunk_parser
from pytest_llmperf.client.endpoint import Timeouts
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import _on_event, _Reading

Compact = Callable[[Any], str]


def compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def spaced(obj: Any) -> str:
    return json.dumps(obj)


def vllm_chat(text: str, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-8f3a",
        "object": "chat.completion.chunk",
        "created": 1764000000,
        "model": "m",
        "choices": [
            {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish}
        ],
    }


def sglang_chat(text: str, finish: str | None = None) -> dict[str, Any]:
    delta = {"role": None, "content": text, "reasoning_content": None, "tool_calls": None}
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {"id": "a1", "object": "chat.completion.chunk", "created": 17, "model": "m",
            "choices": [{**choice, "matched_stop": None}], "usage": None}  # fmt: skip


def llama_cpp_chat(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"finish_reason": finish, "index": 0, "delta": {"content": text}}],
            "created": 1764, "id": "chatcmpl-x", "model": "m", "system_fingerprint": "b1",
            "object": "chat.completion.chunk"}  # fmt: skip


def tgi_chat(text: str, finish: str | None = None) -> dict[str, Any]:
    delta = {"role": "assistant", "content": text, "tool_calls": None}
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {"object": "chat.completion.chunk", "id": "", "created": 1, "model": "m",
            "system_fingerprint": "3.0", "usage": None, "choices": [choice]}  # fmt: skip


def vllm_completions(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"id": "cmpl-1", "object": "text_completion", "created": 5, "model": "m",
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                         "stop_reason": None}]}  # fmt: skip


SHAPES = {
    "vllm-chat": vllm_chat,
    "sglang-chat": sglang_chat,
    "llama.cpp-chat": llama_cpp_chat,
    "tgi-chat": tgi_chat,
    "vllm-completions": vllm_completions,
}
TEXTS = ["Hello", " world", "", " the", 'say "hi"', "a\\b", "line\n", "é", "\x19", "x", ""]


def stream(shape: Callable[..., dict[str, Any]], dump: Compact) -> list[str]:
    """A stream as a server sends it: a role chunk, tokens (escapes, empty deltas), the
    finish, the usage chunk."""
    out = []
    if shape is not vllm_completions:
        first = shape("")
        first["choices"][0]["delta"] = {"role": "assistant", "content": ""}
        out.append(dump(first))
    out += [dump(shape(text)) for text in TEXTS]
    out.append(dump(shape("", "length")))
    out.append(dump({"id": "x", "object": "chat.completion.chunk", "choices": [],
                     "usage": {"prompt_tokens": 3, "completion_tokens": 11}}))  # fmt: skip
    return out


def same(a: ChunkInfo, b: ChunkInfo) -> bool:
    fields = ("event", "answer", "reasoning", "output", "finish_reason", "usage", "timing")
    more = ("error", "done", "blank_finish")
    return all(getattr(a, f) == getattr(b, f) for f in (*fields, *more))


@pytest.mark.parametrize("dump", [compact, spaced], ids=["compact", "spaced"])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_chunk_gets_the_full_parsers_answer(name: str, dump: Compact) -> None:
    reader = ChunkReader()
    for data in stream(SHAPES[name], dump) * 2:  # the second pass on a learned shape
        assert same(reader(data), parse_chunk(data)), data


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The chunks the reader hands to the full parser from now on, in order."""
    parsed: list[str] = []
    full = parse_chunk

    def counting(data: str) -> ChunkInfo:
        parsed.append(data)
        return full(data)

    monkeypatch.setattr("pytest_llmperf.apis.chunk_shapes.parse_chunk", counting)
    return parsed


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_common_chunk_takes_the_fast_path(name: str, decoded: list[str]) -> None:
    reader = ChunkReader()
    shape = SHAPES[name]
    reader(compact(shape("Hi")))  # learned from the first plain token
    decoded.clear()
    for text in (" there", "", "!", " é"):
        reader(compact(shape(text)))
    assert decoded == []  # none of these was decoded
    escaped, last = compact(shape('"q"')), compact(shape("", "stop"))
    reader(escaped)
    reader(last)
    assert decoded == [escaped, last]  # an escape, a finish: the full parser's answers


def test_a_chunk_that_changes_per_token_is_always_parsed_in_full(decoded: list[str]) -> None:
    # a server that puts a per-token field in every chunk (a token id): the learned bytes
    # never come again, so every chunk is decoded, and answered as the full parser does
    reader = ChunkReader()
    chunks = [compact({**vllm_chat(t), "token_id": k}) for k, t in enumerate("abcdef")]
    for data in chunks:
        assert same(reader(data), parse_chunk(data))
    assert [d for d in decoded if d in chunks] == chunks


def test_chat_and_completions_get_a_reader_per_stream() -> None:
    one, two = chunk_parser("chat"), chunk_parser("chat")
    assert isinstance(one, ChunkReader) and one is not two
    assert isinstance(chunk_parser("completions"), ChunkReader)
    assert not isinstance(chunk_parser("responses"), ChunkReader)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(max_size=8), min_size=1, max_size=12),
    name=st.sampled_from(sorted(SHAPES)),
    spacing=st.booleans(),
)
def test_any_texts_any_shape_the_same_answers(texts: list[str], name: str, spacing: bool) -> None:
    dump = spaced if spacing else compact
    reader = ChunkReader()
    for text in ["seed", *texts]:
        data = dump(SHAPES[name](text))
        assert same(reader(data), parse_chunk(data)), data


RECORD_FIELDS = (
    "t_first", "t_last", "t_out", "gaps_ns", "token_events", "has_output", "finish_reason",
    "reasoning_events", "error", "usage_completion_tokens", "usage_prompt_tokens",
)  # fmt: skip


def read_in_pieces(payloads: list[str], cuts: list[int]) -> tuple[RequestRecord, RequestRecord]:
    """The record a response sink makes of ``payloads`` arriving in reads split at ``cuts``
    (runs of the common chunk taken at once), and the one the full parser makes of each
    event in turn, at the same read instants."""
    reads: list[list[str]] = []
    at = 0
    for cut in [*sorted(set(cuts)), len(payloads)]:
        if at < cut <= len(payloads):
            reads.append(payloads[at:cut])
            at = cut

    async def sink_record() -> RequestRecord:
        record = RequestRecord(index=0, t_sched=1)
        sink = _Reading(record, Timeouts.from_seconds(10), 1, api="chat")
        for k, read in enumerate(reads):
            sink.on_body("".join(f"data: {d}\n\n" for d in read).encode(), 1_000 * (k + 2))
        return record

    record = asyncio.run(sink_record())
    reference = RequestRecord(index=0, t_sched=1)
    for k, read in enumerate(reads):
        for data in read:
            _on_event(data, 1_000 * (k + 2), reference, parse_chunk)
    return record, reference


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.sampled_from([*TEXTS[:-1], "ab", " c", "d e"]), min_size=1, max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=34), max_size=8),
    name=st.sampled_from(sorted(SHAPES)),
)
def test_a_reads_run_of_common_chunks_makes_the_record_event_by_event_would(
    texts: list[str], cuts: list[int], name: str
) -> None:
    shape = SHAPES[name]
    payloads = [compact(shape(t)) for t in ["seed", *texts]] + stream(shape, compact)[-2:]
    record, reference = read_in_pieces(payloads, cuts)
    for field in RECORD_FIELDS:
        assert getattr(record, field) == getattr(reference, field), field


def read_at_byte_cuts(payloads: list[str], cuts: list[int]) -> tuple[RequestRecord, RequestRecord]:
    """As :func:`read_in_pieces`, but the stream's bytes are cut anywhere (mid-event,
    mid-character): an event belongs to the read that brings its blank line."""
    wire = b"".join(f"data: {d}\n\n".encode() for d in payloads)
    bounds = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
    reads = [wire[a:b] for a, b in itertools.pairwise(bounds) if b > a]

    async def sink_record() -> RequestRecord:
        record = RequestRecord(index=0, t_sched=1)
        sink = _Reading(record, Timeouts.from_seconds(10), 1, api="chat")
        for k, read in enumerate(reads):
            sink.on_body(read, 1_000 * (k + 2))
        return record

    record = asyncio.run(sink_record())
    reference = RequestRecord(index=0, t_sched=1)
    end = 0
    for data in payloads:
        end += len(f"data: {data}\n\n".encode())
        k = next(i for i, b in enumerate(bounds[1:]) if b >= end)  # the read with its end
        _on_event(data, 1_000 * (k + 2), reference, parse_chunk)
    return record, reference


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.one_of(st.sampled_from(TEXTS), st.text(max_size=6)), min_size=1, max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    name=st.sampled_from(sorted(SHAPES)),
)
def test_reads_cut_anywhere_make_the_record_event_by_event_would(
    texts: list[str], cuts: list[int], name: str
) -> None:
    """The whole-read path (``ChunkReader.sse_run`` on a read's bytes, when the SSE parser
    holds nothing) and the parser's path agree for any texts and any cuts of the bytes."""
    shape = SHAPES[name]
    payloads = [compact(shape(t)) for t in ["seed", *texts]] + stream(shape, compact)[-2:]
    record, reference = read_at_byte_cuts(payloads, cuts)
    for field in RECORD_FIELDS:
        assert getattr(record, field) == getattr(reference, field), field


def test_a_read_of_whole_common_chunks_is_counted_from_its_bytes() -> None:
    """The reads that the whole-read path takes, and those it leaves to the SSE parser."""
    reader = ChunkReader()
    for text in ["seed", "Hello"]:
        reader(compact(vllm_chat(text)))
    one = f"data: {compact(vllm_chat(' world'))}\n\n".encode()
    assert reader.sse_run(one) == 1
    assert reader.sse_run(one * 3) == 3
    assert reader.sse_run(f"data: {compact(vllm_chat(''))}\n\n".encode()) == 0  # empty text
    quoted = compact(vllm_chat('a"b'))
    assert reader.sse_run(f"data: {quoted}\n\n".encode()) == 0  # an escape
    assert reader.sse_run(one + b": keep-alive\n\n") == 0  # a comment: the parser's
    assert reader.sse_run(one[:-1]) == 0  # no blank line yet
    assert reader.sse_run(one.replace(b"data: ", b"data:")) == 0  # other framing
    finish = f"data: {compact(vllm_chat('x', 'stop'))}\n\n".encode()
    assert reader.sse_run(one + finish) == 0  # the finish is parsed in full
    assert ChunkReader().sse_run(one) == 0  # nothing learned yet


def test_a_read_after_an_unfinished_event_goes_through_the_sse_parser() -> None:
    """A read that looks like whole common chunks but continues an event the parser holds
    (here a first ``data:`` line, no blank line yet) is that event's second line: the
    event is the two lines joined, not JSON, and the request fails as the parser says."""
    chunk = compact(vllm_chat(" world"))

    async def reads() -> RequestRecord:
        record = RequestRecord(index=0, t_sched=1)
        sink = _Reading(record, Timeouts.from_seconds(10), 1, api="chat")
        for k, text in enumerate(["seed", "Hello"]):
            sink.on_body(f"data: {compact(vllm_chat(text))}\n\n".encode(), 10 + k)
        sink.on_body(f"data: {chunk}\n".encode(), 20)
        sink.on_body(f"data: {chunk}\n\n".encode(), 30)
        return record

    record = asyncio.run(reads())
    assert record.token_events == 2
    assert record.error is ErrorKind.PROTOCOL, record.error_detail
    assert "malformed stream chunk" in record.error_detail
