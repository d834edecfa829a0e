"""A run's steady-state window in every report: JSON ``runs[].steady``, one terminal and
one Markdown line, a green band on the HTML time plot; an empty window reads as no
number, never a zero."""

from __future__ import annotations

import json
from typing import Any

import pytest
from synthetic_session import ENDPOINT

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.reports.html import build_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.markdown import build_markdown
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.terminal import summary_lines
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.verdicts import evaluate_runs
from pytest_llmperf.specs.slo import parse_slo

S = 1_000_000_000
BASE = 1_000 * S
NODEID = "tests/test_load.py::test_steady"


def done(sched_s: float) -> RequestRecord:
    t = BASE + round(sched_s * S)
    r = RequestRecord(index=0, t_sched=t, t_send=t, t_first=t + S // 10)
    r.t_last = r.t_end = t + S // 2
    r.token_events = r.usage_completion_tokens = 10
    return r


def steady_run(open_at_s: float | None) -> RunResult:
    """One request a second for 20 s; the window opens at ``open_at_s`` (None: never)."""
    acc = MetricsAccumulator()
    window = acc.declare_steady()
    if open_at_s is None:
        window.open_at(BASE + 100 * S)  # after the last send: nothing in it
    for t in range(20):
        if open_at_s is not None and t == open_at_s:
            window.open_at(BASE + t * S)
        acc.add(done(t))
    return RunResult(
        workload={"name": "synthetic"},
        load={"pattern": "constant", "rate": 1.0, "steady": "auto"},
        endpoint={},
        accumulator=acc,
        label="run0",
    )


def session(run: RunResult, slos: list[str]) -> tuple[SessionData, dict[str, Any]]:
    verdicts = evaluate_runs([parse_slo(e) for e in slos], [run])
    data = SessionData()
    data.add(
        NODEID,
        "passed",
        {
            "endpoint": ENDPOINT,
            "runs": [run.to_dict()],
            "slos": [v.to_dict() for v in verdicts],
            "states": [run.accumulator.to_state()],
        },
    )
    report = build_report(data, endpoint=ENDPOINT, session={"exitstatus": 0, "options": {}})
    return data, report


def test_the_window_is_in_the_json_terminal_markdown_and_time_plot() -> None:
    data, report = session(steady_run(5), [])
    window = report["tests"][0]["runs"][0]["steady"]
    assert (window["start_s"], window["end_s"], window["requests_in"]) == (5.0, 19.0, 15)
    assert (window["out_ramp"], window["state"]) == (5, "open")
    # 15 requests of 10 tokens started in the 14 s window
    metrics = report["tests"][0]["runs"][0]["metrics"]
    assert metrics["output_throughput"] == round(150 / 14, 6)
    lines = [x for x in summary_lines(data, []) if "steady 5.0-19.0 s" in x]
    assert len(lines) == 1 and "15 in, 5 out (ramp 5, drain 0)" in lines[0], lines
    assert "10.71 tok/s" in lines[0] and "whole run" in lines[0]
    markdown = build_markdown(report)
    assert "**Steady-state windows**" in markdown and "steady 5.0-19.0 s" in markdown
    html = build_html_report(report, data)
    assert html.count('data-band="steady"') == 2  # both throughput-over-time plots


def test_an_empty_window_reads_as_no_number_in_every_report() -> None:
    data, report = session(steady_run(None), ["output_throughput > 1 tok/s"])
    run = report["tests"][0]["runs"][0]
    assert run["metrics"]["output_throughput"] is None
    assert run["steady"]["state"] == "empty" and run["steady"]["requests_out"] == 20
    (verdict,) = report["tests"][0]["slos"]
    assert verdict["verdict"] == "inconclusive" and "no steady window" in verdict["reason"]
    text = "\n".join(summary_lines(data, []))
    assert "no steady window" in text and "- tok/s" not in text  # judged: no brief line
    assert "no steady window" in build_markdown(report)
    assert build_html_report(report, data)  # renders, with no band


STEADY_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, seed=1)
@pytest.mark.llm_load("constant", stages=[
    {"rate": 10, "duration": 1},
    {"rate": 40, "duration": 1.5},
], steady="auto")
@pytest.mark.llm_slo("request_throughput > 30 req/s", "ttft.p50 < 5s")
async def test_at_level(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=3)
@pytest.mark.llm_load("concurrency", concurrency=8, steady="auto")
@pytest.mark.llm_slo("output_throughput > 1 tok/s")
async def test_never_at_level(llm_loadgen):
    await llm_loadgen.run()
"""

BAD_STEADY = """
import pytest

@pytest.mark.llm_load("concurrency", concurrency=2, steady={"skip": 3})
async def test_bad(llm_loadgen):
    await llm_loadgen.run()
"""


def test_steady_from_the_marker_to_the_reports(pytester: pytest.Pytester) -> None:
    """The marker's steady= is checked at collection, decides the throughput verdict of a
    staged run once (its ramp stage would fail 30 req/s), and reaches the JSON; a run
    that never reached its level is inconclusive, with why (never a zero that passes)."""
    bad = pytester.makepyfile(test_bad=BAD_STEADY)
    refused = pytester.runpytest(bad)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        ["*test_bad: llm_load('concurrency'): steady does not take 'skip'*"]
    )
    good = pytester.makepyfile(test_good=STEADY_TEST)
    result = pytester.runpytest(good, "--llm-json=r.json", "--llm-markdown=s.md")
    result.assert_outcomes(passed=1, failed=1)  # an inconclusive gate fails by default
    result.stdout.fnmatch_lines(["*run0: steady 1.0-2.* s (*): * in, * out (ramp *, drain 0)*"])
    report = json.loads((pytester.path / "r.json").read_text())
    tests = {t["nodeid"].rpartition("::")[2]: t for t in report["tests"]}
    level = tests["test_at_level"]
    (run,) = level["runs"]
    assert run["load"]["steady"] == "auto" and run["steady"]["state"] == "open"
    assert run["steady"]["start_s"] == pytest.approx(1.0, abs=0.15)
    throughput = [s for s in level["slos"] if s["expr"].startswith("request_throughput")]
    assert [(s["stage"], s["verdict"]) for s in throughput] == [(None, "pass")], throughput
    never = tests["test_never_at_level"]
    (verdict,) = never["slos"]
    assert verdict["verdict"] == "inconclusive" and "no steady window" in verdict["reason"]
    assert never["runs"][0]["metrics"]["output_throughput"] is None
    assert "**Steady-state windows**" in (pytester.path / "s.md").read_text()
