"""``llm_load("trace", format="weka"|"agentic"|"otel")``: recorded agentic conversations.

The ``trace`` workload hands these formats here (:func:`agentic_trace`): the
file (or folder) is read into :class:`~.model.AgentConversation`\\ s by the
format's reader, and :class:`AgenticTraceWorkload` offers them to the load
generator as its ``agent_source`` (:class:`~.scripts.RecordedAgents`), which
issues each conversation's tree of calls in time. ``sample(i)`` is
conversation ``i``'s first tracked call alone (what a preflight sends).

Parameters beyond the row formats' (docs/agentic.md): ``conversations=N``
(the first N, repeated past the file's count), ``start="mid"`` (numeric
``start`` is the row formats'), ``stagger=`` seconds between conversation
starts where the input records none (default :data:`DEFAULT_STAGGER_S`),
``replies="server"|"trace"``. ``block_size`` is each file's own; the
parameter serves files that give none (default 64, kv-cache-tester's).
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.agentic.model import AgentConversation
from pytest_llmperf.workloads.agentic.prompts import AgentPrompts
from pytest_llmperf.workloads.agentic.scripts import (
    REPLY_MODES,
    AgentSettings,
    PromptTally,
    RecordedAgents,
    ReplyMode,
)
from pytest_llmperf.workloads.agentic.weka import DEFAULT_AGENT_BLOCK_SIZE
from pytest_llmperf.workloads.base import Sample
from pytest_llmperf.workloads.conversations import conversation_header as parse_header
from pytest_llmperf.workloads.corpus import default_corpus
from pytest_llmperf.workloads.tokenizer import Tokenizer, describe_tokenizer, resolve_tokenizer
from pytest_llmperf.workloads.traces.trace import AGENTIC_TRACE_FORMATS

__all__ = [
    "AGENTIC_FORMATS",
    "DEFAULT_STAGGER_S",
    "MID",
    "AgenticTraceWorkload",
    "agentic_trace",
    "read_conversations",
]

AGENTIC_FORMATS = AGENTIC_TRACE_FORMATS
DEFAULT_STAGGER_S = 1.0
MID = "mid"


@dataclass(frozen=True)
class AgenticTraceWorkload:
    """Recorded agentic conversations; ``size`` is how many are replayed."""

    seed: int
    path: str
    format: str
    tokenizer: Tokenizer
    agent_source: RecordedAgents
    name: str = "trace"

    @property
    def size(self) -> int:
        return self.agent_source.count

    def sample(self, index: int) -> Sample:
        script = self.agent_source.conversation(index % self.size)
        return script.turn(script.first_turn, [])

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "path": self.path,
            "format": self.format,
            **self.agent_source.describe(),
            "content": "prose runs from the bundled corpus; equal hash_ids, equal blocks",
            "output_control": "max_tokens"
            + ("" if self.agent_source.shared.controls else " + ignore_eos"),
            **describe_tokenizer(self.tokenizer),
        }


def agentic_trace(
    *,
    seed: int,
    path: Any,
    format: str,
    start: Any = None,
    limit: Any = None,
    conversations: Any = None,
    stagger: Any = None,
    replies: Any = ReplyMode.SERVER.value,
    block_size: Any = None,
    tokenizer: Any = None,
    controls: Mapping[str, Any],
    think_time: Any = None,
    conversation_header: Any = None,
) -> AgenticTraceWorkload:
    """The ``trace`` workload for an agentic ``format`` (checked by the caller)."""
    where = f"trace workload (format={format!r})"
    if start is not None and start != MID:
        raise LlmPerfUsageError(
            f"{where}: start= takes {MID!r} (begin each conversation part-way, after a cache "
            f"warm-up) for agentic formats, got {start!r}; seconds apply to row formats"
        )
    if limit is not None:
        raise LlmPerfUsageError(f"{where}: limit= counts rows; use conversations=N")
    if think_time is not None:
        raise LlmPerfUsageError(
            f"{where}: think_time= does not apply: an agentic trace's waits are recorded"
        )
    count = _conversations(where, conversations)
    stagger_s = _stagger(where, stagger)
    if replies not in REPLY_MODES:
        raise LlmPerfUsageError(
            f"{where}: replies must be one of {', '.join(map(repr, REPLY_MODES))}, got {replies!r}"
        )
    default_size = DEFAULT_AGENT_BLOCK_SIZE
    if block_size is not None:
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise LlmPerfUsageError(f"block_size must be an integer >= 1, got {block_size!r}")
        default_size = block_size
    header = parse_header(conversation_header)
    shown = os.fspath(path)
    recorded = read_conversations(shown, format, default_size)
    tok = resolve_tokenizer(tokenizer)
    corpus = default_corpus()
    prompts = {
        size: AgentPrompts(tok, corpus, seed, size) for size in {c.block_size for c in recorded}
    }
    shared = AgentSettings(prompts, ReplyMode(replies), dict(controls), header, PromptTally())
    source = RecordedAgents(
        recorded=recorded,
        count=count if count is not None else len(recorded),
        shared=shared,
        stagger_ns=round(stagger_s * 1e9),
        mid=start == MID,
        seed=seed,
    )
    return AgenticTraceWorkload(seed, shown, format, tok, source)


def read_conversations(
    path: str, fmt: str, default_block_size: int = DEFAULT_AGENT_BLOCK_SIZE
) -> tuple[AgentConversation, ...]:
    """The conversations of ``path`` in agentic format ``fmt`` (parsed once per process
    while the files are unchanged); files that give no block size get ``default_block_size``."""
    if fmt not in AGENTIC_FORMATS:
        raise LlmPerfUsageError(f"format must be one of {', '.join(AGENTIC_FORMATS)}, got {fmt!r}")
    p = Path(path)
    if not p.exists():
        raise LlmPerfUsageError(f"{fmt} trace: path={path!r} does not exist")
    files = sorted(p.iterdir()) if p.is_dir() else [p]
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file())
    return _read(os.path.abspath(path), path, fmt, default_block_size, stamp)


@lru_cache(maxsize=8)
def _read(
    absolute: str, shown: str, fmt: str, default_block_size: int, stamp: tuple[Any, ...]
) -> tuple[AgentConversation, ...]:
    if fmt == "weka":
        from pytest_llmperf.workloads.agentic.weka import read_weka

        read = read_weka(shown, default_block_size=default_block_size)
    elif fmt == "agentic":
        from pytest_llmperf.workloads.agentic.jsonl import read_agentic

        read = read_agentic(shown, default_block_size=default_block_size)
    else:
        read = _otel_reader()(shown)
    if not read:
        raise LlmPerfUsageError(f"{fmt} trace {shown}: no conversation in it")
    return tuple(read)


def _otel_reader() -> Callable[[str], list[AgentConversation]]:
    """wl-inputs' reader of OpenTelemetry GenAI spans, where this build has it."""
    try:  # by name: the reader is wl-inputs' module (issue 39), absent from older builds
        module = importlib.import_module("pytest_llmperf.workloads.agentic.otel")
    except ImportError:
        raise LlmPerfUsageError(
            "format='otel' (OpenTelemetry GenAI spans) is not available in this build"
        ) from None
    reader: Callable[[str], list[AgentConversation]] = module.read_otel
    return reader


def _conversations(where: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LlmPerfUsageError(f"{where}: conversations must be an integer >= 1, got {value!r}")
    return value


def _stagger(where: str, value: Any) -> float:
    if value is None:
        return DEFAULT_STAGGER_S
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise LlmPerfUsageError(f"{where}: stagger must be seconds >= 0, got {value!r}")
    return float(value)
