"""``--llm-otel`` when the export cannot happen: a receiver that never answers, one that
is not there, the extra not installed. Each is one terminal line; the gate's exit status
is its own; the session waits no longer than the exporter's timeout
(``OTEL_EXPORTER_OTLP_TIMEOUT``)."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_llmperf.export.otel_session import INSTALL_HINT, export_report

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=3, requests=6)
@pytest.mark.llm_load("concurrency", concurrency=3)
async def test_one(llm_loadgen):
    await llm_loadgen.run()
"""
TIMEOUT_S = 0.5


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when the block ends


@pytest.fixture
def otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ENDPOINT", "METRICS_ENDPOINT", "TRACES_ENDPOINT", "HEADERS"):
        monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{name}", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", str(TIMEOUT_S))


def _otel_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("llmperf otel:")]


@pytest.mark.usefixtures("otel_env")
def test_a_receiver_that_never_answers_costs_one_timeout_and_one_line(
    pytester: pytest.Pytester, silent_port: int
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        f"--llm-otel=http://127.0.0.1:{silent_port}", "--llm-otel-spans=1", "--llm-json=r.json"
    )
    assert result.ret == pytest.ExitCode.OK
    (line,) = _otel_lines(result)
    assert f"metrics and spans not exported to http://127.0.0.1:{silent_port}: no answer" in line
    # the export alone, on the session's report: bounded by the one timeout (plus slack
    # for a busy machine), not one per signal
    report = json.loads((pytester.path / "r.json").read_text())
    started = time.monotonic()
    lines = export_report(report, f"http://127.0.0.1:{silent_port}", spans_ratio=1.0)
    elapsed = time.monotonic() - started
    assert TIMEOUT_S * 0.9 <= elapsed < TIMEOUT_S + 2.5  # it waited for the timeout, once
    assert len(lines) == 1


@pytest.mark.usefixtures("otel_env")
def test_a_failing_test_keeps_its_exit_status_and_a_refused_export_says_why(
    pytester: pytest.Pytester, closed_port: int
) -> None:
    pytester.makepyfile(test_suite=SUITE + "    assert False, 'the test itself fails'\n")
    pytester.makeini(f"[pytest]\nllm_otel = http://127.0.0.1:{closed_port}\n")  # the ini twin
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (line,) = _otel_lines(result)
    assert f"metrics not exported to http://127.0.0.1:{closed_port}/v1/metrics: " in line
    assert "connection refused" in line.lower()


def test_without_the_extra_one_line_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library's answer, which the plugin prints as it is (the sessions above show the
    printing): no import error, one line naming the install."""
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)
    report: dict[str, Any] = {"tests": [{"nodeid": "t.py::x", "runs": [{"label": "run0"}]}]}
    (line,) = export_report(report, "http://127.0.0.1:9")
    assert INSTALL_HINT in line and line.startswith("llmperf otel: not exported")


def test_a_report_with_no_run_exports_nothing() -> None:
    report: dict[str, Any] = {"endpoint": {}, "tests": [{"nodeid": "t.py::x", "runs": []}]}
    assert export_report(report, "http://127.0.0.1:9") == [
        "llmperf otel: nothing to export (no run was measured)"
    ]
