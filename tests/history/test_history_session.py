"""Whole pytest sessions with --llm-history, the session record, the tag, the CLI.

Every session and CLI test takes the ``target`` fixture: it runs on a SQLite file and
on the throwaway PostgreSQL server alike (conftest.py)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from history_workers import BREAK_STORE, run_record, session_record

from pytest_llmperf.history import HistoryStore, build_session_record
from pytest_llmperf.history.backends import target_label
from pytest_llmperf.history.cli import main
from pytest_llmperf.history.export import export_csv, export_json
from pytest_llmperf.history.provenance import git_tag, session_tag
from pytest_llmperf.history.records import SIZE_KEYS, comparison_key
from pytest_llmperf.reports.session_data import SessionData

FAST = (
    '@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests={n})\n'
    '@pytest.mark.llm_load("concurrency", concurrency=8)\n'
)
SUITE = f"""
import pytest

{FAST.format(n=12)}async def test_two_runs(llm_loadgen):
    await llm_loadgen.run()
    await llm_loadgen.run()

{FAST.format(n=8)}async def test_one_run(llm_loadgen):
    await llm_loadgen.run()
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_llmperf.history ARGS``, a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_llmperf.history", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def cli_here(*args: str) -> subprocess.CompletedProcess[str]:
    """The same command run in this process (its ``main``, output captured): the many
    calls of the CLI tests without an interpreter start each."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def test_three_sessions_then_list_shows_all_three_runs_of_each_test(
    pytester: pytest.Pytester, target: str
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    for i in range(3):
        result = pytester.runpytest("-p", "no:cacheprovider", f"--llm-history={target}")
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines(
            [f"llmperf history: appended session {i + 1} to {target_label(target)}"]
        )
    listed = cli(target, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()[1:]
    for test, runs in (("test_suite.py::test_two_runs", 2), ("test_suite.py::test_one_run", 1)):
        mine = [line.split() for line in lines if f" {test} " in line]
        assert len(mine) == 3 * runs
        assert sorted({cells[0] for cells in mine}) == ["1", "2", "3"]
        assert all(cells[-3] == ("12/12" if runs == 2 else "8/8") for cells in mine)
    with HistoryStore.open(target) as store:
        runs = store.runs("test_suite.py::test_two_runs")
        assert {r.label for r in runs} == {"run0", "run1"} and len({r.key for r in runs}) == 1
        assert len(store.comparable("test_suite.py::test_two_runs", runs[0].key, 5)) == 5
        (info, *_) = store.sessions()
        assert info.endpoint["model"] and info.endpoint["server_version"]
        assert info.machine["cpu_count"] and info.options["scale"] == 1.0


def test_under_xdist_the_controller_appends_one_session_with_every_worker_s_runs(
    pytester: pytest.Pytester, target: str
) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", f"--llm-history={target}"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"llmperf history: appended session 1 to {target_label(target)}"])
    with HistoryStore.open(target) as store:
        (info,) = store.sessions()
        assert info.run_count == 3 and len(store.tests()) == 2


def test_a_history_that_breaks_mid_session_keeps_the_other_outputs_and_fails_the_exit_status(
    pytester: pytest.Pytester, target: str
) -> None:
    # the store passes the configure-time check; a test then gives it to another program
    pytester.makepyfile(test_suite=SUITE + BREAK_STORE.format(target=target))
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        f"--llm-history={target}",
        "--llm-json=out.json",
        "--junitxml=junit.xml",
        "--llm-baseline-save=base.json",
    )
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(
        [f"llmperf history: {target_label(target)}: not a pytest-llmperf history*invoices*"]
    )
    for name in ("out.json", "junit.xml", "base.json"):
        assert (pytester.path / name).stat().st_size > 0, name
    assert json.loads((pytester.path / "out.json").read_text())["tests"]


def test_the_tag_option_is_stored(pytester: pytest.Pytester, target: str) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        f"--llm-history={target}",
        "--llm-history-tag=release-1.2",
        "-k",
        "one_run",
    )
    result.assert_outcomes(passed=1, deselected=1)
    with HistoryStore.open(target) as store:
        assert [s.tag for s in store.sessions()] == ["release-1.2"]


def test_credentials_in_the_endpoint_url_are_never_stored(tmp_path: Path) -> None:
    data = SessionData()
    record = run_record("t::a", 10.0)
    data.add(
        "t::a",
        "passed",
        {
            "endpoint": {
                "url": "http://alice:hunter22@llm.example:8000/v1",
                "model": "m",
                "api": "chat",
                "server_software": "proxy (http://bob:pa55word@inner:1)",
            },
            "runs": [
                {
                    "label": "run0",
                    "load": record.load,
                    "workload": record.workload,
                    "counts": record.counts,
                    "metrics": record.metrics,
                }
            ],
            "states": [record.state],
        },
    )
    session = build_session_record(
        data.measured_tests(),
        endpoint={"url": "https://carol:letmein1@llm.example/v1", "model": "m"},
        options={"api_key_env": "OPENAI_API_KEY"},
        started_at="2026-01-01T00:00:00+00:00",
        tag="x",
    )
    path = tmp_path / "h.sqlite"
    with HistoryStore.open(str(path)) as store:
        store.append_session(session)
        (info,) = store.sessions()
    assert info.endpoint["url"] == "https://***@llm.example/v1"
    raw = path.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("h.sqlite-*"))
    for secret in (b"hunter22", b"pa55word", b"letmein1", b"alice", b"carol"):
        assert secret not in raw


def test_the_comparison_key_ignores_size_and_follows_model_load_and_workload() -> None:
    load = {"pattern": "poisson", "rate": 5}
    work = {"name": "synthetic", "input_tokens": 16, "requests": 100}
    key = comparison_key("m", "chat", load, work)
    assert len(key) == 16 and key == comparison_key("m", "chat", dict(load), dict(work))
    assert "requests" in SIZE_KEYS
    assert comparison_key("m", "chat", load, {**work, "requests": 7, "duration_s": 3}) == key
    assert comparison_key("other", "chat", load, work) != key
    assert comparison_key("m", "chat", {**load, "rate": 6}, work) != key
    assert comparison_key("m", "chat", load, {**work, "input_tokens": 17}) != key


def test_the_tag_comes_from_the_option_the_ci_or_git(tmp_path: Path) -> None:
    assert session_tag("  mine ", tmp_path, {"GITHUB_SHA": "a" * 40}) == "mine"
    github = {"GITHUB_SHA": "0123456789abcdef0123", "GITHUB_REF_NAME": "main"}
    assert session_tag(None, tmp_path, github) == "main@0123456789ab"
    gitlab = {"CI_COMMIT_SHA": "fedcba9876543210", "CI_COMMIT_REF_NAME": "mr-7"}
    assert session_tag(None, tmp_path, gitlab) == "mr-7@fedcba987654"
    assert session_tag(None, tmp_path, {"BUILDKITE_COMMIT": "abc"}) == "abc"
    assert session_tag(None, tmp_path, {}) == ""  # not a checkout
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q", "-b", "feature"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert session_tag(None, tmp_path, {}) == f"feature@{head.strip()[:12]}"
    assert git_tag(tmp_path / "missing") == ""


def _filled(target: str) -> None:
    with HistoryStore.open(target) as store:
        store.append_session(
            session_record("a", [run_record("t::a", 10.0), run_record("t::b", 5.0)])
        )
        store.append_session(session_record("b", [run_record("t::a", 11.0)]))


def test_export_json_and_csv_round_trip(target: str) -> None:
    _filled(target)
    with HistoryStore.open(target) as store:
        runs = store.runs()
        document = json.loads(export_json(store))
        assert document["schema_version"] == store.schema_version
        exported = [(s["id"], s["tag"], r) for s in document["sessions"] for r in s["runs"]]
        assert len(exported) == len(runs) == 3
        for run, (sid, tag, back) in zip(runs, exported, strict=True):
            assert (sid, tag) == (run.session_id, run.tag)
            assert (back["test"], back["label"], back["key"]) == (run.test, run.label, run.key)
            assert back["metrics"] == run.metrics and back["counts"] == run.counts
            assert back["state"] == run.state() and back["load"] == run.load
        rows = list(csv.DictReader(io.StringIO(export_csv(store))))
        assert len(rows) == 3
        for run, row in zip(runs, rows, strict=True):
            assert int(row["session_id"]) == run.session_id and row["key"] == run.key
            assert int(row["completed"]) == run.counts["completed"]
            assert row["connection_retries"] == str(run.counts.get("connection_retries", ""))
            assert float(row["ttft.p99"]) == run.metrics["ttft"]["p99"]
            assert float(row["error_rate"]) == run.metrics["error_rate"]
            assert row["e2e.p50"] == ""  # an empty histogram: no value


def test_cli_list_show_trend_detect_export_and_errors(target: str, tmp_path: Path) -> None:
    _filled(target)
    listed = cli_here(target, "list", "--test", "t::b")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 2
    assert "t::b" in listed.stdout and "50/50" in listed.stdout
    shown = cli_here(target, "show", "2")
    assert shown.returncode == 0 and "session 2:" in shown.stdout and "t::a [run0]" in shown.stdout
    out = tmp_path / "all.csv"
    exported = cli_here(target, "export", "--format", "csv", "--out", str(out))
    assert exported.returncode == 0 and len(out.read_text().splitlines()) == 4
    assert json.loads(cli_here(target, "export").stdout)["sessions"][1]["tag"] == "b"
    trend = cli_here(target, "trend", "t::a", "ttft", "--stat", "p99")
    assert trend.returncode == 0, trend.stderr
    assert "t::a · TTFT p99 (ms)" in trend.stdout and " a " in trend.stdout
    page = cli_here(target, "trend", "t::a", "ttft", "--html")
    assert page.returncode == 0 and page.stdout.startswith("<!DOCTYPE html>")
    detected = cli_here(target, "detect", "--test", "t::a")
    assert detected.returncode == 0, detected.stderr
    assert (
        detected.stdout.startswith("t::a [key ") and "no change point in 2 runs" in detected.stdout
    )
    for args, message in (
        (("show", "7"), "no session 7"),
        (("list", "--test", "t::zz"), "no test 't::zz'"),
        (("trend", "t::zz", "ttft"), ""),
    ):
        failed = cli_here(target, *args)
        assert failed.returncode == 2 and message in failed.stderr
    bad = cli_here(target, "export", "--format", "xml")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_cli_trend_and_detect_take_the_statistic_in_the_metric_as_an_slo_does(
    target: str,
) -> None:
    _filled(target)
    by_option = cli_here(target, "trend", "t::a", "ttft", "--stat", "p99")
    assert by_option.returncode == 0 and "TTFT p99" in by_option.stdout
    for spelled in (("ttft.p99",), ("ttft.p99", "--stat", "p99")):
        same = cli_here(target, "trend", "t::a", *spelled)
        assert (same.returncode, same.stdout) == (0, by_option.stdout), same.stderr
    assert "TTFT p50" in cli_here(target, "trend", "t::a", "ttft").stdout  # the default
    detected = cli_here(target, "detect", "--metric", "ttft", "--stat", "p99")
    assert detected.returncode == 0, detected.stderr
    assert cli_here(target, "detect", "--metric", "ttft.p99").stdout == detected.stdout
    both = cli_here(target, "trend", "t::a", "ttft.p99", "--stat", "p50")
    assert both.returncode == 2 and both.stdout == ""
    assert both.stderr == (
        "llmperf-history: 'ttft.p99' names the statistic 'p99' and --stat 'p50': give one\n"
    )


def test_cli_on_a_missing_file_or_an_unreachable_server_exits_2(tmp_path: Path) -> None:
    missing = cli_here(str(tmp_path / "none.sqlite"), "list")
    assert missing.returncode == 2 and "no history file here" in missing.stderr
    assert not (tmp_path / "none.sqlite").exists()
    pytest.importorskip("psycopg")
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"postgresql://me:s3cret@127.0.0.1:{closed.getsockname()[1]}/h"
        down = cli(url, "list")
    assert down.returncode == 2 and "cannot connect" in down.stderr
    assert "postgresql://***@127.0.0.1" in down.stderr and "s3cret" not in down.stderr
