"""Building the session's metrics and spans with the OpenTelemetry SDK and posting them
once over OTLP/HTTP: no background exporter thread, no periodic reader.

The SDK's in-memory reader (metrics) and span exporter (spans) collect what
:mod:`~pytest_llmperf.export.otel_metrics` and :mod:`~pytest_llmperf.export.otel_spans`
made; the OTLP/HTTP exporters then post it in one call each, whose result says whether
the receiver took it. The exporters' own log lines (why a post failed) are caught and
turned into the terminal line, not printed on their own.

Needs the ``otel`` extra: import this module lazily.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pytest_llmperf.export.otel_metrics import RecordedRuns, meter_provider, record_runs
from pytest_llmperf.export.otel_spans import SpanCounts, record_spans
from pytest_llmperf.export.otel_values import RunView

__all__ = ["Sent", "collect_metrics", "collect_spans", "resource", "send_metrics", "send_spans"]

SPAN_BATCH = 512  # spans per OTLP request


def resource() -> Resource:
    """``service.name=pytest-llmperf`` and its version, overridden by
    ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` where they are set."""
    try:
        ours = version("pytest-llmperf")
    except PackageNotFoundError:  # a source tree that is not installed
        ours = "unknown"
    base = Resource.create({"service.name": "pytest-llmperf", "service.version": ours})
    return base.merge(OTELResourceDetector().detect())


@dataclass
class Sent:
    """One signal's post: whether the receiver took it, and the exporter's words if not."""

    ok: bool
    said: list[str] = field(default_factory=list)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage().splitlines()[0][:300])


@contextmanager
def _exporter_logs() -> Iterator[_Collect]:
    """The OTLP exporters' warnings collected, not printed."""
    logger = logging.getLogger("opentelemetry.exporter.otlp")
    handler = _Collect()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def collect_metrics(runs: Sequence[RunView]) -> tuple[Any, RecordedRuns]:
    """The runs' metrics as the SDK's ``MetricsData`` (what the OTLP exporter encodes)."""
    reader = InMemoryMetricReader()
    provider = meter_provider(reader, resource())
    try:
        recorded = record_runs(provider, runs)
        return reader.get_metrics_data(), recorded
    finally:
        provider.shutdown()


def collect_spans(
    runs: Sequence[RunView],
    slos: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    ratio: float,
    secrets: Sequence[str] = (),
) -> tuple[tuple[ReadableSpan, ...], SpanCounts]:
    """The session's spans, finished."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=resource())
    provider.add_span_processor(SimpleSpanProcessor(memory))
    try:
        counts = record_spans(provider, runs, slos, ratio=ratio, secrets=secrets)
        return memory.get_finished_spans(), counts
    finally:
        provider.shutdown()


def send_metrics(data: Any, url: str) -> Sent:
    """Post ``MetricsData`` to ``url`` (OTLP/HTTP protobuf)."""
    exporter = OTLPMetricExporter(endpoint=url)
    with _exporter_logs() as logs:
        try:
            ok = exporter.export(data) == MetricExportResult.SUCCESS
        finally:
            exporter.shutdown()
    return Sent(ok, logs.lines)


def send_spans(spans: Sequence[ReadableSpan], url: str) -> Sent:
    """Post the spans to ``url`` (OTLP/HTTP protobuf), in batches; stop at the first
    refusal (a receiver that is down refuses them all)."""
    exporter = OTLPSpanExporter(endpoint=url)
    with _exporter_logs() as logs:
        try:
            for start in range(0, len(spans), SPAN_BATCH):
                if exporter.export(spans[start : start + SPAN_BATCH]) != SpanExportResult.SUCCESS:
                    return Sent(False, logs.lines)
        finally:
            exporter.shutdown()  # type: ignore[no-untyped-call]
    return Sent(True, logs.lines)
