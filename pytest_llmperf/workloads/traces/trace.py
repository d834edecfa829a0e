"""A trace: rows to send, each at a planned offset from the run's start.

:func:`read_trace` reads a file in one of :data:`TRACE_FORMATS`, sorts its
rows by timestamp (stably: rows with equal timestamps keep their file order;
the turns of one ``session_id`` always keep their file order, a turn stamped
earlier than the turn before it being moved up to that turn's time), drops
the rows before ``start`` seconds, keeps at most ``limit`` rows and makes the
timestamps relative to the first kept row. The result is cached by the file's
absolute path, size and modification time and the arguments, so the workload
and the load generator parse a file once per process.

The load generator sends row ``i`` at :meth:`Trace.offsets_ns`\\ ``(time_scale)[i]``
after the run's start: ``time_scale`` 0.5 replays twice as fast.
"""

from __future__ import annotations

import gc
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.traces.formats import (
    NS_PER_S,
    TRACE_FORMATS,
    RawRow,
    parse_file,
)

__all__ = [
    "AGENTIC_TRACE_FORMATS",
    "ALL_TRACE_FORMATS",
    "TRACE_FORMATS",
    "Trace",
    "TraceRow",
    "check_any_format",
    "check_format",
    "check_limit",
    "check_path",
    "check_start",
    "check_time_scale",
    "offsets_ns",
    "read_trace",
]


