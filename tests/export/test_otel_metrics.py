"""``--llm-otel``'s GenAI client metrics: a real session against the simulator, exported
over OTLP/HTTP to a loopback receiver that decodes the protobuf with the OpenTelemetry
project's own definitions (tests/export/otlp_receiver.py: no OTLP metrics receiver
installs here), checked against the session's JSON report; the same values through the
SDK's in-memory reader; the HDR fallback's re-bucketing; where the export goes."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any
from urllib.parse import urlsplit

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from otlp_receiver import otlp_metrics_receiver

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.export.otel_names import DURATION, HISTOGRAMS, TOKEN_USAGE, TPOT, TTFT
from pytest_llmperf.export.otel_send import collect_metrics, resource
from pytest_llmperf.export.otel_target import otlp_target
from pytest_llmperf.export.otel_values import RunView, hdr_values_s, run_views
from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.results.event_log import analyse_event_log

SECRET = "sk-otel-test-secret-7731"

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=12)
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_plain(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=3)
@pytest.mark.llm_load(
    "concurrency",
    stages=[{"concurrency": 1, "duration": 0.3}, {"concurrency": 3, "duration": 0.3}],
)
async def test_staged(llm_loadgen):
    await llm_loadgen.run()
"""

Points = dict[tuple[str, ...], Any]


def _value(kv: KeyValue) -> Any:
    v = kv.value
    return getattr(v, v.WhichOneof("value"))


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv) for kv in kvs}


_SESSION: list[Any] = []  # the one inner session the module's checks share


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Any:
    """One inner session for the whole module (run by its first check, kept here): the
    suite against the simulator, exported to a loopback OTLP metrics receiver."""
    if not _SESSION:
        for name in ("ENDPOINT", "METRICS_ENDPOINT", "TRACES_ENDPOINT", "HEADERS", "TIMEOUT"):
            monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{name}", raising=False)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=gate-ci")
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci")
        pytester.makepyfile(test_suite=SUITE)
        with otlp_metrics_receiver() as receiver:
            result = pytester.runpytest(f"--llm-otel={receiver.url}", "--llm-json=report.json")
        report = json.loads((pytester.path / "report.json").read_text())
        _SESSION.append((result, report, receiver.requests, receiver.raw))
    return _SESSION[0]


def _points(requests: list[ExportMetricsServiceRequest]) -> dict[str, list[Any]]:
    """Each metric's histogram data points, with the metric's unit kept beside."""
    out: dict[str, list[Any]] = defaultdict(list)
    for request in requests:
        for rm in request.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    for dp in metric.histogram.data_points:
                        out[metric.name].append((metric.unit, _attrs(dp.attributes), dp))
    return out


def _run_points(points: list[Any], nodeid: str, label: str, **extra: Any) -> list[Any]:
    return [
        dp
        for _, attrs, dp in points
        if attrs["llmperf.test"] == nodeid
        and attrs["llmperf.run"] == label
        and all(attrs.get(k) == v for k, v in extra.items())
    ]


def test_the_session_passes_and_says_where_the_metrics_went(session: Any) -> None:
    result, _, requests, _ = session
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["llmperf otel: metrics of 2 run(s) (2 exact from event logs, 0 from HDR*sent to*"]
    )
    assert len(requests) == 1  # one post


def test_the_names_units_and_buckets_are_the_conventions(session: Any) -> None:
    _, _, requests, _ = session
    points = _points(requests)
    assert set(points) == {h.name for h in HISTOGRAMS}
    for h in HISTOGRAMS:
        for unit, _, dp in points[h.name]:
            assert unit == h.unit
            assert tuple(dp.explicit_bounds) == h.boundaries
    resource = _attrs(requests[0].resource_metrics[0].resource.attributes)
    assert resource["service.name"] == "pytest-llmperf"


def test_every_point_has_the_genai_and_run_attributes(session: Any) -> None:
    _, report, requests, _ = session
    url = urlsplit(report["endpoint"]["url"])
    for points in _points(requests).values():
        for _, attrs, _ in points:
            assert attrs["gen_ai.operation.name"] == "chat"
            assert attrs["gen_ai.provider.name"] == "openai"
            assert attrs["gen_ai.system"] == "openai"
            assert attrs["gen_ai.request.model"] == report["endpoint"]["model"]
            assert attrs["server.address"] == url.hostname
            assert attrs["server.port"] == url.port
            assert attrs["llmperf.test"] in {t["nodeid"] for t in report["tests"]}


def test_the_counts_and_tokens_are_the_reports(session: Any) -> None:
    _, report, requests, _ = session
    points = _points(requests)
    plain = next(t for t in report["tests"] if t["nodeid"].endswith("test_plain"))
    run = plain["runs"][0]
    completed = run["counts"]["completed"]
    assert completed == 12
    (duration,) = _run_points(points[DURATION.name], plain["nodeid"], run["label"])
    assert duration.count == completed
    (ttft,) = _run_points(points[TTFT.name], plain["nodeid"], run["label"])
    assert ttft.count == completed
    # exact per request: the report's max, in seconds
    assert ttft.max == pytest.approx(run["metrics"]["ttft"]["max"] / 1000, abs=1e-6)
    assert duration.max == pytest.approx(run["metrics"]["e2e"]["max"] / 1000, abs=1e-6)
    (tpot,) = _run_points(points[TPOT.name], plain["nodeid"], run["label"])
    assert tpot.count == run["metrics"]["tpot"]["count"]
    (out,) = _run_points(
        points[TOKEN_USAGE.name], plain["nodeid"], run["label"], **{"gen_ai.token.type": "output"}
    )
    assert (out.count, out.sum) == (completed, 4 * completed)
    (inp,) = _run_points(
        points[TOKEN_USAGE.name], plain["nodeid"], run["label"], **{"gen_ai.token.type": "input"}
    )
    assert inp.count == completed and inp.sum > 0


