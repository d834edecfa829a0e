"""The report as MLflow runs, without a tracking server: names MLflow accepts (checked
with MLflow's own validators), values within its limits, batches within its per-call
limits, the CI source, credentials kept out, the GPU figures by their SLO names."""

from __future__ import annotations

from typing import Any

import pytest
from mlflow.utils import validation

from pytest_llmperf.export.mlflow_log import _batches
from pytest_llmperf.export.mlflow_metrics import MetricPoint, run_metrics, stage_metrics
from pytest_llmperf.export.mlflow_names import (
    MAX_PARAM_VALUE,
    metric_value,
    mlflow_key,
    param_value,
    slo_key,
)
from pytest_llmperf.export.mlflow_records import (
    RunRecord,
    RunStatus,
    clean_url,
    fingerprint_digest,
    session_record,
)
from pytest_llmperf.export.mlflow_source import source_tags
from pytest_llmperf.specs.gpu_names import GPU_METRICS

SECRET = "sk-records-DO-NOT-LEAK-5150"


def valid(key: str) -> bool:
    """MLflow's own checks of a metric, param or tag key."""
    try:
        validation._validate_metric_name(key)
        validation._validate_param_name(key)
        validation._validate_tag_name(key)
    except Exception:
        return False
    return len(key) <= validation.MAX_ENTITY_KEY_LENGTH


@pytest.mark.parametrize(
    ("expr", "key"),
    [
        ("ttft.p99 < 500ms", "slo.ttft.p99 lt 500ms"),
        ("error_rate < 1%", "slo.error_rate lt 1pct"),
        ("output_throughput >= 100tok/s", "slo.output_throughput ge 100tok_s"),
        ("tpot.p99.9 <= 50 ms", "slo.tpot.p99.9 le 50 ms"),
        ("gpu.power_w.max > 300W", "slo.gpu.power_w.max gt 300W"),
        ("output_match == 100%", "slo.output_match eq 100pct"),
    ],
)
def test_an_slo_expression_is_a_tag_key_mlflow_accepts(expr: str, key: str) -> None:
    assert slo_key(expr) == key
    assert valid(key) and not valid(f"slo.{expr}")  # as written, MLflow refuses it
    assert slo_key(expr, stage=2) == f"{key}.stage2"


@pytest.mark.parametrize(
    "name",
    [
        "a/../b",
        "/abs",
        "x//y",
        "ttft.p99 < 500ms",
        "server.kv_cache_usage[replica:0]",
        "fleet.pages.replica.http://h:1/metrics.server.ttft.p50",
        "é.ü",
        "x" * 400,
        "",
        "..",
    ],
)
def test_any_name_becomes_a_key_mlflow_accepts(name: str) -> None:
    assert valid(mlflow_key(name)), mlflow_key(name)