# Formats of agentic conversations (trees of calls, not rows): read by
# :mod:`pytest_llmperf.workloads.agentic` (docs/agentic.md), never by :func:`read_trace`.
AGENTIC_TRACE_FORMATS: tuple[str, ...] = ("weka", "agentic", "otel")
ALL_TRACE_FORMATS: tuple[str, ...] = (*TRACE_FORMATS, *AGENTIC_TRACE_FORMATS)


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace.

    ``timestamp_s`` is relative to the first kept row (the first is 0.0).
    ``input_length`` is ``None`` only for a row that gives ``messages`` and no
    length. ``hash_ids`` name the row's prompt blocks (equal ids, equal text).
    ``line`` is the row's 1-based line in the file. ``category`` is the
    request class the file gives (BurstGPT's ``Model`` column), else ``""``.
    ``images`` are the image files the row names, as written (relative to the
    trace file unless absolute).
    """

    timestamp_s: float
    input_length: int | None
    output_length: int
    hash_ids: tuple[int, ...] = ()
    messages: tuple[Mapping[str, str], ...] | None = None
    session_id: str | None = None
    line: int = 0
    category: str = ""
    images: tuple[str, ...] = ()


@dataclass(frozen=True)
class Trace:
    """The kept rows of a trace file, sorted by time; ``span_s`` is the last row's time."""

    path: str
    format: str
    rows: tuple[TraceRow, ...]
    skipped_rows: int
    span_s: float

    def offsets_ns(self, time_scale: float = 1.0) -> list[int]:
        """Each row's planned send time after the run's start, in ns (the first is 0)."""
        scale = check_time_scale(time_scale)
        return [round(row.timestamp_s * scale * NS_PER_S) for row in self.rows]

    @property
    def conversations(self) -> int:
        """How many distinct ``session_id`` (the trace files' field: a conversation's id) the
        kept rows carry."""
        return len({r.session_id for r in self.rows if r.session_id is not None})

    @property
    def sessions(self) -> int:
        """:attr:`conversations` by its name before issue 38 (kept for one release)."""
        return self.conversations


def offsets_ns(trace: Trace, time_scale: float = 1.0) -> list[int]:
    """``trace.offsets_ns(time_scale)``: ``round(timestamp_s * time_scale * 1e9)`` per row."""
    return trace.offsets_ns(time_scale)


# -- parameters ----------------------------------------------------------------------


def check_format(value: Any) -> str:
    """A row format (:data:`TRACE_FORMATS`); an agentic one is refused with the reason."""
    if isinstance(value, str) and value in AGENTIC_TRACE_FORMATS:
        raise LlmPerfUsageError(
            f"format {value!r} holds agentic conversations, not rows: read it with "
            "pytest_llmperf.workloads.agentic (llm_load('trace', format=...) does)"
        )
    if not isinstance(value, str) or value not in TRACE_FORMATS:
        raise LlmPerfUsageError(f"format must be one of {', '.join(TRACE_FORMATS)}, got {value!r}")
    return value


def check_any_format(value: Any) -> str:
    """A format ``llm_load("trace")`` takes: a row format or an agentic one."""
    if not isinstance(value, str) or value not in ALL_TRACE_FORMATS:
        raise LlmPerfUsageError(
            f"format must be one of {', '.join(ALL_TRACE_FORMATS)}, got {value!r}"
        )
    return value


def check_path(value: Any) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise LlmPerfUsageError(f"path must be a trace file path, got {value!r}")
    return value


def check_start(value: Any) -> float | None:
    """``start``: seconds from the trace's first timestamp (None: from the first row)."""
    if value is None:
        return None
    if value == "mid":
        raise LlmPerfUsageError(
            "start='mid' applies to agentic trace formats "
            f"({', '.join(AGENTIC_TRACE_FORMATS)}); a row format takes seconds >= 0"
        )
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise LlmPerfUsageError(f"start must be a number of seconds >= 0, got {value!r}")
    return float(value)


def check_limit(value: Any) -> int | None:
    """``limit``: at most this many rows (None: all)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LlmPerfUsageError(f"limit must be an integer >= 1, got {value!r}")
    return value


def check_time_scale(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise LlmPerfUsageError(f"time_scale must be a number > 0, got {value!r}")
    return float(value)


# -- reading -------------------------------------------------------------------------


def read_trace(
    path: str | os.PathLike[str],
    format: str,
    *,
    start: float | None = None,
    limit: int | None = None,
) -> Trace:
    """The trace at ``path`` in ``format``; every problem is a usage error that says where.

    Cached: the same file (same absolute path, size and modification time)
    read with the same arguments is parsed once.
    """
    shown = check_path(path)
    fmt = check_format(format)
    begin = check_start(start)
    most = check_limit(limit)
    try:
        stat = os.stat(shown)
    except OSError as exc:
        raise LlmPerfUsageError(
            f"trace workload: cannot read path={shown!r}: {exc.strerror or exc}"
        ) from None
    if not Path(shown).is_file():
        raise LlmPerfUsageError(f"trace workload: path={shown!r} is not a file")
    return _read(shown, os.path.abspath(shown), stat.st_size, stat.st_mtime_ns, fmt, begin, most)


@lru_cache(maxsize=8)
def _read(
    shown: str,
    absolute: str,
    size: int,
    mtime_ns: int,
    fmt: str,
    start: float | None,
    limit: int | None,
) -> Trace:
    # Millions of rows are millions of new tuples, none in a cycle: the cyclic
    # collector would only rescan them again and again (a third of the time).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _build(shown, absolute, fmt, start, limit)
    finally:
        if enabled:
            gc.enable()


def _build(shown: str, absolute: str, fmt: str, start: float | None, limit: int | None) -> Trace:
    try:
        with open(absolute, encoding="utf-8-sig", newline="") as file:
            parsed = parse_file(shown, file, fmt)
    except UnicodeDecodeError as exc:
        raise LlmPerfUsageError(f"trace {shown}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise LlmPerfUsageError(
            f"trace workload: cannot read path={shown!r}: {exc.strerror or exc}"
        ) from None
    if not parsed.rows:
        skipped = (
            f" ({parsed.skipped} rows skipped: {parsed.skipped_why})" if parsed.skipped else ""
        )
        raise LlmPerfUsageError(f"trace {shown} ({fmt}) has no usable rows{skipped}")
    keys = _sort_keys(parsed.rows)
    order = sorted(range(len(keys)), key=keys.__getitem__)  # stable: ties keep file order
    first = keys[order[0]]
    if start is not None:
        from_ns = first + round(start * NS_PER_S)
        kept = [i for i in order if keys[i] >= from_ns]
        if not kept:
            span = (keys[order[-1]] - first) / NS_PER_S
            raise LlmPerfUsageError(
                f"trace {shown}: start={start:g} drops every row (the trace spans {span:g} s)"
            )
        order = kept
    if limit is not None:
        order = order[:limit]
    base = keys[order[0]]
    raw = parsed.rows
    rows = tuple(
        TraceRow(
            (keys[i] - base) / NS_PER_S,
            raw[i].input_length,
            raw[i].output_length,
            raw[i].hash_ids,
            raw[i].messages,
            raw[i].session_id,
            raw[i].line,
            raw[i].category,
            raw[i].images,
        )
        for i in order
    )
    return Trace(
        path=shown,
        format=fmt,
        rows=rows,
        skipped_rows=parsed.skipped,
        span_s=rows[-1].timestamp_s,
    )


def _sort_keys(rows: list[RawRow]) -> list[int]:
    """Each row's send time in ns: its timestamp, raised so a conversation's turns stay in
    order."""
    latest: dict[str, int] = {}
    keys: list[int] = []
    for row in rows:
        key = row.ts_ns
        if row.session_id is not None:
            key = max(key, latest.get(row.session_id, key))
            latest[row.session_id] = key
        keys.append(key)
    return keys
