"""``--llm-mlflow`` where nothing goes as planned, and without a server: a tracking URI
that does not answer, ``env`` with no ``$MLFLOW_TRACKING_URI``, the extra not installed
(each one terminal line, the exit status unchanged), and a SQLite store written directly
(no server), through the plugin, the library and its command line.

The inner sessions here measure nothing (a plain test): the export runs after every
session, and what these tests check is its line and the exit status, not the runs.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from pytest_llmperf.export.mlflow_cli import main
from pytest_llmperf.export.mlflow_log import ExportStatus, export_report
from pytest_llmperf.specs.gpu_names import GPU_METRICS

SECRET = "sk-failures-DO-NOT-LEAK-8080"

PLAIN = """
def test_plain():
    assert True
"""


def refused_url() -> str:
    """A loopback URL where nothing listens (the port was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_tracking_server_that_does_not_answer_is_one_line_and_no_failure(
    pytester: pytest.Pytester,
) -> None:
    url = refused_url()
    pytester.makepyfile(test_plain_refused=PLAIN)
    start = time.monotonic()
    result = pytester.runpytest(f"--llm-mlflow={url}")
    took = time.monotonic() - start
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [f"llmperf MLflow: export to {url} (experiment 'llmperf') failed: *Error*"]
    )
    # MLflow's own retries (7, exponential backoff from 2 s) would take minutes; with
    # the export's one retry it is seconds: a busy machine cannot add a minute
    assert took < 60, took


def test_env_without_the_variable_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    pytester.makepyfile(test_plain_env=PLAIN)
    result = pytester.runpytest("--llm-mlflow=env")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["llmperf MLflow: --llm-mlflow=env: $MLFLOW_TRACKING_URI is not set; nothing exported"]
    )


def test_without_the_extra_one_line_names_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow: ImportError
    pytester.makepyfile(test_plain_extra=PLAIN)
    result = pytester.runpytest(f"--llm-mlflow=sqlite:///{tmp_path}/never.db")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "llmperf MLflow: the export needs MLflow's client: "
            "pip install pytest-llmperf[mlflow]; nothing exported"
        ]
    )
    assert not (tmp_path / "never.db").exists()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite tracking store, no server (made on first use, shared by the module)."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow_store')}/mlflow.db"


def test_env_names_a_sqlite_store_and_the_experiment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "from-env")
    pytester.makepyfile(test_plain_store=PLAIN)
    result = pytester.runpytest("--llm-mlflow=env", "--llm-json=r.json")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [f"llmperf MLflow: session run * with 0 test run(s) and 1 report(s) logged to {store}*"]
    )
    client = MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name("from-env")
    assert experiment is not None
    (parent,) = client.search_runs([experiment.experiment_id])
    assert parent.data.tags["llmperf.exitstatus"] == "0"
    assert [f.path for f in client.list_artifacts(parent.info.run_id)] == ["r.json"]


def gpu_report() -> dict[str, Any]:
    """A report with one staged run that carries a GPU block (no GPU here: the block is
    what the sampler writes, each named figure at its path)."""
    gpu: dict[str, Any] = {}
    for i, metric in enumerate(GPU_METRICS.values()):
        where = gpu
        for key in metric.path[:-1]:
            where = where.setdefault(key, {})
        where[metric.path[-1]] = 100.0 + i
    run = {
        "label": "run0",
        "started_at": "2026-11-28T10:00:00+00:00",
        "duration_s": 1.0,
        "load": {"pattern": "constant"},
        "workload": {"name": "synthetic"},
        "counts": {"issued": 4, "completed": 4},
        "metrics": {"ttft": {"p50": 20.0}, "error_rate": 0.0},
        "stages": [
            {"index": 0, "metrics": {"ttft": {"p50": 19.0}}},
            {"index": 1, "metrics": {"ttft": {"p50": 25.0}}},
        ],
        "gpu": gpu,
    }
    test = {"nodeid": "t.py::test_gpu", "outcome": "passed", "runs": [run], "slos": []}
    return {"endpoint": {"model": "m"}, "tests": [test], "session": {"exitstatus": 0}}


def test_the_library_logs_to_a_store_without_pytest_or_server(store: str, tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text("{}")
    (tmp_path / "leaky.md").write_text(f"key: {SECRET}")  # never so: the reports are redacted
    done = export_report(
        gpu_report(),
        [tmp_path / "r.json", tmp_path / "missing.html", tmp_path / "leaky.md"],
        tracking_uri=store,
        experiment="library",
        secrets=[SECRET, None],
    )
    assert done.status is ExportStatus.LOGGED, done.error
    assert done.child_runs == 1 and done.artefacts == [str(tmp_path / "r.json")]
    assert done.skipped == [
        f"{tmp_path / 'missing.html'}: not a file",
        f"{tmp_path / 'leaky.md'}: it holds the API key",
    ]
    assert done.parent_url == ""  # a store, not a server: no page to link
    client = MlflowClient(tracking_uri=store)
    (child,) = client.search_runs(
        [done.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{done.parent_run_id}'"
    )
    for i, name in enumerate(GPU_METRICS):
        assert child.data.metrics[name] == 100.0 + i
    history = client.get_metric_history(child.info.run_id, "stage.ttft.p50")
    assert sorted((m.step, m.value) for m in history) == [(0, 19.0), (1, 25.0)]


def test_a_uri_mlflow_cannot_use_is_a_failure_said_not_raised() -> None:
    done = export_report(gpu_report(), tracking_uri="nosuchscheme://x")
    assert done.status is ExportStatus.FAILED and done.error


def test_the_command_line_logs_a_json_report(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "llmperf.json"
    report.write_text(json.dumps(gpu_report()))
    status = main([str(report), "--tracking-uri", store, "--experiment", "cli"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"with 1 test run(s) and 1 report(s) logged to {store} (experiment 'cli')" in out
    client = MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name("cli")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert [f.path for f in client.list_artifacts(parent.info.run_id)] == ["llmperf.json"]


def test_the_command_line_without_a_uri_or_a_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    report = tmp_path / "llmperf.json"
    report.write_text(json.dumps(gpu_report()))
    assert main([str(report)]) == 0  # a fork's pull request: no secret, nothing to do
    assert "$MLFLOW_TRACKING_URI is not set; nothing exported" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.json")]) == 2
    assert main([str(report), "--tracking-uri", refused_url()]) == 1
    assert "failed: " in capsys.readouterr().out


def test_a_bare_path_is_a_usage_error_before_any_load(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain_path=PLAIN)
    result = pytester.runpytest("--llm-mlflow=./mlruns")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # at configure: no test ran
    result.stderr.fnmatch_lines(
        ["ERROR: pytest-llmperf: --llm-mlflow: expected a tracking URI * got './mlruns'"]
    )
