"""``--llm-mlflow`` end to end: a real pytest session against the embedded simulator
logs to a real MLflow tracking server (``mlflow_server``), and everything is read back
through MLflow's own client.

One session for the module (a pytest subprocess: two tests, one with two stages and one
whose SLO fails), with the JSON, HTML and Markdown reports and an API key in the
environment; each test reads one side of what reached the server and compares it with
the session's own JSON report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from mlflow.entities import Run
from mlflow_server import MlflowServer

from pytest_llmperf.export.mlflow_names import slo_key

SECRET = "sk-mlflow-DO-NOT-LEAK-7731"
EXPERIMENT = "llmperf-session-test"

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=12, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=2)
@pytest.mark.llm_slo("ttft.p50 < 1us", "error_rate < 1%")
async def test_misses(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, seed=2)
@pytest.mark.llm_load("constant", stages=[
    {"rate": 20, "duration": 0.5},
    {"rate": 40, "duration": 0.5},
])
@pytest.mark.llm_slo("ttft.p50 < 5s")
async def test_staged(llm_loadgen):
    await llm_loadgen.run()
"""


@dataclass(frozen=True)
class Session:
    result: pytest.RunResult
    path: Path
    report: dict[str, Any]
    client: MlflowClient
    parent: Run
    children: dict[str, Run]  # by test name

    def json_run(self, name: str) -> dict[str, Any]:
        (test,) = [t for t in self.report["tests"] if t["nodeid"].endswith(f"::{name}")]
        (run,) = test["runs"]
        return dict(run)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory, mlflow_server: MlflowServer) -> Session:
    path = tmp_path_factory.mktemp("mlflow_session")
    (path / "test_suite.py").write_text(SUITE)
    (path / "pytest.ini").write_text("[pytest]\n")  # this folder is the rootdir
    env = {
        **os.environ,
        "OPENAI_API_KEY": SECRET,
        "GITHUB_SHA": "0123456789abcdef",
        "GITHUB_HEAD_REF": "feature/faster",
        "GITHUB_REPOSITORY": "acme/serving",
        "GITHUB_RUN_ID": "42",
        "PYTEST_ADDOPTS": "-p no:hypothesispytest",
    }
    env.pop("GITHUB_STEP_SUMMARY", None)
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--llm-endpoint=sim:fixed",
            "--llm-json=r.json",
            "--llm-html=r.html",
            "--llm-markdown=r.md",
            f"--llm-mlflow={mlflow_server.url}",
            f"--llm-mlflow-experiment={EXPERIMENT}",
        ],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    result = pytest.RunResult(
        done.returncode,
        done.stdout.splitlines(),
        done.stderr.splitlines(),
        time.monotonic() - start,
    )
    client = MlflowClient(tracking_uri=mlflow_server.url)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None, result.stdout.str()
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1, [r.info.run_name for r in runs]
    children = {r.data.tags["llmperf.nodeid"].split("::")[-1]: r for r in runs if r not in parents}
    report = json.loads((path / "r.json").read_text())
    return Session(result, path, report, client, parents[0], children)


def test_one_parent_run_per_session_and_one_child_per_test_run(session: Session) -> None:
    session.result.assert_outcomes(passed=1, failed=1)
    parent = session.parent
    assert set(session.children) == {"test_misses", "test_staged"}
    for child in session.children.values():
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.data.tags["llmperf.run_label"] == "run0"
    # a failed test's run and the failed session are FAILED, MLflow's red
    assert session.children["test_misses"].info.status == "FAILED"
    assert session.children["test_staged"].info.status == "FINISHED"
    assert parent.info.status == "FAILED"
    assert parent.info.run_name.startswith("llmperf 20")
    tags = parent.data.tags
    assert tags["llmperf.exitstatus"] == "1"
    assert (tags["llmperf.tests.passed"], tags["llmperf.tests.failed"]) == ("1", "1")
    assert tags["llmperf.model"] == "sim-fixed" and tags["llmperf.runs"] == "2"
    assert tags["llmperf.fingerprint"] == session.children["test_staged"].data.params["fingerprint"]
    # the source, from the CI job's variables
    assert tags["mlflow.source.git.commit"] == "0123456789abcdef"
    assert tags["mlflow.source.git.branch"] == "feature/faster"
    assert tags["llmperf.ci.job_url"] == "https://github.com/acme/serving/actions/runs/42"
    # one line and a link for the session, not MLflow's two per run (its own are off)
    assert "View run" not in session.result.stdout.str()
    session.result.stdout.fnmatch_lines(
        [
            f"llmperf MLflow: session run {parent.info.run_id} with 2 test run(s) and 3 "
            f"report(s) logged to http://127.0.0.1:* (experiment '{EXPERIMENT}')",
            f"  http://127.0.0.1:*/#/experiments/*/runs/{parent.info.run_id}",
        ]
    )


