"""``--llm-otel-spans``: one span per sampled request, under one span per run, under one
span for the session, built after the session from the runs' event logs.

Times: the event log holds ``time.monotonic_ns()`` instants, spans want wall-clock
nanoseconds; each run is anchored by its ``started_at`` (the wall clock at the run's
start) on its first planned send, so the spans of a run are exact relative to each
other and placed on the wall clock to within the run's setup (milliseconds).

A request span starts at the request's planned send (``t_sched``; the actual send is an
event where it differs), ends at its last byte (or when its failure was seen), carries
the first token as an event, and its failure kind (``error.type``) and the server's
message (the span status) when it failed. The run span carries the test's verdicts for
that run as ``llmperf.slo`` events. Sampling is deterministic by request order: with
ratio ``r`` the ``i``-th request is kept when ``floor((i + 1) r) > floor(i r)``, so the
kept share is exact and spread evenly over the run.

Needs the ``otel`` extra (``opentelemetry-sdk``): import this module lazily.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.export.otel_names import Attr
from pytest_llmperf.export.otel_values import RunView, first_planned_ns, request_values
from pytest_llmperf.redaction import scrub

__all__ = ["SpanCounts", "kept", "record_spans"]

SCOPE = "pytest-llmperf"  # the instrumentation scope: the distribution's name


def kept(index: int, ratio: float) -> bool:
    """Whether the ``index``-th request (0-based) is among the sampled share ``ratio``."""
    return math.floor((index + 1) * ratio) > math.floor(index * ratio)


class SpanCounts:
    """How many spans were made: runs, requests, and runs with no event log left."""

    def __init__(self) -> None:
        self.runs = 0
        self.requests = 0
        self.without_log = 0


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _wall_ns(iso: str) -> int | None:
    """An ISO instant in integer nanoseconds since the epoch (no float rounding)."""
    try:
        when = datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def record_spans(
    provider: TracerProvider,
    runs: Sequence[RunView],
    slos: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    ratio: float,
    secrets: Sequence[str] = (),
) -> SpanCounts:
    """The session's spans, ended (the provider's processors then hold them).
    ``slos``: each test's verdicts by nodeid (the report's ``tests[].slos``)."""
    tracer = provider.get_tracer(SCOPE)
    counts = SpanCounts()
    starts = [w for w in (_wall_ns(str(r.run.get("started_at", ""))) for r in runs) if w]
    ends = [
        w + int(float(r.run.get("duration_s") or 0) * 1e9)
        for r in runs
        if (w := _wall_ns(str(r.run.get("started_at", ""))))
    ]
    session = tracer.start_span(
        "llmperf session", kind=SpanKind.INTERNAL, start_time=min(starts, default=None)
    )
    parent = trace.set_span_in_context(session)
    for run in runs:
        start = _wall_ns(str(run.run.get("started_at", "")))
        if start is None:
            continue
        span = tracer.start_span(
            f"llmperf run {run.label}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=_run_attributes(run),
            start_time=start,
        )
        counts.runs += 1
        end = start + int(float(run.run.get("duration_s") or 0) * 1e9)
        if run.events is None:
            counts.without_log += 1
        else:
            end = max(end, _request_spans(tracer, span, run, start, ratio, secrets, counts))
        for slo in slos.get(run.nodeid, []):
            if slo.get("run") in (None, run.label):
                span.add_event("llmperf.slo", _slo_attributes(slo), timestamp=end)
        span.end(end_time=end)
    session.end(end_time=max(ends, default=None))
    return counts


def _run_attributes(run: RunView) -> dict[str, Any]:
    counts = run.run.get("counts") or {}
    out: dict[str, Any] = dict(run.attributes)
    for key in ("issued", "completed", "failed", "cancelled"):
        if key in counts:
            out[f"llmperf.counts.{key}"] = int(counts[key])
    pattern = (run.run.get("load") or {}).get("pattern")
    if pattern:
        out["llmperf.load.pattern"] = str(pattern)
    return out


def _slo_attributes(slo: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "llmperf.slo.expr": str(slo.get("expr", "")),
        "llmperf.slo.verdict": str(slo.get("verdict", "")),
    }
    for key in ("observed", "target"):
        if isinstance(slo.get(key), int | float):
            out[f"llmperf.slo.{key}"] = float(slo[key])
    if slo.get("unit"):
        out["llmperf.slo.unit"] = str(slo["unit"])
    if slo.get("stage") is not None:
        out[Attr.STAGE.value] = int(slo["stage"])
    return out


def _request_spans(
    tracer: trace.Tracer,
    run_span: trace.Span,
    run: RunView,
    start_wall: int,
    ratio: float,
    secrets: Sequence[str],
    counts: SpanCounts,
) -> int:
    """The run's sampled request spans; the wall time of the last byte seen."""
    assert run.events is not None
    context = trace.set_span_in_context(run_span)
    first = first_planned_ns(run.events)
    if first is None:
        return start_wall
    offset = start_wall - first  # the run's first planned send is its started_at
    last = start_wall
    for i, (record, values) in enumerate(request_values(run.events)):
        end_mono = record.t_end or record.t_last or record.t_sched
        last = max(last, end_mono + offset)
        if not kept(i, ratio):
            continue
        attributes: dict[str, Any] = dict(run.attributes)
        if record.model:
            attributes[Attr.REQUEST_MODEL.value] = record.model
        if values.stage >= 0:
            attributes[Attr.STAGE.value] = values.stage
        attributes["llmperf.request.index"] = record.index
        if values.input_tokens is not None:
            attributes[Attr.INPUT_TOKENS.value] = values.input_tokens
        attributes[Attr.OUTPUT_TOKENS.value] = values.output_tokens
        if record.finish_reason:
            attributes[Attr.FINISH_REASONS.value] = [record.finish_reason]
        if values.error_type is not None:
            attributes[Attr.ERROR_TYPE.value] = values.error_type
        name = f"{attributes[Attr.OPERATION.value]} {attributes.get(Attr.REQUEST_MODEL.value, '')}"
        span = tracer.start_span(
            name.strip(),
            context=context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=record.t_sched + offset,
        )
        _request_events(span, record, offset)
        if values.error_type is not None:
            detail = scrub(record.error_detail or "", *secrets)
            span.set_status(Status(StatusCode.ERROR, f"{values.error_type}: {detail}".strip()))
        span.end(end_time=end_mono + offset)
        counts.requests += 1
    return last


def _request_events(span: trace.Span, record: RequestRecord, offset: int) -> None:
    if record.t_send and record.t_send != record.t_sched:
        span.add_event("llmperf.sent", timestamp=record.t_send + offset)
    if record.t_first:
        span.add_event("llmperf.first_token", timestamp=record.t_first + offset)
    if record.t_out and record.t_out != record.t_first:
        span.add_event("llmperf.first_output", timestamp=record.t_out + offset)
