"""``trace``: replay the requests of a trace file (Mooncake, BurstGPT, Azure, JSON Lines).

Sample ``i`` is row ``i`` of the trace (sorted by time, see
:func:`~.trace.read_trace`): ``max_tokens`` is its output length and the
prompt holds its input length as the server will count it (chat template or
BOS included where the tokenizer knows them, as in ``synthetic``). A row's
``hash_ids`` pick its prompt's blocks (:mod:`.prompts`: equal ids, equal
text, so a prefix cache hits as it did in production); a row with
``messages`` is sent as those messages. Indices past the last row wrap
around (row ``i % size``, the same prompt again).

When to send a row is the load generator's business: it reads
``workload.trace.offsets_ns(time_scale)``. The category of a sample is the
trace's own request class where it has one (BurstGPT's ``Model``), else
``""``. Rows that share a ``session_id`` (the trace files' own field name) are
the turns of one conversation: the load generator sends a turn no earlier than
its previous turn's end plus ``think_time`` (docs/conversations.md), with
``conversation_header`` naming the conversation where asked (``session_header=``,
its name before issue 38, is still taken for one release).

A row may name image files (``"images": ["cat.png", ...]``, relative to the
trace file): they go with its last user turn, as read (PNG or JPEG, base64).
Each is checked when the workload is built (a missing or non-image file is a
usage error naming the trace, the row's line and the path) and read when its
row is sent (kept in a byte-bounded LRU, :func:`~..images.image_file`). The
row's input length counts its text only: what an image costs in tokens is the
server's (the report shows image count and bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.base import Sample, register_workload
from pytest_llmperf.workloads.budget import content_tokens, describe_overhead
from pytest_llmperf.workloads.conversations import conversation_header as parse_header
from pytest_llmperf.workloads.conversations import think_time as parse_think_time
from pytest_llmperf.workloads.corpus import default_corpus
from pytest_llmperf.workloads.images import check_image_file, image_file
from pytest_llmperf.workloads.params import output_controls, positive_int
from pytest_llmperf.workloads.tokenizer import (
    Tokenizer,
    describe_tokenizer,
    framing_tokens,
    resolve_tokenizer,
)
from pytest_llmperf.workloads.traces.prompts import BlockPrompts
from pytest_llmperf.workloads.traces.trace import (
    AGENTIC_TRACE_FORMATS,
    Trace,
    TraceRow,
    read_trace,
)

if TYPE_CHECKING:
    from pytest_llmperf.workloads.agentic.workload import AgenticTraceWorkload

__all__ = ["MOONCAKE_BLOCK_SIZE", "TraceWorkload"]

MOONCAKE_BLOCK_SIZE = 512  # tokens per hash id in Mooncake's published traces


@dataclass(frozen=True)
class TraceWorkload:
    """The rows of a trace as samples; ``size`` is the number of rows."""

    seed: int
    trace: Trace
    block_size: int
    tokenizer: Tokenizer
    prompts: BlockPrompts
    input_tokens_of: tuple[int, ...]  # per row: what the server counts
    controls: Mapping[str, Any] = field(default_factory=dict)
    overhead: int = 0  # tokens the server adds around a one-message prompt
    start: float | None = None
    limit: int | None = None
    name: str = "trace"
    think_time: Any = None  # read by workloads.conversations for session_id rows
    conversation_header: str | None = None
    image_paths: tuple[tuple[str, ...], ...] = ()  # per row, absolute; () when no row has any

    @property
    def size(self) -> int:
        return len(self.trace.rows)

    @property
    def session_header(self) -> str | None:
        """:attr:`conversation_header` by its name before issue 38 (kept for one release)."""
        return self.conversation_header

    @cached_property
    def timestamps_s(self) -> tuple[float, ...]:
        """Each row's time after the first row's, in seconds (before any ``time_scale``)."""
        return tuple(row.timestamp_s for row in self.trace.rows)

    def sample(self, index: int) -> Sample:
        position = index % self.size
        row = self.trace.rows[position]
        images = tuple(map(image_file, self.image_paths[position])) if self.image_paths else ()
        if row.messages is not None:
            *history, last = row.messages
            return Sample(
                index=index,
                prompt=last["content"],
                input_tokens=self.input_tokens_of[position],
                max_tokens=row.output_length,
                history=tuple(history),
                category=row.category,
                extra_body=self.controls,
                images=images,
            )
        assert row.input_length is not None
        n_text = content_tokens(row.input_length, self.overhead)
        prompt, _ = self.prompts.prompt(row.hash_ids, n_text, f"row:{position}")
        return Sample(
            index=index,
            prompt=prompt,
            input_tokens=row.input_length,
            max_tokens=row.output_length,
            category=row.category,
            extra_body=self.controls,
            images=images,
        )

    def describe(self) -> dict[str, Any]:
        rows = self.trace.rows
        blocks = {h for row in rows for h in row.hash_ids}
        out: dict[str, Any] = {
            "name": self.name,
            "seed": self.seed,
            "path": self.trace.path,
            "format": self.trace.format,
            "rows": len(rows),
            "skipped_rows": self.trace.skipped_rows,
            "span_s": round(self.trace.span_s, 6),
            "sessions": self.trace.conversations,  # the JSON report's key (unchanged)
            "block_size": self.block_size,
            "distinct_hash_ids": len(blocks),
            "timing": "row i at timestamp_s[i] * time_scale after the start",
            "content": "prose runs from the bundled corpus; equal hash_ids, equal blocks",
            "output_control": "max_tokens" + ("" if self.controls else " + ignore_eos"),
            **describe_tokenizer(self.tokenizer),
        }
        if self.start is not None:
            out["start_s"] = self.start
        if self.limit is not None:
            out["limit"] = self.limit
        if self.image_paths:
            out["images"] = sum(map(len, self.image_paths))
            out["distinct_images"] = len({p for paths in self.image_paths for p in paths})
            out["image_tokens"] = "not in input_tokens (the server counts them)"
        lengths = [r.input_length for r in rows if r.messages is None and r.input_length]
        if lengths:
            out.update(describe_overhead(self.overhead, min(lengths)))
        return out


def _message_rows_input(rows: tuple[TraceRow, ...], tokenizer: Tokenizer) -> tuple[int, ...]:
    """Each row's input as the server counts it: given, or counted (messages + template)."""
    seen: dict[str, int] = {}
    shapes: dict[tuple[str, ...], int] = {}

    def count(text: str) -> int:
        if text not in seen:
            seen[text] = tokenizer.count(text)
        return seen[text]

    out: list[int] = []
    for row in rows:
        if row.input_length is not None:
            out.append(row.input_length)
            continue
        assert row.messages is not None
        roles = tuple(m["role"] for m in row.messages)
        if roles not in shapes:
            shapes[roles] = framing_tokens(tokenizer, roles)
        out.append(sum(count(m["content"]) for m in row.messages) + shapes[roles])
    return tuple(out)