def test_values_keep_to_mlflows_limits() -> None:
    assert param_value("x" * 10_000).endswith("…")
    assert len(param_value("x" * 10_000)) == MAX_PARAM_VALUE
    assert param_value({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert param_value(True) == "true" and param_value(0.5) == "0.5"
    assert [metric_value(v) for v in (1, 2.5, True, None, "3", float("nan"))] == [
        1.0,
        2.5,
        None,
        None,
        None,
        None,
    ]


def test_a_url_loses_its_credentials_and_query() -> None:
    assert clean_url(f"https://u:{SECRET}@h.example:8443/v1?api-key={SECRET}#x") == (
        "https://h.example:8443/v1"
    )
    assert clean_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"


def test_the_fingerprint_digest_ignores_when_it_was_collected() -> None:
    a = {"server": {"family": "vllm"}, "collected_at": "2026-01-01T00:00:00+00:00"}
    b = {**a, "collected_at": "2026-02-02T00:00:00+00:00"}
    assert (
        fingerprint_digest(a)
        == fingerprint_digest(b)
        != fingerprint_digest({**a, "server": {"family": "sglang"}})
    )
    assert fingerprint_digest(None) == ""


def gpu_block() -> dict[str, Any]:
    """A ``runs[].gpu`` block with a distinct value at each named figure's path."""
    block: dict[str, Any] = {}
    for i, metric in enumerate(GPU_METRICS.values()):
        where = block
        for key in metric.path[:-1]:
            where = where.setdefault(key, {})
        where[metric.path[-1]] = 10.0 + i
    return block


def a_run(**extra: Any) -> dict[str, Any]:
    return {
        "label": "run0",
        "started_at": "2026-11-28T10:00:00.000+00:00",
        "duration_s": 2.0,
        "workload": {"name": "synthetic", "seed": 1, "input_tokens": [16, 16]},
        "load": {"pattern": "constant", "stages": [{"rate": 5}, {"rate": 10}]},
        "counts": {"issued": 20, "completed": 19, "failed": 1},
        "metrics": {
            "ttft": {"p50": 21.5, "p99": None, "count": 19},
            "error_rate": 0.05,
            "token_count_source": "usage",
        },
        "server_metrics": {"metrics": {"server.preemptions": {"value": 3.0}}},
        "stages": [
            {"index": 0, "start_s": 0.0, "planned_rate": 5.0, "metrics": {"ttft": {"p50": 20.0}}},
            {"index": 1, "start_s": 1.0, "planned_rate": 10.0, "metrics": {"ttft": {"p50": 30.0}}},
        ],
        **extra,
    }


def test_every_number_of_a_run_is_a_metric_and_stages_are_steps() -> None:
    points = {p.key: p for p in run_metrics(a_run(gpu=gpu_block()), timestamp_ms=7)}
    assert points["ttft.p50"] == MetricPoint("ttft.p50", 21.5, 0, 7)
    assert "ttft.p99" not in points and "token_count_source" not in points
    assert points["error_rate"].value == 0.05 and points["counts.failed"].value == 1
    assert points["server.preemptions"].value == 3.0  # a "value" leaf is its parent's name
    for i, name in enumerate(GPU_METRICS):  # the GPU figures by their SLO names
        assert points[name].value == 10.0 + i
    stages = [
        (p.key, p.step, p.value, p.timestamp_ms) for p in stage_metrics(a_run(), start_ms=1000)
    ]
    assert ("stage.ttft.p50", 0, 20.0, 1000) in stages
    assert ("stage.ttft.p50", 1, 30.0, 2000) in stages
    assert ("stage.planned_rate", 1, 10.0, 2000) in stages
    assert all(valid(k) for k, *_ in stages) and all(valid(k) for k in points)


def test_no_gpu_block_no_gpu_metric() -> None:
    assert not [p for p in run_metrics(a_run()) if p.key.startswith("gpu.")]


def a_report() -> dict[str, Any]:
    endpoint = {
        "url": f"https://user:{SECRET}@llm.example/v1?key={SECRET}",
        "model": "m",
        "api": "chat",
        "fingerprint": {"server": {"family": "vllm", "version": "0.9"}},
    }
    return {
        "generated_at": "2026-11-28T10:01:00+00:00",
        "endpoint": endpoint,
        "tests": [
            {
                "nodeid": "t.py::test_a",
                "outcome": "failed",
                "endpoint": endpoint,
                "runs": [
                    a_run(),
                    a_run(
                        label="run1",
                        reference={
                            "verdict": "fail",
                            "reference_endpoint": {"url": "http://ref:8000/v1?k=1"},
                            "checks": [
                                {"metric": "ttft", "stat": "p50", "verdict": "fail", "change": 0.5}
                            ],
                        },
                    ),
                ],
                "baseline": [
                    {
                        "metric": "ttft",
                        "stat": "p99",
                        "verdict": "fail",
                        "change": 0.234,
                        "run": "run0",
                    },
                    {
                        "metric": "startup.ready_s",
                        "stat": "",
                        "verdict": "pass",
                        "change": None,
                        "run": "run0",
                    },
                    {
                        "metric": "ttft",
                        "stat": "p99",
                        "verdict": "pass",
                        "change": -0.01,
                        "run": "run1",
                    },
                ],
                "slos": [
                    {
                        "expr": "ttft.p50 < 1ms",
                        "verdict": "fail",
                        "observed": 21.5,
                        "unit": "ms",
                        "run": "run0",
                    },
                    {
                        "expr": "ttft.p50 < 1ms",
                        "verdict": "pass",
                        "observed": 0.5,
                        "unit": "ms",
                        "run": "run1",
                    },
                    {
                        "expr": "error_rate < 1%",
                        "verdict": "inconclusive",
                        "observed": 0.05,
                        "unit": "fraction",
                        "run": "run0",
                        "stage": 1,
                        "reason": "too few samples",
                    },
                ],
            }
        ],
        "session": {
            "exitstatus": 1,
            "outcomes": {"failed": 1},
            "options": {"api": "chat", "api_key_env": "OPENAI_API_KEY"},
            "slos": [{"expr": "ttft.p99 < 2s", "verdict": "pass", "observed": 30.0, "unit": "ms"}],
        },
    }


def test_the_session_record_parent_and_children() -> None:
    record = session_record(
        a_report(),
        short_id="abcd1234",
        started_at="2026-11-28T09:59:59+00:00",
        environ={
            "CI_COMMIT_SHA": "feed",
            "CI_COMMIT_REF_NAME": "main",
            "CI_JOB_URL": "https://ci/1",
        },
        secrets=[SECRET],
    )
    parent = record.parent
    assert parent.name == "llmperf 2026-11-28T09:59:59Z abcd1234"
    assert parent.status is RunStatus.FAILED and parent.end_ms is not None
    assert parent.tags["llmperf.server"] == "vllm 0.9"
    assert parent.tags["mlflow.source.git.commit"] == "feed"
    assert parent.tags["mlflow.source.git.branch"] == "main"
    assert parent.tags["llmperf.ci.job_url"] == "https://ci/1"
    assert parent.tags["slo.ttft.p99 lt 2s"] == "pass"  # the session's ruleset
    assert parent.params["options.api_key_env"] == "OPENAI_API_KEY"
    run0, run1 = record.children
    assert (run0.name, run1.name) == ("test_a run0", "test_a run1")
    assert run0.status is RunStatus.FAILED  # the test failed
    assert run0.params["endpoint"] == "https://llm.example/v1"
    assert run0.tags["slo.ttft.p50 lt 1ms"] == "fail"
    assert run0.tags["slo.ttft.p50 lt 1ms.observed"] == "21.5 ms"
    assert run0.tags["slo.error_rate lt 1pct.stage1"] == "inconclusive"
    assert run0.tags["slo.error_rate lt 1pct.stage1.observed"] == "5% (too few samples)"
    assert run0.tags["baseline.ttft.p99"] == "fail"
    assert run0.tags["baseline.ttft.p99.change"] == "+23.4%"
    assert run0.tags["baseline.startup.ready_s"] == "pass"
    assert "baseline.startup.ready_s.change" not in run0.tags
    assert run1.tags["baseline.ttft.p99.change"] == "-1.0%"
    assert run1.tags["ab"] == "fail" and run1.tags["ab.ttft.p50.change"] == "+50.0%"
    assert run1.params["reference_endpoint"] == "http://ref:8000/v1"
    assert "ab" not in run0.tags and "reference_endpoint" not in run0.params
    assert run1.tags["slo.ttft.p50 lt 1ms"] == "pass"  # each run its own verdicts
    assert "slo.error_rate lt 1pct.stage1" not in run1.tags
    assert run0.start_ms is not None and run0.end_ms == run0.start_ms + 2000
    for run in (parent, run0, run1):
        for key, value in (*run.params.items(), *run.tags.items()):
            assert valid(key), key
            assert SECRET not in value, key


def test_a_secret_anywhere_in_a_value_is_masked() -> None:
    report = a_report()
    report["tests"][0]["runs"][0]["workload"]["note"] = f"key {SECRET} here"
    (run0, _) = session_record(report, short_id="x", secrets=[SECRET]).children
    assert run0.params["workload.note"] == "key *** here"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, {}),
        (
            {
                "GITHUB_SHA": "abc",
                "GITHUB_REF_NAME": "12/merge",
                "GITHUB_HEAD_REF": "fix/x",
                "GITHUB_SERVER_URL": "https://ghe.example",
                "GITHUB_REPOSITORY": "o/r",
                "GITHUB_RUN_ID": "9",
            },
            {
                "mlflow.source.git.commit": "abc",
                "mlflow.source.git.branch": "fix/x",
                "mlflow.source.git.repoURL": "https://ghe.example/o/r",
                "llmperf.ci.job_url": "https://ghe.example/o/r/actions/runs/9",
            },
        ),
        (
            {"GITHUB_SHA": "abc", "GITHUB_REF_NAME": "main"},
            {"mlflow.source.git.commit": "abc", "mlflow.source.git.branch": "main"},
        ),
        (
            {"GIT_COMMIT": "def", "GIT_BRANCH": "origin/main"},
            {"mlflow.source.git.commit": "def", "mlflow.source.git.branch": "origin/main"},
        ),
    ],
)
def test_the_source_comes_from_the_ci_variables(
    environ: dict[str, str], expected: dict[str, str]
) -> None:
    assert source_tags(environ) == expected


def test_a_big_run_is_logged_in_few_batches_within_mlflows_limits() -> None:
    record = RunRecord(
        "big",
        params={f"p{i}": "v" for i in range(250)},
        tags={f"t{i}": "v" for i in range(120)},
        metrics=[MetricPoint(f"m{i}", 1.0) for i in range(2500)],
    )
    batches = list(_batches(record))
    for metrics, params, tags in batches:
        assert len(metrics) <= validation.MAX_METRICS_PER_BATCH
        assert len(params) <= validation.MAX_PARAMS_TAGS_PER_BATCH
        assert len(tags) <= validation.MAX_PARAMS_TAGS_PER_BATCH
        assert len(metrics) + len(params) + len(tags) <= validation.MAX_ENTITIES_PER_BATCH
    assert sum(len(m) for m, _, _ in batches) == 2500
    assert sum(len(p) for _, p, _ in batches) == 250
    assert sum(len(t) for _, _, t in batches) == 120
    assert len(batches) == 3  # 2,870 entities: three calls, not 2,870
