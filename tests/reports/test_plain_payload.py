"""What a test hands its reports is plain data: closed sets (``StrEnum``s) leave as strings.

Under xdist a worker's per-test payload and JUnit properties cross execnet's
wire, which serializes exact builtin types only: one ``StrEnum`` member
anywhere (an error kind as a key, a verdict, a load pattern) is an
INTERNALERROR. Extension hooks and other serializers (YAML's ``safe_dump``)
expect plain data too.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.loadgen.plan.sample_order import SampleOrder
from pytest_llmperf.methodology.search import SearchResult
from pytest_llmperf.reports.junit import error_properties, junit_properties, regression_properties
from pytest_llmperf.results import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult, StopReason
from pytest_llmperf.slo.regression import compare_accumulators
from pytest_llmperf.slo.verdicts import evaluate
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.slo import parse_slo


def _run(label: str, ttft_ms: int) -> RunResult:
    acc = MetricsAccumulator()
    for i in range(40):
        r = RequestRecord(index=i, t_sched=i * 10**8, t_send=i * 10**8)
        r.t_first = r.t_sched + ttft_ms * 10**6
        r.t_last = r.t_end = r.t_first + 10**7
        r.token_events = 2
        if i % 2:
            r.usage_completion_tokens = 2
        acc.add(r)
    for kind in (ErrorKind.HTTP, ErrorKind.INCOMPLETE):
        failed = RequestRecord(index=99, t_sched=5 * 10**9)
        failed.fail(kind, "boom", now=6 * 10**9)
        acc.add(failed)
    load = LoadSpec.parse("poisson", {"rate": 5, "sample_order": "with-replacement"})
    order = SampleOrder.for_workload("with-replacement", 0, None, 40)
    result = RunResult({"sample_order": order.describe()}, load.describe(), {}, acc, label=label)
    result.stop_reason = StopReason.COMPLETED
    return result


def _assert_plain(value: Any, where: str = "payload") -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            assert type(k) is str, f"{where}: key {k!r} is a {type(k).__name__}"
            _assert_plain(v, f"{where}[{k!r}]")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _assert_plain(v, f"{where}[{i}]")
    else:
        assert value is None or type(value) in (str, int, float, bool), (
            f"{where}: {value!r} is a {type(value).__name__}"
        )


def test_a_tests_payload_and_junit_properties_are_plain_and_cross_execnet() -> None:
    base, current = _run("run0", 20), _run("run0", 400)
    verdicts = [evaluate(parse_slo(e), current) for e in ("ttft.p50 < 100ms", "ttft.p99 < 1s")]
    checks = compare_accumulators(base.accumulator, current.accumulator, run="run0")
    search = SearchResult("rate", 5.0, [(5.0, True, current, verdicts)])
    payload = {
        "runs": [current.to_dict()],
        "slos": [v.to_dict() for v in verdicts],
        "states": [current.accumulator.to_state()],
        "analyses": [search.to_analysis()],
        "baseline": [c.to_dict() for c in checks],
        "junit": junit_properties(verdicts)
        + regression_properties(checks)
        + error_properties([(current.label, current.error_samples)]),
    }
    _assert_plain(payload)
    run = payload["runs"][0]
    assert run["errors"] == {"http_error": 1, "incomplete_at_cap": 1}
    assert run["load"]["pattern"] == "poisson" and run["stop_reason"] == "completed"
    assert run["metrics"]["token_count_source"] == "mixed"
    assert {v["verdict"] for v in payload["slos"]} == {"fail", "inconclusive"}
    execnet = pytest.importorskip("execnet")
    execnet.dumps(payload)  # raises DumpError on any non-builtin type
