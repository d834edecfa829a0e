"""The values ``--llm-otel`` exports, read from the finished report: no OpenTelemetry here.

Two sources, the better first:

- **The run's event log** (``runs[].events``: ``--llm-events``, or the temporary logs the
  plugin keeps while ``--llm-otel`` is on): every tracked request exactly, as
  :func:`~pytest_llmperf.results.event_log.read_records` rebuilds it, with the same
  definitions as the report (duration: planned send to the last byte, the report's
  ``e2e``; TTFT from the planned send; TPOT ``(last - first) / (output tokens - 1)``).
- **The run's HDR histograms** (the lossless states the session keeps) where no event log
  is left: each non-empty HDR bucket (about 0.1 % wide) becomes its count of values at
  the bucket's middle, clamped to the run's exact min and max, and the min and the max
  themselves are given exactly. The counts are preserved; an HDR bucket is never split
  across an OpenTelemetry bucket boundary, so a count can land one OTel bucket off only
  when a boundary falls inside a 0.1 %-wide HDR bucket; the sum is known to the HDR
  resolution. Token usage has no per-request histogram there, so a run without its event
  log exports the latencies only (the docs say so).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.export.otel_names import Attr, operation_name, provider_name
from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.results.event_log import read_records

__all__ = [
    "RequestValues",
    "RunView",
    "first_planned_ns",
    "hdr_values_s",
    "request_values",
    "run_views",
    "server_address",
]

NS_PER_S = 1e9


@dataclass(frozen=True)
class RunView:
    """One run of the report, with what its export needs: its attributes (conventions'
    and the run's labels), its event log if one is left, its HDR state otherwise."""

    nodeid: str
    label: str
    attributes: dict[str, str | int]
    events: Path | None
    state: Mapping[str, Any] | None
    run: Mapping[str, Any] = field(repr=False)

    @property
    def stages(self) -> list[int]:
        """The indexes of the run's load stages (empty without stages)."""
        return [int(s.get("index", k)) for k, s in enumerate(self.run.get("stages") or [])]


@dataclass(frozen=True)
class RequestValues:
    """One request's exported values (seconds, tokens); None where the request has none."""

    duration_s: float | None
    ttft_s: float | None
    tpot_s: float | None
    input_tokens: int | None
    output_tokens: int
    error_type: str | None
    stage: int


def server_address(url: str) -> dict[str, str | int]:
    """``server.address`` and ``server.port`` of an endpoint URL (the port made explicit
    from the scheme); nothing for the embedded simulator's ``sim`` spelling."""
    parts = urlsplit(url)
    if not parts.hostname:
        return {}
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {Attr.SERVER_ADDRESS.value: parts.hostname, Attr.SERVER_PORT.value: port}


def _base_attributes(
    nodeid: str, run: Mapping[str, Any], endpoint: Mapping[str, Any]
) -> dict[str, str | int]:
    api = str(endpoint.get("api") or "chat")
    attributes: dict[str, str | int] = {
        Attr.OPERATION.value: operation_name(api),
        Attr.PROVIDER.value: provider_name(api),
        Attr.SYSTEM.value: provider_name(api),
    }
    model = endpoint.get("model")
    if model:
        attributes[Attr.REQUEST_MODEL.value] = str(model)
    attributes.update(server_address(str(endpoint.get("url") or "")))
    attributes[Attr.TEST.value] = nodeid
    attributes[Attr.RUN.value] = str(run.get("label") or "")
    return attributes


def run_views(
    report: Mapping[str, Any], states: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
) -> list[RunView]:
    """Every run of the report, in order. ``states``: each test's accumulator states by
    nodeid, in the order of its runs (the session's ``TestEntry.states``)."""
    views = []
    session_endpoint = report.get("endpoint") or {}
    for test in report.get("tests", []):
        nodeid = str(test.get("nodeid", ""))
        endpoint = test.get("endpoint") or session_endpoint
        test_states = (states or {}).get(nodeid, [])
        for i, run in enumerate(test.get("runs", [])):
            events = run.get("events")
            path = Path(events) if events and Path(events).is_file() else None
            views.append(
                RunView(
                    nodeid=nodeid,
                    label=str(run.get("label") or ""),
                    attributes=_base_attributes(nodeid, run, endpoint),
                    events=path,
                    state=test_states[i] if i < len(test_states) else None,
                    run=run,
                )
            )
    return views


def values_of(record: RequestRecord) -> RequestValues:
    """A finished request's exported values, with the report's definitions."""
    start = record.t_sched
    # a failure lasts until it was seen; an answer until its last byte
    last = record.t_end if record.error is not None else (record.t_last or record.t_end)
    n_out = record.output_tokens
    ttft = (record.t_first - start) / NS_PER_S if record.t_first else None
    tpot = None
    if record.t_first and n_out >= 2 and record.error is None:
        tpot = (record.t_last - record.t_first) // (n_out - 1) / NS_PER_S
    return RequestValues(
        duration_s=(last - start) / NS_PER_S if last and start else None,
        ttft_s=ttft if record.error is None else None,
        tpot_s=tpot,
        input_tokens=record.usage_prompt_tokens,
        output_tokens=n_out,
        error_type=record.error.value if record.error is not None else None,
        stage=record.stage,
    )


def request_values(path: Path) -> Iterator[tuple[RequestRecord, RequestValues]]:
    """The tracked requests of an event log (warm-up and cancelled ones left out)."""
    for record in read_records(path):
        if record.tracked and not record.cancelled:
            yield record, values_of(record)


def first_planned_ns(path: Path) -> int | None:
    """The run's first planned send (``time.monotonic_ns()``), warm-up included: where
    its ``started_at`` is pinned on the monotonic clock (requests are logged in the order
    they finished, not the order they were sent)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (first,) = db.execute("SELECT MIN(ref_ns) FROM events WHERE kind = 'issued'").fetchone()
    finally:
        db.close()
    return int(first) if first is not None else None


def hdr_values_s(state: Mapping[str, Any]) -> list[tuple[float, int]]:
    """A latency histogram's state re-bucketed into (value s, count) pairs whose counts
    add up to the histogram's count: the exact min and max once each, every other value
    at its HDR bucket's middle, clamped to [min, max] (see the module's docstring)."""
    hist = LatencyHistogram.from_state(dict(state))
    if hist.count == 0:
        return []
    lo_s, hi_s = hist.min_ns / NS_PER_S, hist.max_ns / NS_PER_S
    if hist.count == 1:
        return [(hi_s, 1)]
    out: list[tuple[float, int]] = []
    buckets = hist.buckets_ms()
    remove = {0: 1, len(buckets) - 1: 1}  # the min's and the max's own counts
    for k, (upper_ms, count) in enumerate(buckets):
        n = int(count) - remove.get(k, 0) - (1 if k == 0 and len(buckets) == 1 else 0)
        if n <= 0:
            continue
        width_ms = hist.resolution_ms(upper_ms)
        middle_s = (upper_ms - width_ms / 2) / 1000.0
        out.append((min(max(middle_s, lo_s), hi_s), n))
    return [(lo_s, 1), *out, (hi_s, 1)]
