"""``--llm-otel-spans``: one span per sampled request under a span per run under a span
for the session, posted over OTLP/HTTP to a real receiver: MLflow's OTLP trace ingestion
(``POST /v1/traces`` of the ``mlflow_server`` fixture, which needs the
``x-mlflow-experiment-id`` header: given through ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``, as
a user would) and read back through MLflow's client. The simulator fails some requests
(seeded), so the error spans are checked too."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlflow
import pytest
from mlflow_server import MlflowServer

from pytest_llmperf.export.otel_spans import kept
from pytest_llmperf.export.otel_values import request_values
from pytest_llmperf.sim.process import SimProcess, start_sim_process

RATIO = 0.5
SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=16)
@pytest.mark.llm_load("concurrency", concurrency=1)
@pytest.mark.llm_slo("ttft.p50 < 30s", "error_rate < 100%")
async def test_spans(llm_loadgen):
    await llm_loadgen.run()
"""


@pytest.fixture(scope="module")
def failing_sim() -> Iterator[SimProcess]:
    """A simulator that fails some requests, seeded so that the same ones fail every time:
    with seed 96 the first ten requests (the session's preflight probes among them) pass,
    and about a third of the later ones answer HTTP 500; the suite sends one request at
    a time, so the same requests fail and the same ones are sampled every time."""
    with start_sim_process("fixed", overrides={"error_rate": 0.3}, seed=96) as sim:
        yield sim


_SESSION: list[Any] = []


@pytest.fixture
def session(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    mlflow_server: MlflowServer,
    failing_sim: SimProcess,
) -> Any:
    """One inner session for the module, exported to MLflow: its OTLP trace ingestion
    takes the spans; it has no OTLP metrics endpoint, so the metrics post is refused."""
    if not _SESSION:
        client = mlflow.MlflowClient(tracking_uri=mlflow_server.url)
        experiment = client.create_experiment(f"otel-spans-{uuid.uuid4().hex[:8]}")
        monkeypatch.setenv(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"x-mlflow-experiment-id={experiment}"
        )
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
        pytester.makepyfile(test_suite=SUITE)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)
        result = pytester.runpytest(
            f"--llm-endpoint={failing_sim.url}",
            f"--llm-otel={mlflow_server.url}",  # MLflow takes traces, no metrics
            f"--llm-otel-spans={RATIO}",
            "--llm-json=report.json",
            "--llm-inconclusive=warn",
        )
        report = json.loads((pytester.path / "report.json").read_text())
        traces = client.search_traces(locations=[experiment])
        _SESSION.append((result, report, traces))
    return _SESSION[0]


def _spans(traces: Any) -> list[Any]:
    return [span for trace in traces for span in trace.data.spans]


def test_the_spans_reach_mlflow_and_the_exit_status_is_the_gates(session: Any) -> None:
    result, report, traces = session
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            # MLflow answers the metrics post 404: said, and the spans are still sent
            "llmperf otel: metrics not exported to http://127.0.0.1:*/v1/metrics: HTTP 404*",
            "llmperf otel: 10 span(s) (8 request(s) of 1 run(s)) sent to *",
        ]
    )
    assert len(traces) == 1  # one trace: the session
    assert report["tests"][0]["runs"][0]["counts"]["issued"] == 16


def test_session_run_and_request_spans_nest(session: Any) -> None:
    _, report, traces = session
    spans = _spans(traces)
    (root,) = [s for s in spans if s.parent_id is None]
    assert root.name == "llmperf session"
    run = report["tests"][0]["runs"][0]
    (run_span,) = [s for s in spans if s.name == f"llmperf run {run['label']}"]
    assert run_span.parent_id == root.span_id
    requests = [s for s in spans if s.parent_id == run_span.span_id]
    assert len(requests) == 8  # half of 16, by request order
    nodeid = report["tests"][0]["nodeid"]
    for span in requests:
        assert span.name == f"chat {report['endpoint']['model']}"
        assert span.attributes["llmperf.test"] == nodeid
        assert span.attributes["llmperf.run"] == run["label"]
        assert span.attributes["gen_ai.request.model"] == report["endpoint"]["model"]
        assert root.start_time_ns <= span.start_time_ns <= span.end_time_ns <= root.end_time_ns


def test_the_request_spans_carry_times_tokens_and_failures(session: Any) -> None:
    _, report, traces = session
    run = report["tests"][0]["runs"][0]
    expected = [
        values
        for i, (_, values) in enumerate(request_values(Path(run["events"])))
        if kept(i, RATIO)
    ]
    requests = [s for s in _spans(traces) if s.name.startswith("chat ")]
    failed = [s for s in requests if s.attributes.get("error.type")]
    assert len(failed) == sum(1 for v in expected if v.error_type) > 0
    assert run["counts"]["failed"] > 0
    message = run["error_samples"][0]["message"]
    for span in failed:
        assert span.status.status_code.value == "ERROR"
        assert span.attributes["error.type"] == run["error_samples"][0]["kind"]
        assert message[:40] in span.status.description
    for span in requests:
        if span in failed:
            continue
        assert span.attributes["gen_ai.usage.output_tokens"] == 4
        assert span.attributes["gen_ai.usage.input_tokens"] > 0
        (first,) = [e for e in span.events if e.name == "llmperf.first_token"]
        assert span.start_time_ns < first.timestamp <= span.end_time_ns


def test_the_verdicts_are_events_of_the_run_span(session: Any) -> None:
    _, report, traces = session
    (run_span,) = [s for s in _spans(traces) if s.name.startswith("llmperf run ")]
    events = {e.attributes["llmperf.slo.expr"]: e.attributes for e in run_span.events}
    for slo in report["tests"][0]["slos"]:
        assert events[slo["expr"]]["llmperf.slo.verdict"] == slo["verdict"]
    assert run_span.attributes["llmperf.counts.issued"] == 16


@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.25, 0.5, 1 / 3, 0.999, 1.0])
def test_the_sampling_keeps_the_share_exactly_and_evenly(ratio: float) -> None:
    picks = [i for i in range(1000) if kept(i, ratio)]
    assert len(picks) == int(1000 * ratio)
    if len(picks) > 2:
        gaps = {b - a for a, b in itertools.pairwise(picks)}
        assert max(gaps) - min(gaps) <= 1
