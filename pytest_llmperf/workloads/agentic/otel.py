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

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.agentic.model import (
    AgentCall,
    AgentConversation,
    AgentSpawn,
    AgentThread,
)

__all__ = ["AGENT_OPERATIONS", "MODEL_OPERATIONS", "TOOL_OPERATIONS", "read_otel"]

MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPERATIONS = frozenset({"execute_tool"})
AGENT_OPERATIONS = frozenset({"invoke_agent"})
_INPUT_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
_OUTPUT_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
_START_KEYS = ("startTimeUnixNano", "start_time_unix_nano", "start_time")
_END_KEYS = ("endTimeUnixNano", "end_time_unix_nano", "end_time")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class _Span:
    trace: str
    id: str
    parent: str
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    seq: int = 0  # its place in the file: siblings that start together keep the file's order

    @property
    def op(self) -> str:
        return str(self.attrs.get("gen_ai.operation.name", ""))

    def label(self) -> str:
        return f"span {self.name!r} (spanId {self.id}) of trace {self.trace}"


def read_otel(path: str | Path) -> list[AgentConversation]:
    """The conversations of the span file at ``path``, in the order their traces start.

    Bad input is a :class:`LlmPerfUsageError` naming the file, the span and the value.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise LlmPerfUsageError(f"otel trace {file}: cannot read it ({exc})") from None
    where = f"otel trace {file}"
    spans = [_span(raw, where, n) for n, raw in enumerate(_raw_spans(text, where))]
    if not spans:
        raise LlmPerfUsageError(f"{where}: no spans (expected OTLP/JSON or a list of spans)")
    traces: dict[str, list[_Span]] = {}
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


# -- the file ------------------------------------------------------------------------


def _raw_spans(text: str, where: str) -> Iterator[Mapping[str, Any]]:
    """Every span object of the file, whatever of the accepted layouts it has."""
    try:
        documents: list[Any] = [json.loads(text)]
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise LlmPerfUsageError(
                f"{where}: line {whole.lineno} column {whole.colno}: not JSON ({whole.msg})"
            ) from None
        documents = []
        for n, line in lines:  # JSON Lines: one OTLP request (or span) a line
            try:
                documents.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise LlmPerfUsageError(
                    f"{where}: line {n} column {exc.colno}: not JSON ({exc.msg})"
                ) from None
    for doc in documents:
        yield from _spans_of(doc, where)


def _spans_of(doc: Any, where: str) -> Iterator[Mapping[str, Any]]:
    if isinstance(doc, list):
        for item in doc:
            yield from _spans_of(item, where)
    elif isinstance(doc, Mapping) and "resourceSpans" in doc:
        for resource in _list(doc, "resourceSpans", where):
            for scope in _list(resource, "scopeSpans", where):
                yield from _list(scope, "spans", where)
    elif isinstance(doc, Mapping) and "spans" in doc:
        yield from _list(doc, "spans", where)
    elif isinstance(doc, Mapping):
        yield doc
    else:
        raise LlmPerfUsageError(f"{where}: expected a span object, got {doc!r:.80}")


def _list(obj: Any, key: str, where: str) -> list[Any]:
    value = obj.get(key, []) if isinstance(obj, Mapping) else None
    if not isinstance(value, list):
        raise LlmPerfUsageError(f"{where}: {key} must be a list, got {value!r:.80}")
    return value


def _first(raw: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if raw.get(key) not in (None, ""):
            return raw[key]
    return None


def _span(raw: Mapping[str, Any], where: str, seq: int) -> _Span:
    context: Mapping[str, Any] = raw["context"] if isinstance(raw.get("context"), Mapping) else {}
    trace = _first(raw, "traceId", "trace_id") or _first(context, "trace_id", "traceId")
    span_id = _first(raw, "spanId", "span_id") or _first(context, "span_id", "spanId")
    name = str(raw.get("name", ""))
    if not isinstance(trace, str) or not isinstance(span_id, str):
        raise LlmPerfUsageError(
            f"{where}: span {name!r} has no traceId/spanId (got traceId={trace!r}, "
            f"spanId={span_id!r})"
        )
    parent = _first(raw, "parentSpanId", "parent_span_id", "parent_id") or ""
    span = _Span(
        trace=_hex(trace),
        id=_hex(span_id),
        parent=_hex(str(parent)),
        name=name,
        start=0,
        end=0,
        attrs=_attributes(raw.get("attributes"), f"{where}: span {name!r} (spanId {span_id})"),
        seq=seq,
    )
    span.start = _time(raw, _START_KEYS, span, where)
    span.end = _time(raw, _END_KEYS, span, where)
    if span.end < span.start:
        raise LlmPerfUsageError(
            f"{where}: {span.label()} ends before it starts "
            f"(start {span.start} ns, end {span.end} ns)"
        )
    return span


def _hex(value: str) -> str:
    """OTLP/JSON ids are hex; the Python SDK's console exporter writes them ``0x``-prefixed."""
    return value[2:] if value.startswith("0x") else value


