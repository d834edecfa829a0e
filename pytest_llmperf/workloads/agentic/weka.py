"""The Weka KV-cache-tester trace format: one JSON object per conversation.

A Weka file (kv-cache-tester's captures of coding agents; the SemiAnalysis
traces use the same shape) is one conversation::

    {"id": "...", "models": [...], "block_size": 64, "hash_id_scope": "local",
     "tool_tokens": 0, "system_tokens": 0,
     "requests": [
        {"type": "s", "t": 0.0, "model": "...", "in": 4210, "out": 180,
         "hash_ids": [1, 2, ...], "api_time": 3.1, "think_time": 0.4, "ttft": 0.8,
         "stop": "tool_use"},
        {"type": "subagent", "t": 12.5, "agent_id": "agent_001",
         "subagent_type": "Explore", "duration_ms": 41000, "status": "completed",
         "requests": [...]},
        ...]}

``type`` ``"n"``/``"s"`` are calls (normal, streaming), ``"subagent"`` a
marker whose nested ``requests`` are a subagent's own calls (and markers:
nesting is allowed). How the reader turns that into an
:class:`~.model.AgentConversation` (docs/agentic.md, "Trace formats"):

- ``t`` is seconds from the conversation's start. Nested ``t`` values are
  relative to their marker in raw kv-cache-tester captures and absolute in
  SemiAnalysis' traces: a file is read as *absolute* when every nested call
  and marker is stamped at or after its marker's ``t``, else every nested ``t``
  of that file is read as relative to its marker (one convention per file).
- The wait before call ``k + 1`` of a thread is its ``think_time`` where
  recorded, else ``t(k+1) - (t(k) + api_time(k))`` (``api_time`` missing: 0);
  after subagents that the thread joined, it is counted from the latest
  joined subagent's end (its last call's end, or ``t + duration_ms`` when that
  is later). Negative waits (overlapping records) are 0.
- A subagent is launched after the last call of its parent before the marker,
  ``offset_ns`` after that call's end: at its first call's ``t`` (else the
  marker's). A marker with no parent call before it cannot be placed: it is
  dropped, with everything under it, and counted (``dropped_spawns``).
  ``status: "async_launched"`` is a background subagent (not joined).
- ``hash_id_scope``: ``"global"`` shares hash ids across conversations,
  ``"local"`` (the default) makes them each conversation's own.

Bad input is a usage error naming the file, the JSON path (``requests[4].in``)
and the value; unknown keys are ignored (captures add fields over time).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.agentic.model import (
    AgentCall,
    AgentConversation,
    AgentSpawn,
    AgentThread,
)

__all__ = [
    "CALL_TYPES",
    "DEFAULT_AGENT_BLOCK_SIZE",
    "HASH_SCOPES",
    "SUBAGENT_TYPE",
    "conversation_from_object",
    "read_weka",
    "trace_files",
]

CALL_TYPES = ("n", "s")  # normal, streaming
SUBAGENT_TYPE = "subagent"
HASH_SCOPES = ("local", "global")
BACKGROUND_STATUS = "async_launched"
DEFAULT_AGENT_BLOCK_SIZE = 64  # kv-cache-tester's block size, for files that do not say
NS = 1_000_000_000


def read_weka(
    path: str | os.PathLike[str], *, default_block_size: int = DEFAULT_AGENT_BLOCK_SIZE
) -> list[AgentConversation]:
    """Every conversation of a Weka file, or of a folder's ``*.json`` files (sorted by name);
    ``default_block_size`` for files that give none."""
    out: list[AgentConversation] = []
    for file in trace_files(path, "weka", (".json",)):
        shown = str(file)
        try:
            text = file.read_text("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise LlmPerfUsageError(f"weka trace {shown}: not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise LlmPerfUsageError(f"weka trace {shown}: cannot read: {exc.strerror}") from None
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise LlmPerfUsageError(f"weka trace {shown}: not JSON ({exc})") from None
        out.append(
            conversation_from_object(
                obj,
                where=f"weka trace {shown}",
                default_id=file.stem,
                default_block_size=default_block_size,
            )
        )
    return out


def trace_files(path: str | os.PathLike[str], fmt: str, suffixes: Sequence[str]) -> list[Path]:
    """``path`` itself, or the files of the folder ``path`` ending in ``suffixes``, by name."""
    p = Path(os.fspath(path))
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in suffixes)
        if not files:
            raise LlmPerfUsageError(
                f"{fmt} trace folder {str(p)!r} holds no {'/'.join(suffixes)} file"
            )
        return files
    if not p.is_file():
        raise LlmPerfUsageError(f"{fmt} trace: path={str(p)!r} is neither a file nor a folder")
    return [p]


# -- one conversation ----------------------------------------------------------------


def conversation_from_object(
    obj: Any,
    *,
    where: str,
    default_id: str,
    default_block_size: int = DEFAULT_AGENT_BLOCK_SIZE,
    prefix: str = "",
) -> AgentConversation:
    """The conversation of one Weka object; errors name ``where`` and the JSON path.

    ``prefix`` is put before every JSON path (``""`` for a file's top level).
    """
    if not isinstance(obj, Mapping):
        raise LlmPerfUsageError(
            f"{where}: {prefix or 'the trace'} must be a JSON object, got {_short(obj)}"
        )
    check = _Checker(where, prefix)
    cid = obj.get("id", default_id)
    if not isinstance(cid, (str, int)) or isinstance(cid, bool) or str(cid) == "":
        raise LlmPerfUsageError(
            f"{where}: {check.path('id')} must be a non-empty string, got {cid!r}"
        )
    block_size = check.integer(obj, "block_size", default_block_size, minimum=1)
    scope = obj.get("hash_id_scope", "local")
    if scope not in HASH_SCOPES:
        raise LlmPerfUsageError(
            f"{where}: {check.path('hash_id_scope')} must be one of "
            f"{', '.join(map(repr, HASH_SCOPES))}, got {scope!r}"
        )
    requests = obj.get("requests")
    if not isinstance(requests, list):
        raise LlmPerfUsageError(
            f"{where}: {check.path('requests')} must be a list of calls and subagent markers, "
            f"got {_short(requests)}"
        )
    entries = _entries(check, requests, check.path("requests"), marker_t=None)
    absolute = _absolute(entries)
    builder = _Builder(where, absolute)
    root = builder.thread("", entries, base_ns=0)
    if not root.calls:
        raise LlmPerfUsageError(
            f"{where}: {check.path('requests')} holds no call (type 'n' or 's') at its top level"
        )
    notes = []
    if builder.clamped:
        notes.append(f"{builder.clamped} negative waits (overlapping records) taken as 0")
    if not absolute and builder.nested:
        notes.append("nested t values read as relative to their subagent marker")
    return AgentConversation(
        conversation_id=str(cid),
        root=root,
        block_size=block_size,
        shared_hashes=scope == "global",
        source=where,
        dropped_spawns=builder.dropped,
        notes=tuple(notes),
    )


@dataclass
class _Call:
    path: str
    t: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...]
    api_time: float | None
    think_time: float | None
    streaming: bool
    model: str


@dataclass
class _Marker:
    path: str
    t: float
    agent_id: str
    joined: bool
    duration_s: float | None
    entries: list[_Call | _Marker] = field(default_factory=list)


class _Checker:
    """Reads typed fields; every error names the file, the JSON path and the value."""

    def __init__(self, where: str, prefix: str) -> None:
        self.where = where
        self.prefix = prefix

    def path(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def fail(self, path: str, want: str, value: Any) -> LlmPerfUsageError:
        return LlmPerfUsageError(f"{self.where}: {path} must be {want}, got {_short(value)}")

    def integer(
        self,
        obj: Mapping[str, Any],
        key: str,
        default: int | None,
        *,
        minimum: int,
        at: str | None = None,
    ) -> int:
        path = f"{at}.{key}" if at else self.path(key)
        value = obj.get(key, default)
        if value is None or isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"an integer >= {minimum}", value)
        if value < minimum:
            raise self.fail(path, f"an integer >= {minimum}", value)
        return value

    def seconds(self, obj: Mapping[str, Any], key: str, at: str, *, required: bool) -> float | None:
        value = obj.get(key)
        if value is None and not required:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise self.fail(f"{at}.{key}", "a number of seconds >= 0", value)
        return float(value)


def _entries(
    check: _Checker, requests: list[Any], at: str, marker_t: float | None
) -> list[_Call | _Marker]:
    out: list[_Call | _Marker] = []
    for i, entry in enumerate(requests):
        here = f"{at}[{i}]"
        if not isinstance(entry, Mapping):
            raise check.fail(here, "a JSON object (a call or a subagent marker)", entry)
        kind = entry.get("type")
        t = check.seconds(entry, "t", here, required=True)
        assert t is not None
        if kind in CALL_TYPES:
            out.append(_call(check, entry, here, t, streaming=kind == "s"))
        elif kind == SUBAGENT_TYPE:
            agent_id = entry.get("agent_id", f"agent_{i}")
            if not isinstance(agent_id, str) or not agent_id or "/" in agent_id:
                raise check.fail(f"{here}.agent_id", "a non-empty string without '/'", agent_id)
            inner = entry.get("requests")
            if not isinstance(inner, list):
                raise check.fail(f"{here}.requests", "a list of the subagent's calls", inner)
            duration = entry.get("duration_ms")
            if duration is not None and (
                isinstance(duration, bool)
                or not isinstance(duration, (int, float))
                or not math.isfinite(duration)
                or duration < 0
            ):
                raise check.fail(f"{here}.duration_ms", "milliseconds >= 0 or null", duration)
            status = entry.get("status", "completed")
            if not isinstance(status, str):
                raise check.fail(f"{here}.status", "a string", status)
            marker = _Marker(
                here,
                t,
                agent_id,
                joined=status != BACKGROUND_STATUS,
                duration_s=None if duration is None else duration / 1000.0,
            )
            marker.entries = _entries(check, inner, f"{here}.requests", t)
            out.append(marker)
        else:
            raise check.fail(f"{here}.type", "'n', 's' or 'subagent'", kind)
    return out


def _call(
    check: _Checker, entry: Mapping[str, Any], here: str, t: float, *, streaming: bool
) -> _Call:
    n_in = check.integer(entry, "in", None, minimum=1, at=here)
    n_out = check.integer(entry, "out", None, minimum=1, at=here)
    ids = entry.get("hash_ids", [])
    if not isinstance(ids, list):
        raise check.fail(f"{here}.hash_ids", "a list of integers >= 0", ids)
    for j, h in enumerate(ids):
        if isinstance(h, bool) or not isinstance(h, int) or h < 0:
            raise check.fail(f"{here}.hash_ids[{j}]", "an integer >= 0", h)
    model = entry.get("model", "")
    if not isinstance(model, str):
        raise check.fail(f"{here}.model", "a string", model)
    return _Call(
        here,
        t,
        n_in,
        n_out,
        tuple(ids),
        check.seconds(entry, "api_time", here, required=False),
        check.seconds(entry, "think_time", here, required=False),
        streaming,
        model,
    )


def _absolute(entries: list[_Call | _Marker]) -> bool:
    """Whether nested ``t`` values are absolute: every one at or after its marker's ``t``."""

    def ok(marker: _Marker) -> bool:
        return all(
            e.t >= marker.t and (not isinstance(e, _Marker) or ok(e)) for e in marker.entries
        )

    return all(ok(e) for e in entries if isinstance(e, _Marker))


class _Builder:
    """Turns checked entries into threads: absolute ns times, waits, spawn offsets."""

    def __init__(self, where: str, absolute: bool) -> None:
        self.where = where
        self.absolute = absolute
        self.dropped = 0
        self.clamped = 0
        self.nested = False

    def _ns(self, t: float, base_ns: int) -> int:
        return round(t * NS) + (0 if self.absolute else base_ns)

    def thread(self, agent_id: str, entries: list[_Call | _Marker], base_ns: int) -> AgentThread:
        calls: list[AgentCall] = []
        ends: list[int] = []  # each call's end (t + api_time)
        spawns: list[AgentSpawn] = []
        joined_end: dict[int, int] = {}  # call index -> latest end of subagents joined after it
        taken: set[str] = set()
        for entry in entries:
            if isinstance(entry, _Call):
                t_ns = self._ns(entry.t, base_ns)
                api_ns = None if entry.api_time is None else round(entry.api_time * NS)
                wait = 0
                if calls:
                    k = len(calls) - 1
                    after = max(ends[k], joined_end.get(k, ends[k]))
                    if entry.think_time is not None and k not in joined_end:
                        wait = round(entry.think_time * NS)
                    else:
                        wait = t_ns - after
                    if wait < 0:
                        self.clamped += 1
                        wait = 0
                calls.append(
                    AgentCall(
                        t_ns=t_ns,
                        input_tokens=entry.input_tokens,
                        output_tokens=entry.output_tokens,
                        hash_ids=entry.hash_ids,
                        api_ns=api_ns,
                        wait_ns=wait,
                        streaming=entry.streaming,
                        model=entry.model,
                        where=f"{self.where} {entry.path}",
                    )
                )
                ends.append(t_ns + (api_ns or 0))
                continue
            self.nested = True
            marker_ns = self._ns(entry.t, base_ns)
            if not calls:  # no parent call to launch it after: cannot be placed
                self.dropped += 1 + _markers_below(entry)
                continue
            k = len(calls) - 1
            name = entry.agent_id
            n = 2
            while name in taken:
                name, n = f"{entry.agent_id}#{n}", n + 1
            taken.add(name)
            child = self.thread(name, entry.entries, marker_ns)
            if not child.calls:
                self.dropped += 1
                continue
            launch = child.calls[0].t_ns
            spawns.append(
                AgentSpawn(
                    after=k, offset_ns=max(0, launch - ends[k]), thread=child, joined=entry.joined
                )
            )
            if entry.joined:
                end = _thread_end(child)
                if entry.duration_s is not None:
                    end = max(end, marker_ns + round(entry.duration_s * NS))
                joined_end[k] = max(joined_end.get(k, end), end)
        return AgentThread(agent_id, tuple(calls), tuple(spawns))


def _markers_below(marker: _Marker) -> int:
    return sum(1 + _markers_below(e) for e in marker.entries if isinstance(e, _Marker))


def _thread_end(thread: AgentThread) -> int:
    """The latest recorded end of a thread's calls and of its joined subagents."""
    end = max(c.t_ns + (c.api_ns or 0) for c in thread.calls)
    for spawn in thread.spawns:
        if spawn.joined:
            end = max(end, _thread_end(spawn.thread))
    return end


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
