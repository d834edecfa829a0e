"""Blank replies are shown wherever error counts are: every report of one session agrees.

One session (a pytest of its own) on a ``fixed`` simulator whose replies are blank
about one time in three (``blank_reply_rate``: generated tokens that decode to no
visible text, the usage counting them) writes every report. Each one shows the run's
blank replies as the JSON counts them (``counts.blank``, ``metrics.blank_rate``): the
terminal's summary line and session line, JUnit's properties, the HTML's counts table,
the Markdown's ``ok/issued`` cell and summary line, the history's stored counts and its
CSV export; a ``blank_rate`` SLO is judged on them.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from test_reports_agree import read_tables

from pytest_llmperf.history.export import export_csv
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.sim import start_sim_process

SESSION = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=6, requests=30, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_no_slo(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=6, requests=30, seed=2)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("blank_rate < 5%", "error_rate < 1%")
async def test_gated(llm_loadgen):
    await llm_loadgen.run()
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("blank")
    (where / "pytest.ini").write_text("[pytest]\n")
    (where / "test_session.py").write_text(SESSION)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_"))}
    env["COLUMNS"] = "80"
    sim = start_sim_process(
        "fixed", overrides={"ttft_ms": 2, "itl_ms": 1, "blank_reply_rate": 0.35}
    )
    try:
        args = [
            f"--llm-endpoint={sim.url}",
            "--llm-json=out/r.json",
            "--llm-html=out/r.html",
            "--junitxml=out/j.xml",
            "--llm-markdown=out/r.md",
            "--llm-history=out/h.db",
        ]
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        sim.stop()
    out = where / "out"
    report = json.loads((out / "r.json").read_text())
    runs = {t["nodeid"].rsplit("::", 1)[1]: t["runs"][0] for t in report["tests"]}
    return {"done": done, "out": out, "report": report, "runs": runs}


def test_the_json_counts_blank_replies_as_completed(session: dict[str, Any]) -> None:
    done = session["done"]
    assert done.returncode == 1, done.stdout + done.stderr  # the blank_rate SLO fails
    for name, run in session["runs"].items():
        counts = run["counts"]
        assert counts["completed"] == counts["issued"] == 30 and counts["failed"] == 0, name
        assert 0 < counts["blank"] < 30, (name, counts)  # seeded: some of each
        assert run["metrics"]["blank_rate"] == round(counts["blank"] / 30, 6)
    [gated] = [t for t in session["report"]["tests"] if t["nodeid"].endswith("test_gated")]
    verdicts = {v["expr"]: v for v in gated["slos"]}
    blank = session["runs"]["test_gated"]["counts"]["blank"]
    assert verdicts["blank_rate < 5%"]["verdict"] == "fail"
    assert verdicts["blank_rate < 5%"]["observed"] == round(blank / 30, 4)
    assert verdicts["error_rate < 1%"]["verdict"] == "pass"


def test_the_terminal_shows_them_beside_the_errors(session: dict[str, Any]) -> None:
    stdout = " ".join(session["done"].stdout.split())  # the summary wraps at 80 columns
    counts = session["runs"]["test_no_slo"]["counts"]
    assert f"errors 0.00%, blank {counts['blank']} ({counts['blank'] / 30 * 100:.2f}%)" in stdout
    total = sum(r["counts"]["blank"] for r in session["runs"].values())
    assert "60/60 ok" in stdout and f"blank {total} ({total / 60 * 100:.2f}%)" in stdout
    assert "completed replies were blank" not in stdout  # not all of them: no warning


def test_junit_markdown_and_html_show_them(session: dict[str, Any]) -> None:
    out: Path = session["out"]
    runs = session["runs"]
    suite = next(ET.parse(out / "j.xml").getroot().iter("testsuite"))
    props = {p.get("name") or "": p.get("value") or "" for p in suite.iter("property")}
    markdown = (out / "r.md").read_text()
    tables = read_tables((out / "r.html").read_text())
    html_cells = [
        record["blank"] for t in tables if "issued" in t.header() for record in t.records()
    ]
    for name, run in runs.items():
        blank = run["counts"]["blank"]
        mine = {k.rsplit("::", 1)[1]: v for k, v in props.items() if f"::{name}::" in k}
        assert mine["llm_run[run0].blank"] == str(blank), mine
        assert mine["llm_run[blank_rate][run0]"] == f"{blank / 30 * 100:.2f}%"
        assert f"| 30/30 ({blank} blank) |" in markdown
        assert any(cell.startswith(f"{blank} (") for cell in html_cells), html_cells
    total = sum(r["counts"]["blank"] for r in runs.values())
    assert f"60/60 requests completed ({total} blank)" in markdown


def test_the_history_stores_and_exports_them(session: dict[str, Any]) -> None:
    with HistoryStore.open(str(session["out"] / "h.db"), create=False) as store:
        stored = {run.test.rsplit("::", 1)[1]: run for run in store.runs()}
        exported = list(csv.DictReader(io.StringIO(export_csv(store))))
    for name, run in session["runs"].items():
        assert stored[name].counts["blank"] == run["counts"]["blank"]
        assert stored[name].metrics["blank_rate"] == run["metrics"]["blank_rate"]
    assert sorted(row["blank"] for row in exported) == sorted(
        str(run["counts"]["blank"]) for run in session["runs"].values()
    )