def test_the_parameters_name_the_workload_load_endpoint_and_test(session: Session) -> None:
    params = session.children["test_staged"].data.params
    assert params["nodeid"] == "test_suite.py::test_staged"
    assert params["run_label"] == "run0"
    assert params["model"] == "sim-fixed" and params["api"] == "chat"
    assert params["endpoint"] == session.report["endpoint"]["url"]
    assert params["workload.name"] == "synthetic" and params["workload.seed"] == "2"
    assert params["load.pattern"] == "constant"
    assert json.loads(params["load.stages"]) == [
        {"duration_s": 0.5, "rate": 20.0},
        {"duration_s": 0.5, "rate": 40.0},
    ]
    assert json.loads(params["fingerprint.server"])["family"] == "sim"
    assert session.children["test_misses"].data.params["load.concurrency"] == "2"


def test_every_reported_figure_is_a_metric_with_the_reports_value(session: Session) -> None:
    for name, child in session.children.items():
        run = session.json_run(name)
        metrics = child.data.metrics
        for stat in ("p50", "p90", "p99", "mean", "max"):
            for metric in ("ttft", "tpot", "itl", "e2e"):
                assert metrics[f"{metric}.{stat}"] == pytest.approx(run["metrics"][metric][stat])
        for rate in ("request_throughput", "output_throughput", "error_rate", "goodput"):
            assert metrics[rate] == pytest.approx(run["metrics"][rate])
        assert metrics["counts.issued"] == run["counts"]["issued"]
        assert metrics["counts.completed"] == run["counts"]["completed"]
        server = run["server_metrics"]["metrics"]
        assert metrics["server.ttft.p50"] == pytest.approx(server["server.ttft"]["p50"])
        assert metrics["server.preemptions"] == server["server.preemptions"]["value"]
    assert session.children["test_misses"].data.metrics["counts.issued"] == 12


def test_each_stage_is_a_step_of_the_stage_metrics(session: Session) -> None:
    child = session.children["test_staged"]
    stages = session.json_run("test_staged")["stages"]
    history = session.client.get_metric_history(child.info.run_id, "stage.ttft.p50")
    assert sorted((m.step, m.value) for m in history) == [
        (s["index"], pytest.approx(s["metrics"]["ttft"]["p50"])) for s in stages
    ]
    planned = session.client.get_metric_history(child.info.run_id, "stage.planned_rate")
    assert sorted((m.step, m.value) for m in planned) == [(0, 20.0), (1, 40.0)]
    issued = session.client.get_metric_history(child.info.run_id, "stage.counts.issued")
    assert [m.value for m in sorted(issued, key=lambda m: m.step)] == [
        s["counts"]["issued"] for s in stages
    ]
    # the whole run's figure is one value, not mixed with the stages'
    assert len(session.client.get_metric_history(child.info.run_id, "ttft.p50")) == 1


def test_the_verdicts_are_tags_with_their_observed_values(session: Session) -> None:
    misses = session.children["test_misses"].data.tags
    assert misses["slo.ttft.p50 lt 1us"] == "fail"
    assert misses["slo.ttft.p50 lt 1us.observed"].endswith(" ms")
    assert misses["slo.error_rate lt 1pct"] == "pass"
    assert misses["slo.error_rate lt 1pct.observed"] == "0%"
    staged = session.children["test_staged"].data.tags
    assert (staged["slo.ttft.p50 lt 5s.stage0"], staged["slo.ttft.p50 lt 5s.stage1"]) == (
        "pass",
        "pass",
    )
    # every verdict of the JSON report, and no other, is a tag of its run
    for test in session.report["tests"]:
        tags = session.children[test["nodeid"].split("::")[-1]].data.tags
        expected = {
            slo_key(v["expr"], stage=v.get("stage"), model=v.get("model")): v["verdict"]
            for v in test["slos"]
        }
        assert {
            k: v for k, v in tags.items() if k.startswith("slo.") and not k.endswith(".observed")
        } == expected


def test_the_reports_are_artefacts_of_the_parent_run_and_no_key_is_anywhere(
    session: Session, tmp_path: Path
) -> None:
    run_id = session.parent.info.run_id
    listed = {f.path for f in session.client.list_artifacts(run_id)}
    assert listed == {"r.json", "r.html", "r.md"}
    local = Path(session.client.download_artifacts(run_id, "r.json", str(tmp_path)))
    assert local.read_bytes() == (session.path / "r.json").read_bytes()
    for run in (session.parent, *session.children.values()):
        for text in (*run.data.params.values(), *run.data.tags.values(), run.info.run_name):
            assert SECRET not in text
    for name in listed:
        assert SECRET not in (session.path / name).read_text()
    assert SECRET not in session.result.stdout.str() + session.result.stderr.str()