def _image_paths(trace: Trace) -> tuple[tuple[str, ...], ...]:
    """Each row's image files as absolute paths, every one checked (``()``: no images)."""
    if not any(row.images for row in trace.rows):
        return ()
    for row in trace.rows:
        if row.images and row.session_id is not None:
            # A conversation's later turns quote its earlier ones as text
            # (docs/conversations.md); an image would have to ride along in every later
            # turn: not done (yet).
            raise LlmPerfUsageError(
                f"trace {trace.path} line {row.line}: images in a multi-turn conversation "
                f"(session_id {row.session_id!r}) are not supported; drop session_id or "
                "the row's images"
            )
    folder = Path(trace.path).resolve().parent
    checked: set[str] = set()
    out: list[tuple[str, ...]] = []
    for row in trace.rows:
        paths = tuple(str(folder / name) for name in row.images)
        for name, path in zip(row.images, paths, strict=True):
            if path not in checked:
                where = f"trace {trace.path} line {row.line}, image {name!r}"
                check_image_file(path, where=where)
                checked.add(path)
        out.append(paths)
    return tuple(out)


@register_workload("trace", renamed={"session_header": "conversation_header"})
def trace(
    *,
    seed: int = 0,
    path: Any = None,
    format: Any = "mooncake",
    start: Any = None,
    limit: Any = None,
    block_size: Any = None,
    tokenizer: Any = None,
    ignore_eos: Any = True,
    think_time: Any = None,
    conversation_header: Any = None,
    conversations: Any = None,
    stagger: Any = None,
    replies: Any = None,
) -> TraceWorkload | AgenticTraceWorkload:
    """``path`` = a trace file in ``format`` (mooncake, burstgpt, azure, jsonl), or agentic
    conversations (weka, agentic, otel: :mod:`~pytest_llmperf.workloads.agentic.workload`,
    which takes ``conversations``, ``stagger``, ``replies`` and ``start="mid"``)."""
    if path is None:
        raise LlmPerfUsageError("trace workload needs path=<trace file>")
    if not isinstance(path, (str, Path)):
        raise LlmPerfUsageError(f"path must be a trace file path, got {path!r}")
    controls = output_controls(ignore_eos)
    if isinstance(format, str) and format in AGENTIC_TRACE_FORMATS:
        from pytest_llmperf.workloads.agentic.workload import agentic_trace

        return agentic_trace(
            seed=seed,
            path=path,
            format=format,
            start=start,
            limit=limit,
            conversations=conversations,
            stagger=stagger,
            replies="server" if replies is None else replies,
            block_size=block_size,
            tokenizer=tokenizer,
            controls=controls,
            think_time=think_time,
            conversation_header=conversation_header,
        )
    agentic_only = {"conversations": conversations, "stagger": stagger, "replies": replies}
    given = [k for k, v in agentic_only.items() if v is not None]
    if given:
        raise LlmPerfUsageError(
            f"trace workload: {', '.join(f'{k}=' for k in given)} apply to agentic formats "
            f"({', '.join(AGENTIC_TRACE_FORMATS)}), not format={format!r}"
        )
    size = positive_int("block_size", MOONCAKE_BLOCK_SIZE if block_size is None else block_size)
    think = None if think_time is None else parse_think_time(think_time)  # checked here
    header = parse_header(conversation_header)
    loaded = read_trace(path, format, start=start, limit=limit)
    tok = resolve_tokenizer(tokenizer)
    return TraceWorkload(
        seed=seed,
        trace=loaded,
        block_size=size,
        tokenizer=tok,
        prompts=BlockPrompts(tok, default_corpus(), seed, size),
        input_tokens_of=_message_rows_input(loaded.rows, tok),
        controls=controls,
        overhead=framing_tokens(tok, ("user",)),
        start=start,
        limit=limit,
        think_time=think_time if think is not None else None,
        conversation_header=header,
        image_paths=_image_paths(loaded),
    )