def test_a_staged_run_is_exported_per_stage(session: Any) -> None:
    _, report, requests, _ = session
    staged = next(t for t in report["tests"] if t["nodeid"].endswith("test_staged"))
    run = staged["runs"][0]
    points = _points(requests)[DURATION.name]
    for stage in run["stages"]:
        (dp,) = _run_points(
            points, staged["nodeid"], run["label"], **{"llmperf.stage": stage["index"]}
        )
        assert dp.count == stage["counts"]["completed"] > 0


def test_the_variables_set_the_headers_and_the_resource(session: Any) -> None:
    _, _, requests, raw = session
    assert all(headers.get("x-tenant") == "gate-ci" for _, headers, _ in raw)
    resource = _attrs(requests[0].resource_metrics[0].resource.attributes)
    assert resource["deployment.environment"] == "ci"
    assert resource["service.name"] == "pytest-llmperf"  # OTEL_SERVICE_NAME unset


def test_otel_service_name_overrides_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "gate-nightly")
    assert resource().attributes["service.name"] == "gate-nightly"


def test_the_api_key_is_in_no_header_and_no_body(session: Any) -> None:
    _, _, _, raw = session
    assert raw
    for _, headers, body in raw:
        assert SECRET not in json.dumps(headers)
        assert SECRET.encode() not in body


def test_the_in_memory_reader_holds_the_same_points(session: Any) -> None:
    """The SDK's own reader, fed from the same report: what the OTLP exporter encoded."""
    _, report, requests, _ = session
    data, recorded = collect_metrics(run_views(report))
    assert (recorded.exact, recorded.from_hdr) == (2, 0)
    sent = {
        (name, json.dumps(attrs, sort_keys=True)): dp.count
        for name, points in _points(requests).items()
        for _, attrs, dp in points
    }
    memory = {
        (metric.name, json.dumps(dict(dp.attributes), sort_keys=True)): dp.count
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        for dp in metric.data.data_points
    }
    assert memory == sent


def test_without_an_event_log_the_hdr_histograms_are_rebucketed_counts_kept(
    session: Any,
) -> None:
    _, report, _, _ = session
    plain = next(t for t in report["tests"] if t["nodeid"].endswith("test_plain"))
    exact = run_views({**report, "tests": [plain]})[0]
    assert exact.events is not None
    state = analyse_event_log(exact.events).to_state()  # the run's lossless HDR state
    hdr_only = RunView(exact.nodeid, exact.label, exact.attributes, None, state, exact.run)
    data_hdr, recorded = collect_metrics([hdr_only])
    data_exact, _ = collect_metrics([exact])
    assert (recorded.exact, recorded.from_hdr) == (0, 1)

    def by_name(data: Any) -> dict[str, Any]:
        return {
            m.name: m.data.data_points[0]
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        }

    hdr, exact_points = by_name(data_hdr), by_name(data_exact)
    assert TOKEN_USAGE.name not in hdr  # no per-request token histogram in HDR states
    for name in (DURATION.name, TTFT.name, TPOT.name):
        assert hdr[name].count == exact_points[name].count
        assert hdr[name].min == pytest.approx(exact_points[name].min, abs=1e-6)
        assert hdr[name].max == pytest.approx(exact_points[name].max, abs=1e-6)
        assert hdr[name].sum == pytest.approx(exact_points[name].sum, rel=2e-3)


def test_hdr_values_keep_the_count_and_the_exact_extremes() -> None:
    hist = LatencyHistogram()
    values_ns = [1_000_000, 20_000_000, 20_004_000, 150_000_000, 2_500_000_000, 7_777_777]
    for v in values_ns:
        hist.record_ns(v)
    hist.record_ns(20_000_000, count=5)
    pairs = hdr_values_s(hist.to_state())
    assert sum(n for _, n in pairs) == hist.count == 11
    values = [v for v, _ in pairs]
    assert min(values) == 0.001 and max(values) == 2.5
    # the seven values near 20 ms stay there, to the HDR resolution (16 us at 20 ms)
    assert sum(n for v, n in pairs if abs(v - 0.02) < 2e-5) == 7
    one = LatencyHistogram()
    one.record_ns(42_000_000)
    assert hdr_values_s(one.to_state()) == [(0.042, 1)]


def test_the_target_urls_from_the_option_and_the_variables() -> None:
    assert otlp_target("http://c:4318/", {}).metrics_url == "http://c:4318/v1/metrics"
    assert otlp_target("http://c:4318", {}).traces_url == "http://c:4318/v1/traces"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://o:4318"}
    assert otlp_target("env", env).metrics_url == "https://o:4318/v1/metrics"
    assert otlp_target("env", {}).traces_url == "http://localhost:4318/v1/traces"
    own = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:9/otlp/traces"}
    target = otlp_target("http://c:4318", own)
    assert (target.metrics_url, target.traces_url) == (
        "http://c:4318/v1/metrics",
        "http://t:9/otlp/traces",
    )
    with pytest.raises(LlmPerfUsageError, match="collector:4318"):
        otlp_target("collector:4318", {})


def test_a_bad_option_value_is_a_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--llm-otel=collector:4318", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llm-otel*collector:4318*"])
