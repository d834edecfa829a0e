"""OpenTelemetry GenAI spans of an agent run, read as :class:`~.model.AgentConversation` s.

An agent framework instrumented with the GenAI semantic conventions
(https://opentelemetry.io/docs/specs/semconv/gen-ai/ , spans for model calls,
``execute_tool`` and ``invoke_agent``) already records what a replay needs: each
model call's token counts and times, the tool spans between them, and the
subagents as agent spans below the root's. Accepted files (docs/agentic.md,
"OpenTelemetry spans"):

- OTLP/JSON: an object with ``resourceSpans[].scopeSpans[].spans[]`` (OTLP's
  protobuf JSON: ``traceId``, ``spanId``, ``parentSpanId``,
  ``startTimeUnixNano``, ``endTimeUnixNano``, ``attributes`` as ``[{key, value:
  {stringValue|intValue|doubleValue|boolValue}}]``), or the collector's file
  exporter's JSON Lines of such objects;
- a flat JSON array of spans (or ``{"spans": [...]}``, or JSON Lines of spans), each
  with those fields in OTLP spelling or in snake case (``trace_id``, ``span_id``,
  ``parent_span_id`` / ``parent_id``, ``start_time_unix_nano`` or ``start_time``
  as ISO 8601, ``context: {trace_id, span_id}`` as the Python SDK's console
  exporter writes), ``attributes`` as that list or a plain ``{key: value}`` object.

The reading: one trace id is one conversation. A span's agent is its nearest
``invoke_agent`` ancestor. The root thread is the trace's outermost agent (or the
trace itself when calls lie outside every agent); an ``invoke_agent`` span below
an agent is a subagent launched after the parent's last call that ended before it
started, *joined* when the parent's next call starts after it ends, background
otherwise. Waits are the gaps between a call's end (or its joined subagents') and
the thread's next call; each conversation's notes say what share of its waits the
agent's ``execute_tool`` spans cover. OTel records no KV blocks: no hash ids, so
prompts share nothing beyond the conversation's own growth.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.agentic.model import (
    AgentCall,
    AgentConversation,
    AgentSpawn,
    AgentThread,
)
from pytest_llmperf.workloads.agentic.otel_spans import OtelSpan, read_spans

__all__ = ["AGENT_OPERATIONS", "MODEL_OPERATIONS", "TOOL_OPERATIONS", "read_otel"]

MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPERATIONS = frozenset({"execute_tool"})
AGENT_OPERATIONS = frozenset({"invoke_agent"})
_INPUT_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
_OUTPUT_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")


def read_otel(path: str | Path) -> list[AgentConversation]:
    """The conversations of the span file at ``path``, in the order their traces start.

    Bad input is a :class:`LlmPerfUsageError` naming the file, the span and the value.
    """
    where, spans = read_spans(path)
    traces: dict[str, list[OtelSpan]] = {}
    for span in spans:
        traces.setdefault(span.trace, []).append(span)
    firsts = {tid: min(s.start for s in group) for tid, group in traces.items()}
    origin = min(firsts.values())
    read = (
        _conversation(tid, traces[tid], firsts[tid], firsts[tid] - origin, where)
        for tid in sorted(traces, key=lambda t: (firsts[t], t))
    )
    out = [c for c in read if c is not None]
    if not out:
        raise LlmPerfUsageError(
            f"{where}: no model-call span (gen_ai.operation.name one of "
            f"{', '.join(sorted(MODEL_OPERATIONS))}) in any trace"
        )
    return out


# -- one trace -----------------------------------------------------------------------


@dataclass
class _Agent:
    span: OtelSpan | None  # None: the trace itself (calls outside every agent)
    calls: list[OtelSpan] = field(default_factory=list)
    tools: list[OtelSpan] = field(default_factory=list)
    children: list[_Agent] = field(default_factory=list)

    @property
    def start(self) -> int:
        return self.span.start if self.span else min(c.start for c in self.calls)

    @property
    def end(self) -> int:
        ends = [c.end for c in self.calls] + [a.end for a in self.children]
        return max([*ends, self.span.end] if self.span else ends)


@dataclass
class _Totals:
    wait_ns: int = 0
    covered_ns: int = 0
    dropped: int = 0
    overlaps: int = 0
    raised: int = 0


def _conversation(
    trace: str, spans: list[OtelSpan], first: int, start_ns: int, where: str
) -> AgentConversation | None:
    by_id = {s.id: s for s in spans}
    top = _Agent(None)
    agents: dict[str, _Agent] = {}

    def agent_of(span: OtelSpan) -> _Agent:
        seen: set[str] = set()
        parent = by_id.get(span.parent)
        while parent is not None and parent.id not in seen:
            seen.add(parent.id)
            if parent.op in AGENT_OPERATIONS:
                return agents.setdefault(parent.id, _Agent(parent))
            parent = by_id.get(parent.parent)
        return top

    for span in sorted(spans, key=lambda s: (s.start, s.seq)):
        op = span.op
        if op in MODEL_OPERATIONS:
            agent_of(span).calls.append(span)
        elif op in TOOL_OPERATIONS:
            agent_of(span).tools.append(span)
        elif op in AGENT_OPERATIONS:
            me = agents.setdefault(span.id, _Agent(span))
            agent_of(span).children.append(me)
    root = top
    while not root.calls and len(root.children) == 1:
        root = root.children[0]  # a wrapper with one agent inside: that agent is the root
    if not any(agent.calls for agent in (root, *agents.values())):
        return None
    if not root.calls:
        raise LlmPerfUsageError(
            f"{where}: trace {trace}: no model call outside its {len(root.children)} top-level "
            "invoke_agent spans (expected one root agent, or calls outside every agent)"
        )
    totals = _Totals()
    thread = _thread("", root, first, totals, where)
    notes = [_coverage_note(totals)]
    if totals.dropped:
        notes.append(f"{totals.dropped} subagents started before their parent's first call ended")
    if totals.overlaps:
        notes.append(f"{totals.overlaps} calls started before their thread's previous call ended")
    if totals.raised:
        notes.append(f"{totals.raised} calls recorded 0 output tokens: replayed with 1")
    return AgentConversation(
        conversation_id=trace,
        root=thread,
        start_ns=start_ns,
        source=where.removeprefix("otel trace "),
        dropped_spawns=totals.dropped,
        notes=tuple(notes),
    )


def _coverage_note(totals: _Totals) -> str:
    if not totals.wait_ns:
        return "waits: none"
    share = totals.covered_ns / totals.wait_ns
    return (
        f"waits: {totals.wait_ns / 1e9:.3f} s, {share:.1%} of it covered by execute_tool spans "
        f"(tool_coverage={share:.4f})"
    )


def _thread(agent_id: str, agent: _Agent, first: int, totals: _Totals, where: str) -> AgentThread:
    calls = agent.calls
    spawns: list[AgentSpawn] = []
    ready = [c.end for c in calls]  # when each call's successor may start (joins included)
    ids: dict[str, int] = {}
    for child in agent.children:  # in start order (the spans were visited so)
        if not child.calls:  # an agent that called no model itself has nothing to replay
            continue
        after = max((k for k, c in enumerate(calls) if c.end <= child.start), default=-1)
        if after < 0:
            totals.dropped += 1
            continue
        joined = after + 1 >= len(calls) or calls[after + 1].start >= child.end
        name = _agent_name(child, ids)
        first_call = child.calls[0]
        sub = _thread(name, child, first, totals, where)
        offset = max(0, first_call.start - calls[after].end)
        spawns.append(AgentSpawn(after=after, offset_ns=offset, thread=sub, joined=joined))
        if joined:
            ready[after] = max(ready[after], child.end)
    out: list[AgentCall] = []
    for k, span in enumerate(calls):
        wait = 0
        if k:
            gap_start, wait = ready[k - 1], span.start - ready[k - 1]
            if wait < 0:
                totals.overlaps += 1
                wait = 0
            totals.wait_ns += wait
            totals.covered_ns += _covered(agent.tools, gap_start, span.start)
        inputs = _tokens(span, _INPUT_KEYS, where, minimum=1)
        outputs = _tokens(span, _OUTPUT_KEYS, where, minimum=0)
        if outputs == 0:
            totals.raised += 1
        model = span.attrs.get("gen_ai.request.model") or span.attrs.get("gen_ai.response.model")
        out.append(
            AgentCall(
                t_ns=span.start - first,
                input_tokens=inputs,
                output_tokens=max(1, outputs),
                api_ns=span.end - span.start,
                wait_ns=wait,
                streaming=bool(span.attrs.get("gen_ai.request.stream", True)),
                model=str(model or ""),
                where=f"{where} {span.label()}",
            )
        )
    return AgentThread(agent_id=agent_id, calls=tuple(out), spawns=tuple(spawns))


def _agent_name(agent: _Agent, taken: dict[str, int]) -> str:
    """The subagent's id: ``gen_ai.agent.name`` (or ``.id``, or its span id), unique
    among its siblings (``name#2`` for the second of that name)."""
    span = agent.span
    assert span is not None  # a subagent is always an invoke_agent span
    base = str(span.attrs.get("gen_ai.agent.name") or span.attrs.get("gen_ai.agent.id") or span.id)
    taken[base] = taken.get(base, 0) + 1
    return base if taken[base] == 1 else f"{base}#{taken[base]}"


def _covered(tools: Iterable[OtelSpan], start: int, end: int) -> int:
    """How much of ``[start, end)`` the union of ``tools`` covers (ns)."""
    covered, reach = 0, start
    for tool in sorted(tools, key=lambda s: s.start):
        lo, hi = max(tool.start, reach), min(tool.end, end)
        if hi > lo:
            covered += hi - lo
            reach = hi
    return covered


def _tokens(span: OtelSpan, keys: tuple[str, ...], where: str, *, minimum: int) -> int:
    value = next((span.attrs[k] for k in keys if k in span.attrs), None)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LlmPerfUsageError(
            f"{where}: {span.label()}: {keys[0]} must be an integer >= {minimum}, got {value!r}"
        )
    return value
