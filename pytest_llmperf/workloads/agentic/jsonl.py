"""Format ``"agentic"``: the project's own JSON Lines of agentic conversations.

One conversation per line, each the shape of a Weka object (:mod:`.weka`: a
Weka file's object written on one line is a valid line), plus two optional
keys:

- ``"id"``: the conversation's id (default ``line<N>``, N its 1-based line);
- ``"start"``: seconds, the conversation's start in the recording. Either every
  line has one or none does; the replay starts conversation ``i`` at its
  ``start`` less the earliest (``time_scale``\\ d), and without them at the
  workload's ``stagger``.

Blank lines are skipped; a path may be a file or a folder of ``*.jsonl``
files (read in name order, as one input). Errors name the file, the line and
the JSON path inside it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.agentic.model import AgentConversation
from pytest_llmperf.workloads.agentic.weka import (
    DEFAULT_AGENT_BLOCK_SIZE,
    conversation_from_object,
    trace_files,
)

__all__ = ["read_agentic"]


def read_agentic(
    path: str | os.PathLike[str], *, default_block_size: int = DEFAULT_AGENT_BLOCK_SIZE
) -> list[AgentConversation]:
    """Every conversation of an ``agentic`` JSON Lines file (or folder of them);
    ``default_block_size`` for lines that give none."""
    read: list[tuple[AgentConversation, float | None, str]] = []
    for file in trace_files(path, "agentic", (".jsonl", ".json")):
        shown = str(file)
        try:
            with open(file, encoding="utf-8-sig") as handle:
                lines = list(handle)
        except UnicodeDecodeError as exc:
            raise LlmPerfUsageError(
                f"agentic trace {shown}: not UTF-8 text ({exc.reason})"
            ) from None
        except OSError as exc:
            raise LlmPerfUsageError(f"agentic trace {shown}: cannot read: {exc.strerror}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"agentic trace {shown} line {number}"
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise LlmPerfUsageError(f"{where}: not JSON ({exc})") from None
            conv = conversation_from_object(
                obj, where=where, default_id=f"line{number}", default_block_size=default_block_size
            )
            read.append((conv, _start(obj, where), where))
    if not read:
        raise LlmPerfUsageError(f"agentic trace {os.fspath(path)!r} holds no conversation")
    timed = [s is not None for _, s, _ in read]
    if any(timed) and not all(timed):
        missing = next(w for (_, s, w) in read if s is None)
        raise LlmPerfUsageError(
            f"{missing}: no 'start' while other lines have one (give every line a start "
            "in seconds, or none)"
        )
    if not any(timed):
        return [c for c, _, _ in read]
    first = min(s for _, s, _ in read if s is not None)
    return [replace(c, start_ns=round((s - first) * 1e9)) for c, s, _ in read if s is not None]


def _start(obj: Any, where: str) -> float | None:
    if not isinstance(obj, dict) or "start" not in obj:
        return None
    value = obj["start"]
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise LlmPerfUsageError(f"{where}: start must be a number of seconds >= 0, got {value!r}")
    return float(value)
