"""Write the project's agentic sample traces (no copied data: generated, seeded).

    python scripts/make_agentic_sample.py          # (re)write them
    python scripts/make_agentic_sample.py --check  # exit 1 if the shipped files differ

The same few conversations (a coding agent's root thread, subagent fan-outs, one
of them in the background, tool waits) in the three agentic input formats, in
``pytest_llmperf/workloads/traces/data/``:

- ``agentic-sample.weka/``: one Weka JSON file per conversation (format ``weka``);
- ``agentic-sample.jsonl``: the same objects one a line, with ``start`` (``agentic``);
- ``agentic-sample.otel.json``: OTLP/JSON GenAI spans (``otel``): an ``invoke_agent``
  span per agent, a ``chat`` span per call, an ``execute_tool`` span in each wait.

They are :func:`synthetic_conversations` with the parameters below, so every time
is a whole millisecond and each format reads back to the same structure
(``tests/workloads/test_agentic_samples.py``; OTel carries no hash ids). A replay
at ``time_scale=1`` takes about 15 s on the simulator.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from pytest_llmperf.workloads.agentic.model import AgentConversation, AgentThread
from pytest_llmperf.workloads.agentic.synthetic import agentic_params, synthetic_conversations

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "pytest_llmperf" / "workloads" / "traces" / "data"
SEED = 11  # a seed whose background subagent outlasts its parent's next call (OTel reads it so)
PARAMS = {
    "conversations": 3,
    "turns": (5, 7),
    "subagents": {"spawns": 1, "width": 2, "turns": (2, 3), "background": 0.3},
    "tool_time": {"distribution": "uniform", "min": 0.2, "max": 0.9},
    "context_growth": (100, 400),
    "system_prompt_tokens": 1024,
    "output_tokens": (16, 48),
    "stagger": 1.0,
}
EPOCH_NS = 1_782_864_000_000_000_000  # 2026-07-01T00:00:00Z: the sample's made-up wall clock
TOOLS = ("read_file", "grep", "bash", "edit_file")
NS = 1_000_000_000


def sample_conversations() -> list[AgentConversation]:
    return synthetic_conversations(agentic_params(**PARAMS), SEED)


# -- weka / agentic ------------------------------------------------------------------


def _seconds(ns: int) -> float:
    return ns / NS


def _weka_entries(thread: AgentThread) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k, call in enumerate(thread.calls):
        out.append(
            {
                "type": "s" if call.streaming else "n",
                "t": _seconds(call.t_ns),
                "in": call.input_tokens,
                "out": call.output_tokens,
                "hash_ids": list(call.hash_ids),
                "api_time": _seconds(call.api_ns or 0),
            }
        )
        for spawn in thread.spawned_after(k):
            child = spawn.thread
            out.append(
                {
                    "type": "subagent",
                    "t": _seconds(child.calls[0].t_ns),
                    "agent_id": child.agent_id,
                    "status": "completed" if spawn.joined else "async_launched",
                    "requests": _weka_entries(child),
                }
            )
    return out


def weka_object(conv: AgentConversation) -> dict[str, Any]:
    return {
        "id": conv.conversation_id,
        "block_size": conv.block_size,
        "hash_id_scope": "global" if conv.shared_hashes else "local",
        "requests": _weka_entries(conv.root),
    }


# -- otel ----------------------------------------------------------------------------


class _Ids:
    """Deterministic OTLP ids (hex) from the conversation id and a counter."""

    def __init__(self, conversation_id: str) -> None:
        self.key = conversation_id
        self.n = 0
        self.trace = hashlib.sha256(f"trace:{conversation_id}".encode()).hexdigest()[:32]

    def span(self) -> str:
        self.n += 1
        return hashlib.sha256(f"span:{self.key}:{self.n}".encode()).hexdigest()[:16]


def _attrs(**values: Any) -> list[dict[str, Any]]:
    out = []
    for key, value in values.items():
        wrapped = {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}
        out.append({"key": key.replace("__", "."), "value": wrapped})
    return out


def _span(ids: _Ids, parent: str, name: str, start: int, end: int, **attrs: Any) -> dict[str, Any]:
    return {
        "traceId": ids.trace,
        "spanId": ids.span(),
        "parentSpanId": parent,
        "name": name,
        "kind": 1,  # INTERNAL (a CLIENT span, 3, for the chat calls would do as well)
        "startTimeUnixNano": str(EPOCH_NS + start),
        "endTimeUnixNano": str(EPOCH_NS + end),
        "attributes": _attrs(**attrs),
    }


def _end(thread: AgentThread) -> int:
    end = max(c.t_ns + (c.api_ns or 0) for c in thread.calls)
    return max([end, *(_end(s.thread) for s in thread.spawns)])


def _otel_thread(
    ids: _Ids, thread: AgentThread, parent: str, base: int, start: int, spans: list[dict[str, Any]]
) -> None:
    name = thread.agent_id or "coder"
    agent = _span(
        ids,
        parent,
        f"invoke_agent {name}",
        base + start,
        base + _end(thread),
        gen_ai__operation__name="invoke_agent",
        gen_ai__agent__name=name,
    )
    spans.append(agent)
    for k, call in enumerate(thread.calls):
        t = base + call.t_ns
        if k and call.wait_ns >= 3_000_000:  # the tool ran in the wait, less a ms each side
            tool = TOOLS[(k + len(thread.agent_id)) % len(TOOLS)]
            spans.append(
                _span(
                    ids,
                    agent["spanId"],
                    f"execute_tool {tool}",
                    t - call.wait_ns + 1_000_000,
                    t - 1_000_000,
                    gen_ai__operation__name="execute_tool",
                    gen_ai__tool__name=tool,
                )
            )
        spans.append(
            _span(
                ids,
                agent["spanId"],
                "chat",
                t,
                t + (call.api_ns or 0),
                gen_ai__operation__name="chat",
                gen_ai__usage__input_tokens=call.input_tokens,
                gen_ai__usage__output_tokens=call.output_tokens,
            )
        )
        for spawn in thread.spawned_after(k):
            launch = call.t_ns + (call.api_ns or 0) + spawn.offset_ns
            _otel_thread(ids, spawn.thread, agent["spanId"], base, launch, spans)


def otel_document(convs: list[AgentConversation]) -> dict[str, Any]:
    spans: list[dict[str, Any]] = []
    for conv in convs:
        _otel_thread(_Ids(conv.conversation_id), conv.root, "", conv.start_ns, 0, spans)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attrs(service__name="pytest-llmperf-agentic-sample")},
                "scopeSpans": [{"scope": {"name": "make_agentic_sample"}, "spans": spans}],
            }
        ]
    }


# -- the files -----------------------------------------------------------------------


def sample_files() -> dict[str, str]:
    """Each file's path (relative to the data folder) and its text."""
    convs = sample_conversations()
    files = {}
    lines = []
    for conv in convs:
        obj = weka_object(conv)
        files[f"agentic-sample.weka/{conv.conversation_id}.json"] = json.dumps(obj, indent=1) + "\n"
        lines.append(json.dumps({**obj, "start": _seconds(conv.start_ns)}, separators=(",", ":")))
    files["agentic-sample.jsonl"] = "\n".join(lines) + "\n"
    files["agentic-sample.otel.json"] = json.dumps(otel_document(convs), indent=1) + "\n"
    return files


def differences(data: Path = DATA) -> list[str]:
    """The sample files under ``data`` that are missing or differ from a fresh generation."""
    wanted = sample_files()
    bad = [name for name, text in wanted.items() if _read(data / name) != text]
    weka = data / "agentic-sample.weka"
    if weka.is_dir():
        extra = {f"agentic-sample.weka/{p.name}" for p in weka.iterdir()} - set(wanted)
        bad.extend(sorted(extra))
    return bad


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    if args.check:
        bad = differences()
        for name in bad:
            print(f"differs: {name}", file=sys.stderr)
        return 1 if bad else 0
    for name, text in sample_files().items():
        path = DATA / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
