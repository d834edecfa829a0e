"""The GenAI client metrics of every run, recorded into an OpenTelemetry SDK meter.

Needs the ``otel`` extra (``opentelemetry-sdk``): import this module lazily. Each run's
requests are recorded with the run's attributes (conventions' and ``llmperf.test``,
``llmperf.run``, ``llmperf.stage`` where the run has stages), so every run is its own
set of data points; the histograms carry the conventions' bucket boundaries through SDK
views. The values come from :mod:`pytest_llmperf.export.otel_values`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from opentelemetry.metrics import Histogram as OtelHistogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource

from pytest_llmperf.export.otel_names import DURATION, HISTOGRAMS, TOKEN_USAGE, TPOT, TTFT, Attr
from pytest_llmperf.export.otel_values import RunView, hdr_values_s, request_values

__all__ = ["RecordedRuns", "meter_provider", "record_runs"]

SCOPE = "pytest-llmperf"  # the instrumentation scope: the distribution's name
Attributes = dict[str, str | int]


def meter_provider(reader: MetricReader, resource: Resource) -> MeterProvider:
    """A provider whose GenAI histograms have the conventions' bucket boundaries."""
    views = [
        View(
            instrument_name=h.name,
            aggregation=ExplicitBucketHistogramAggregation(boundaries=list(h.boundaries)),
        )
        for h in HISTOGRAMS
    ]
    return MeterProvider(metric_readers=[reader], resource=resource, views=views)


@dataclass
class RecordedRuns:
    """What was recorded: runs from their event logs (exact), from HDR histograms, and
    runs with neither (nothing measured)."""

    exact: int = 0
    from_hdr: int = 0
    empty: int = 0


def record_runs(provider: MeterProvider, runs: Sequence[RunView]) -> RecordedRuns:
    """Record every run's requests; the provider's reader then holds the data points."""
    meter = provider.get_meter(SCOPE)
    instruments = {
        h.name: meter.create_histogram(h.name, unit=h.unit, description=h.description)
        for h in HISTOGRAMS
    }
    done = RecordedRuns()
    for run in runs:
        if run.events is not None:
            _record_exact(instruments, run)
            done.exact += 1
        elif run.state is not None and run.state.get("histograms"):
            _record_hdr(instruments, run)
            done.from_hdr += 1
        else:
            done.empty += 1
    return done


def _record_exact(instruments: Mapping[str, OtelHistogram], run: RunView) -> None:
    assert run.events is not None
    staged = bool(run.stages)
    for record, values in request_values(run.events):
        attributes: Attributes = dict(run.attributes)
        if record.model:  # llm_workload(adapters=): the served model the request named
            attributes[Attr.REQUEST_MODEL.value] = record.model
        if staged and values.stage >= 0:
            attributes[Attr.STAGE.value] = values.stage
        if values.error_type is not None:
            failed = {**attributes, Attr.ERROR_TYPE.value: values.error_type}
            if values.duration_s is not None:
                instruments[DURATION.name].record(values.duration_s, failed)
            continue
        if values.duration_s is not None:
            instruments[DURATION.name].record(values.duration_s, attributes)
        if values.ttft_s is not None:
            instruments[TTFT.name].record(values.ttft_s, attributes)
        if values.tpot_s is not None:
            instruments[TPOT.name].record(values.tpot_s, attributes)
        usage = instruments[TOKEN_USAGE.name]
        if values.input_tokens is not None:
            usage.record(values.input_tokens, {**attributes, Attr.TOKEN_TYPE.value: "input"})
        usage.record(values.output_tokens, {**attributes, Attr.TOKEN_TYPE.value: "output"})


_FROM_HDR = {DURATION.name: "e2e", TTFT.name: "ttft", TPOT.name: "tpot"}


def _record_hdr(instruments: Mapping[str, OtelHistogram], run: RunView) -> None:
    """The latencies re-bucketed from the run's HDR histograms (per stage where it has
    stages); no token usage (no per-request token histogram is kept)."""
    assert run.state is not None
    parts: list[tuple[Attributes, Mapping[str, object]]] = []
    stages = run.state.get("stages") or {}
    if run.stages and stages:
        for index, stage_state in sorted(stages.items(), key=lambda kv: int(kv[0])):
            attributes = {**run.attributes, Attr.STAGE.value: int(index)}
            parts.append((attributes, stage_state["histograms"]))
    else:
        parts.append((dict(run.attributes), run.state["histograms"]))
    for attributes, histograms in parts:
        for name, metric in _FROM_HDR.items():
            state = histograms.get(metric)
            if not isinstance(state, Mapping):
                continue
            instrument = instruments[name]
            for value_s, count in hdr_values_s(state):
                for _ in range(count):
                    instrument.record(value_s, attributes)
