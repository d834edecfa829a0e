"""The spans of an OpenTelemetry span file, whatever of the accepted layouts it has.

:mod:`.otel` makes conversations of them; this module only reads: OTLP/JSON
(``resourceSpans[].scopeSpans[].spans[]``, also one such object a line, as the
collector's file exporter writes), or a flat JSON array / JSON Lines of spans in
OTLP's spelling or in snake case (the Python SDK's console exporter: ``context``,
``0x`` ids, ISO 8601 times). Attributes come as OTLP's ``[{key, value: {...Value}}]``
or a plain object. Every error names the file, the span and the bad value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["OtelSpan", "read_spans"]

_START_KEYS = ("startTimeUnixNano", "start_time_unix_nano", "start_time")
_END_KEYS = ("endTimeUnixNano", "end_time_unix_nano", "end_time")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class OtelSpan:
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
        """Its ``gen_ai.operation.name`` ("" for a span of no GenAI operation)."""
        return str(self.attrs.get("gen_ai.operation.name", ""))

    def label(self) -> str:
        return f"span {self.name!r} (spanId {self.id}) of trace {self.trace}"


def read_spans(path: str | Path) -> tuple[str, list[OtelSpan]]:
    """The file's label for messages (``"otel trace <path>"``) and its spans, in file order."""
    file = Path(path)
    where = f"otel trace {file}"
    try:
        text = file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LlmPerfUsageError(f"{where}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise LlmPerfUsageError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    spans = [_span(raw, where, n) for n, raw in enumerate(_raw_spans(text, where))]
    if not spans:
        raise LlmPerfUsageError(f"{where}: no spans (expected OTLP/JSON or a list of spans)")
    return where, spans


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


def _span(raw: Mapping[str, Any], where: str, seq: int) -> OtelSpan:
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
    span = OtelSpan(
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


def _time(raw: Mapping[str, Any], keys: tuple[str, ...], span: OtelSpan, where: str) -> int:
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
