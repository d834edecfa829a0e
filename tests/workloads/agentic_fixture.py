"""A small Weka-format trace made here (no copied data): four conversations of a coding
agent with tool gaps, joined and background subagents, nested subagents, a compaction,
and both hash-id scopes.

Block size 16 (the simulator's), so shared blocks are cheap to check. Sizes follow what an
agent does: each call's prompt is the last prompt + the last output + a tool result
(``in(k+1) > in(k) + out(k)``) and its ``hash_ids`` start with the previous call's full
blocks; a subagent starts with the root's system-prompt blocks (1, 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BLOCK = 16


def _call(t: float, n_in: int, n_out: int, ids: list[int], api: float, **kw: Any) -> dict[str, Any]:
    return {"type": "s", "t": t, "model": "m", "in": n_in, "out": n_out, "hash_ids": ids,
            "api_time": api, "stop": "tool_use", **kw}  # fmt: skip


def conversation_a() -> dict[str, Any]:
    """Global scope; a joined subagent (absolute nested times) with a nested one of its own,
    then a compaction."""
    return {
        "id": "conv-a",
        "models": ["m"],
        "block_size": BLOCK,
        "hash_id_scope": "global",
        "tool_tokens": 0,
        "system_tokens": 32,
        "unknown_key": {"ignored": True},
        "requests": [
            _call(0.0, 40, 8, [1, 2, 3], 0.5),
            # tool wait 0.5 s; keeps blocks [1, 2] (40 // 16 = 2 full blocks)
            _call(1.0, 70, 6, [1, 2, 4, 5, 6], 0.4),
            {
                "type": "subagent",
                "t": 1.6,
                "agent_id": "agent_001",
                "subagent_type": "Explore",
                "duration_ms": 1500,
                "status": "completed",
                "requests": [
                    _call(1.7, 36, 6, [1, 2, 90], 0.3),
                    {
                        "type": "subagent",
                        "t": 2.1,
                        "agent_id": "agent_002",
                        "subagent_type": "Explore",
                        "duration_ms": 400,
                        "status": "completed",
                        "requests": [_call(2.15, 34, 4, [1, 2, 95], 0.2)],
                    },
                    _call(2.6, 60, 5, [1, 2, 90, 91], 0.3),
                ],
            },
            # joined: the wait counts from the subagent's end (1.6 + 1.5 = 3.1)
            _call(3.4, 110, 6, [1, 2, 4, 5, 7, 8, 9], 0.5),
            # compaction: a fresh context sharing only the system blocks
            _call(4.5, 50, 7, [1, 2, 60, 61], 0.3, think_time=0.2),
        ],
    }


def conversation_b() -> dict[str, Any]:
    """Local scope; raw kv-cache-tester times (nested t relative to the marker); a
    background subagent; the same hash ids as conversation c (different blocks: local)."""
    return {
        "id": "conv-b",
        "models": ["m"],
        "block_size": BLOCK,
        "hash_id_scope": "local",
        "requests": [
            _call(0.0, 33, 5, [1, 2, 3], 0.3),
            {
                "type": "subagent",
                "t": 0.5,
                "agent_id": "bg",
                "subagent_type": "Bash",
                "duration_ms": None,
                "status": "async_launched",
                "requests": [_call(0.1, 20, 3, [1, 7], 0.2), _call(0.6, 40, 3, [1, 7, 8], 0.2)],
            },
            _call(0.9, 60, 5, [1, 2, 10, 11], 0.3),
            _call(1.6, 90, 5, [1, 2, 10, 11, 12, 13], 0.3),
        ],
    }


def conversation_c() -> dict[str, Any]:
    """Local scope, no subagents: hash ids equal to conversation b's, blocks not shared."""
    return {
        "id": "conv-c",
        "models": ["m"],
        "block_size": BLOCK,
        "hash_id_scope": "local",
        "requests": [
            _call(0.0, 33, 5, [1, 2, 3], 0.2),
            _call(0.5, 60, 4, [1, 2, 10, 11], 0.2),
            _call(1.0, 80, 4, [1, 2, 10, 11, 14], 0.2),
        ],
    }


def conversation_d() -> dict[str, Any]:
    """Global scope like conversation a: its first blocks (1, 2) are a's system prompt."""
    return {
        "id": "conv-d",
        "models": ["m"],
        "block_size": BLOCK,
        "hash_id_scope": "global",
        "requests": [
            _call(0.0, 40, 6, [1, 2, 30], 0.3),
            _call(0.8, 75, 6, [1, 2, 30, 31, 32], 0.3),
        ],
    }


def conversations() -> list[dict[str, Any]]:
    return [conversation_a(), conversation_b(), conversation_c(), conversation_d()]


def write_weka(folder: Path) -> Path:
    """The four conversations as a folder of Weka files (one JSON object each)."""
    folder.mkdir(parents=True, exist_ok=True)
    for obj in conversations():
        (folder / f"{obj['id']}.json").write_text(json.dumps(obj, indent=1), "utf-8")
    return folder


def write_agentic(path: Path, *, starts: bool = True) -> Path:
    """The four conversations as the project's JSON Lines (``start`` 100, 102, ... s)."""
    lines = []
    for i, obj in enumerate(conversations()):
        line = dict(obj)
        if starts:
            line["start"] = 100.0 + 2.0 * i
        lines.append(json.dumps(line))
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path