def _time(raw: Mapping[str, Any], keys: tuple[str, ...], span: _Span, where: str) -> int:
    value = _first(raw, *keys)
    if isinstance(value, str) and not value.isdigit():
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            moment = None
        if moment is not None and moment.tzinfo is not None:
            return (moment - _EPOCH) // timedelta(microseconds=1) * 1000
    elif isinstance(value, (int, str)) and not isinstance(value, bool):
        return int(value)
    raise LlmPerfUsageError(
        f"{where}: {span.label()}: {keys[0]} must be nanoseconds since the epoch (an "
        f"integer or a digit string) or an ISO 8601 time with a zone, got {value!r}"
    )


def _attributes(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, list):
        raise LlmPerfUsageError(f"{where}: attributes must be a list or an object, got {raw!r:.80}")
    out: dict[str, Any] = {}
    for item in raw:
        if not isinstance(item, Mapping) or "key" not in item:
            raise LlmPerfUsageError(f"{where}: attribute {item!r:.80} has no key")
        out[str(item["key"])] = _any_value(item.get("value"))
    return out


def _any_value(value: Any) -> Any:
    """OTLP's AnyValue: ``{"stringValue": ...}`` etc.; ``intValue`` is a string in JSON."""
    if not isinstance(value, Mapping):
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        raw = value["intValue"]
        return int(raw) if isinstance(raw, (int, str)) and str(raw).lstrip("-").isdigit() else raw
    if "arrayValue" in value:
        return [_any_value(v) for v in value["arrayValue"].get("values", [])]
    return None


# -- one trace -----------------------------------------------------------------------


@dataclass
class _Agent:
    span: _Span | None  # None: the trace itself (calls outside every agent)
    calls: list[_Span] = field(default_factory=list)
    tools: list[_Span] = field(default_factory=list)
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
    trace: str, spans: list[_Span], first: int, start_ns: int, where: str
) -> AgentConversation | None:
    by_id = {s.id: s for s in spans}
    top = _Agent(None)
    agents: dict[str, _Agent] = {}

    def agent_of(span: _Span) -> _Agent:
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


def _covered(tools: Iterable[_Span], start: int, end: int) -> int:
    """How much of ``[start, end)`` the union of ``tools`` covers (ns)."""
    covered, reach = 0, start
    for tool in sorted(tools, key=lambda s: s.start):
        lo, hi = max(tool.start, reach), min(tool.end, end)
        if hi > lo:
            covered += hi - lo
            reach = hi
    return covered


def _tokens(span: _Span, keys: tuple[str, ...], where: str, *, minimum: int) -> int:
    value = next((span.attrs[k] for k in keys if k in span.attrs), None)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LlmPerfUsageError(
            f"{where}: {span.label()}: {keys[0]} must be an integer >= {minimum}, got {value!r}"
        )
    return value
