"""Staged runs in every report: the failure table, terminal, JUnit, JSON and HTML name the stage.

Unit tests build runs from request records (known stages, turns, queue
waits and cancellations); one run goes through the real simulator, and one
pytester session checks the whole path from markers to the failure message
and the JSON report.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import pytest_asyncio
from synthetic_session import ENDPOINT

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.reports import plots
from pytest_llmperf.reports.html import build_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.junit import junit_properties
from pytest_llmperf.reports.outcome import judge_test
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.table import stage_level, stage_mark, verdict_table
from pytest_llmperf.reports.terminal import MAX_STAGE_LINES, summary_lines
from pytest_llmperf.results.accumulator import TIMELINE_FIELDS, MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.sim import SimServer
from pytest_llmperf.slo.verdicts import SloVerdict, Verdict, evaluate_runs
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.specs.slo import parse_slo
from pytest_llmperf.specs.stages import Stage

MS = 1_000_000
BASE_NS = 10_000 * MS
NODEID = "tests/test_load.py::test_peak"


def record(
    index: int,
    t0: int,
    ttft_ms: float,
    *,
    stage: int = -1,
    turn: int = -1,
    queue_ms: float | None = None,
    tokens: int = 4,
) -> RequestRecord:
    r = RequestRecord(index=index, t_sched=t0, t_send=t0, t_first=t0 + int(ttft_ms * MS))
    r.stage, r.turn = stage, turn
    if queue_ms is not None:
        r.queue_wait_ns = int(queue_ms * MS)
        r.t_send = t0 + r.queue_wait_ns
    r.t_last = r.t_end = r.t_first + (tokens - 1) * 2 * MS
    r.token_events = tokens
    r.gaps_ns = [2 * MS] * (tokens - 1)
    r.usage_completion_tokens = tokens
    return r


def staged_run(
    stages: Sequence[Stage],
    ttft_ms: Sequence[float],
    *,
    label: str = "run0",
    turns: int = 0,
    queue_ms: float | None = None,
    cancelled: int = 0,
) -> RunResult:
    """Each stage's planned requests at its rate, TTFT ``ttft_ms[k]``; ``turns`` > 0 makes
    them sessions' turns, ``queue_ms`` a capped loop's wait, ``cancelled`` abandons some."""
    acc = MetricsAccumulator()
    start, index = 0.0, 0
    for k, stage in enumerate(stages):
        n = round((stage.mean_rate or 10.0) * stage.duration_s)
        for i in range(n):
            t0 = BASE_NS + int((start + i * stage.duration_s / n) * 1e9)
            turn = i % turns if turns else -1
            r = record(index, t0, ttft_ms[k] * (1 + turn if turns else 1), stage=k, turn=turn)
            if queue_ms is not None:
                r.queue_wait_ns = int(queue_ms * MS)
            if i < cancelled:
                r.cancelled = True
            acc.add(r)
            index += 1
        start += stage.duration_s
    return RunResult(
        workload={"name": "synthetic", "requests": index},
        load={"pattern": "constant", "stages": [s.describe() for s in stages]},
        endpoint={},
        accumulator=acc,
        self_check={"generator_bound": False, "reasons": []},
        label=label,
        stage_plan=tuple(stages),
        stage_sends=[acc.stages[k].issued for k in range(len(stages))],
    )


def session_of(results: Sequence[RunResult], slos: Sequence[str], outcome: str) -> SessionData:
    verdicts = evaluate_runs([parse_slo(e) for e in slos], results)
    data = SessionData()
    data.add(
        NODEID,
        outcome,
        {
            "endpoint": ENDPOINT,
            "runs": [r.to_dict() for r in results],
            "slos": [v.to_dict() for v in verdicts],
            "states": [r.accumulator.to_state() for r in results],
        },
    )
    return data


def two_stages() -> RunResult:
    return staged_run([Stage(5.0, rate=10.0), Stage(5.0, rate=40.0)], [50.0, 400.0])


# -- the failure table, JUnit, terminal -------------------------------------------------


def test_the_failure_message_names_the_stage() -> None:
    result = two_stages()
    slos = [parse_slo("ttft.p50 < 300ms")]
    verdicts = evaluate_runs(slos, [result])
    outcome = judge_test(NODEID, slos, [result], verdicts)
    assert outcome.kind is Verdict.FAIL
    lines = outcome.message.splitlines()
    assert re.fullmatch(
        r"SLO violated: ttft.p50 < 300ms \[stage 1: 40 req/s\], observed [\d.]+ ms", lines[0]
    ), lines[0]
    assert re.split(r"\s{2,}", lines[1]) == [
        "SLO",
        "run",
        "stage",
        "observed",
        "interval",
        "target",
        "verdict",
    ]
    assert re.split(r"\s{2,}", lines[3]) == [
        "ttft.p50 < 300ms",
        "run0",
        "0: 10 req/s",
        "50.0 ms",
        "[50.0 ms, 50.0 ms] at 99%",
        "< 300.0 ms",
        "✓ PASS",
    ]
    assert re.split(r"\s{2,}", lines[4])[2:] == [
        "1: 40 req/s",
        "400.0 ms",
        "[400.0 ms, 400.0 ms] at 99%",
        "< 300.0 ms",
        "✗ FAIL",
    ]


def test_a_reason_names_the_stage_and_an_unstaged_table_has_no_stage_column() -> None:
    staged = SloVerdict(
        "ttft.p99 < 300ms", 50.0, 300.0, "ms", "inconclusive", run="run0", samples=50,
        reason="p99 needs >= 1000 samples, run has 50", stage=1, stage_load="40 req/s",
    )  # fmt: skip
    plain = SloVerdict("ttft.p50 < 1s", 20.0, 1000.0, "ms", "pass", run="run1", samples=30)
    table = verdict_table([plain, staged])
    assert "  ttft.p99 < 300ms [run0] [stage 1: 40 req/s]: p99 needs >= 1000" in table
    assert re.split(r"\s{2,}", table.splitlines()[2]) == [
        "ttft.p50 < 1s",
        "run1",
        "20.0 ms",
        "< 1000.0 ms",
        "✓ PASS",
    ]  # an unstaged run's row in a staged table: an empty stage cell
    assert verdict_table([plain]).splitlines()[0].split() == [
        "SLO",
        "run",
        "observed",
        "target",
        "verdict",
    ]


def test_junit_properties_name_the_stage() -> None:
    verdicts = evaluate_runs([parse_slo("ttft.p50 < 300ms")], [two_stages()])
    props = dict(junit_properties(verdicts))
    assert props["llm_slo[ttft.p50 < 300ms][run0][stage 0].verdict"] == "pass"
    assert props["llm_slo[ttft.p50 < 300ms][run0][stage 1].verdict"] == "fail"
    assert props["llm_slo[ttft.p50 < 300ms][run0][stage 1].stage_load"] == "40 req/s"
    assert props["llm_slo[ttft.p50 < 300ms][run0][stage 1].samples"] == "200"
    plain = SloVerdict("ttft.p50 < 1s", 20.0, 1000.0, "ms", "pass", run="run0", samples=30)
    assert [name for name, _ in junit_properties([plain])] == [
        "llm_slo[ttft.p50 < 1s][run0].verdict",
        "llm_slo[ttft.p50 < 1s][run0].observed",
        "llm_slo[ttft.p50 < 1s][run0].target",
        "llm_slo[ttft.p50 < 1s][run0].samples",
    ]


def test_the_terminal_summary_has_a_line_per_stage() -> None:
    data = session_of([two_stages()], ["ttft.p50 < 300ms"], "failed")
    lines = summary_lines(data, [])
    assert lines[:3] == [
        f"{NODEID} [failed]",
        "  ✓ ttft.p50 < 300ms [run0] [stage 0: 10 req/s]: observed 50.0 ms, "
        "interval [50.0 ms, 50.0 ms] at 99%, target 300.0 ms, n=50",
        "  ✗ ttft.p50 < 300ms [run0] [stage 1: 40 req/s]: observed 400.0 ms, "
        "interval [400.0 ms, 400.0 ms] at 99%, target 300.0 ms, n=200",
    ]
    assert lines[3].startswith(
        "    run0 stage 0: 10 req/s planned (10.00 drawn), 10.00 req/s achieved; "
        "50/50 ok, ttft p99 50."
    )
    assert lines[3].endswith("; ✓ pass")
    assert lines[4].startswith(
        "    run0 stage 1: 40 req/s planned (40.00 drawn), 40.00 req/s achieved; 200/200"
    )
    assert lines[4].endswith("; ✗ fail")


def test_a_run_of_many_stages_lists_only_those_that_did_not_pass() -> None:
    n = MAX_STAGE_LINES + 5
    stages = [Stage(1.0, rate=20.0) for _ in range(n)]
    ttft = [900.0 if k == 7 else 50.0 for k in range(n)]
    data = session_of([staged_run(stages, ttft)], ["ttft.p50 < 300ms"], "failed")
    lines = summary_lines(data, [])
    assert lines[1].startswith("  ✗ ttft.p50 < 300ms [run0] [stage 7: 20 req/s]: observed 900")
    assert lines[2] == f"  ✓ {n - 1} more stage verdict(s) passed"
    assert lines[3].startswith("    run0 stage 7: 20 req/s planned") and lines[3].endswith("✗ fail")
    assert lines[4] == f"    run0: {n - 1} more stage(s) passed or were not judged"
    assert len(lines) == 5 + 2  # + the session group's two lines


def test_stage_cells() -> None:
    assert stage_level({"planned_rate": 12.5}) == "12.5 req/s"
    assert stage_level({"planned_rate": 10, "rate_from": 5.0, "rate_to": 15.0}) == "5→15 req/s"
    assert stage_level({"concurrency": 4}) == "concurrency 4"
    assert stage_mark([]) == ""
    assert stage_mark([{"verdict": "pass"}, {"verdict": "inconclusive"}]) == "inconclusive"
    assert stage_mark([{"verdict": "fail"}, {"verdict": "inconclusive"}]) == "fail"


# -- the per-second timeline ------------------------------------------------------------


def test_the_timeline_carries_per_second_latency_and_merges_exactly() -> None:
    acc = MetricsAccumulator()
    acc.add(record(0, BASE_NS, 100.0))  # window starts here; completes in second 0
    acc.add(record(1, BASE_NS + 100 * MS, 300.0))
    acc.add(record(2, BASE_NS + 1500 * MS, 40.0, tokens=1))  # second 1, no TPOT
    assert acc.timeline[0] == [2, 8, 400 * MS, 300 * MS, 4 * MS, 2]
    assert acc.timeline[1] == [1, 1, 40 * MS, 40 * MS, 0, 0]
    other = MetricsAccumulator()
    other.add(record(0, BASE_NS, 500.0))
    acc.merge(other)
    assert acc.timeline[0] == [3, 12, 900 * MS, 500 * MS, 6 * MS, 3]  # sums add, max is a max
    back = MetricsAccumulator.from_state(json.loads(json.dumps(acc.to_state())))
    assert back.timeline == acc.timeline
    assert len(TIMELINE_FIELDS) == 6
    series = plots.latency_timeline(acc)
    assert series["ttft mean"] == [(0.5, 300.0), (1.5, 40.0)]
    assert series["ttft max"] == [(0.5, 500.0), (1.5, 40.0)]
    assert series["tpot mean"] == [(0.5, 2.0)]


def test_a_state_from_before_the_latency_fields_still_reads() -> None:
    acc = MetricsAccumulator()
    acc.add(record(0, BASE_NS, 100.0))
    state = json.loads(json.dumps(acc.to_state()))
    state["timeline"] = {"0": [5, 20], "2": [1, 4]}  # what older states held
    old = MetricsAccumulator.from_state(state)
    assert old.timeline == {0: [5, 20, 0, 0, 0, 0], 2: [1, 4, 0, 0, 0, 0]}
    assert plots.latency_timeline(old) == {"ttft mean": [], "ttft max": [], "tpot mean": []}
    # throughput still plots; latency says it has no data rather than drawing zeros
    assert 'class="series"' in plots.throughput_plots(old)[0]
    assert all("no data" in svg for svg in plots.latency_timeline_plots(old))
    old.merge(acc)
    assert old.timeline[0] == [6, 24, 100 * MS, 100 * MS, 2 * MS, 1]


# -- HTML ------------------------------------------------------------------------------


def render(data: SessionData) -> tuple[dict[str, Any], str]:
    report = build_report(data, endpoint=ENDPOINT, session={"exitstatus": 1, "options": {}})
    return report, build_html_report(report, data)


def section(html: str, heading: str) -> str:
    """The HTML from ``<h4>heading</h4>`` to the next ``<h4>``."""
    start = html.index(f"<h4>{heading}</h4>")
    end = html.find("<h4>", start + 1)
    return html[start : end if end > 0 else len(html)]


def test_html_draws_stages_on_the_time_plots_and_tables_them() -> None:
    run = two_stages()
    report, html = render(session_of([run], ["ttft.p50 < 300ms"], "failed"))
    assert len(report["tests"][0]["runs"][0]["stages"]) == 2
    # the stage column in the SLO table
    slos = html[html.index('<table class="slos">') :]
    slos = slos[: slos.index("</table>")]
    assert "<th>stage</th>" in slos and "<td>1: 40 req/s</td>" in slos
    # the per-stage table: planned vs achieved, counts, percentiles, verdicts
    stages = section(html, "Stages")
    rows = re.findall(r"<tr><td class=\"num\">(\d)</td>.*?</tr>", stages, re.S)
    assert rows == ["0", "1"]
    assert "<td>10 req/s</td>" in stages and "<td>40 req/s</td>" in stages
    assert "200 / 200" in stages and "400.0 ms" in stages
    assert "✗ ttft.p50 &lt; 300ms" in stages and "✓ ttft.p50 &lt; 300ms" in stages
    # both stages drawn as labelled bands on each throughput and latency plot
    for heading in ("Throughput over time", "Latency over time"):
        svgs = section(html, heading).split("</svg>")[:-1]
        assert len(svgs) == 2, heading
        for svg in svgs:
            assert re.findall(r'class="band" data-band="([^"]+)"', svg) == ["10/s", "40/s"]
            assert svg.count('class="band-edge"') == 1
            assert "<title>stage 1: 40 req/s</title>" in svg
            assert 'class="series"' in svg
    # the latency plot shows the slow stage
    ttft_plot = section(html, "Latency over time").split("</svg>")[0]
    assert 'data-series="ttft mean"' in ttft_plot and 'data-series="ttft max"' in ttft_plot
    # the index badge says which stage failed
    assert 'title="ttft.p50 &lt; 300ms [stage 1: 40 req/s]"' in html


def test_html_shows_turns_queue_wait_and_cancelled_where_a_run_has_them() -> None:
    run = staged_run([Stage(5.0, rate=12.0)], [30.0], turns=3, queue_ms=25.0, cancelled=6)
    assert run.counts["cancelled"] == 6
    _, html = render(session_of([run], [], "passed"))
    turns = section(html, "Turns")
    cells = re.findall(r'<tr><td class="num">(\d+)</td><td class="num">(\d+) / (\d+)</td>', turns)
    assert cells == [("1", "18", "20"), ("2", "18", "20"), ("3", "18", "20")]
    assert "30.0 ms" in turns and "60.0 ms" in turns and "90.0 ms" in turns
    results = section(html, "Results")
    assert "<tr><th>queue_wait</th>" in results
    assert "<th>cancelled</th>" in results and '<td class="num">6</td>' in results
    assert "queue wait CDF (n=60)" in section(html, "Latency CDFs")
    # and a run without them shows none of it
    _, plain_html = render(session_of([two_stages()], [], "passed"))
    assert "<h4>Turns</h4>" not in plain_html
    assert "queue_wait" not in section(plain_html, "Results")
    assert "<th>cancelled</th>" not in plain_html
    assert "queue wait CDF" not in plain_html


# -- a real staged run, and a whole session ---------------------------------------------


@pytest_asyncio.fixture
async def fast_sim() -> AsyncIterator[Endpoint]:
    async with SimServer("fixed", ttft_ms=5.0, itl_ms=1.0) as sim:
        yield Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(10))


@pytest.mark.asyncio
async def test_a_real_staged_run_reports_each_stage(fast_sim: Endpoint) -> None:
    stages = [{"rate": 20, "duration": 1}, {"rate": 60, "duration": 1, "slo": "ttft.p50 < 1us"}]
    spec = RunSpec.from_markers(
        ("synthetic",), {"input_tokens": 16, "output_tokens": 4}, ("constant",), {"stages": stages}
    )
    result = await LoadRun(fast_sim, spec).execute()
    result.label = "run0"
    verdicts = evaluate_runs([parse_slo("error_rate < 1%")], [result])
    assert [(v.expr, v.stage, v.verdict) for v in verdicts] == [
        ("error_rate < 1%", 0, Verdict.PASS),
        ("error_rate < 1%", 1, Verdict.PASS),
        ("ttft.p50 < 1us", 1, Verdict.FAIL),
    ]
    assert [v.samples for v in verdicts] == [20, 60, 60]
    data = session_of([result], ["error_rate < 1%"], "failed")
    lines = summary_lines(data, [])
    assert any(line.startswith("    run0 stage 1: 60 req/s planned (") for line in lines), lines
    report, html = render(data)
    for heading in ("Throughput over time", "Latency over time"):
        for svg in section(html, heading).split("</svg>")[:-1]:
            assert svg.count('class="band"') == 2 and 'class="series"' in svg
    minimum = report["tests"][0]["runs"][0]["minimum_report"]
    assert "- Load Model: constant, 2 stage(s): 20 req/s for 1 s, 60 req/s for 1 s" in minimum


STAGED_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, seed=1)
@pytest.mark.llm_load("constant", stages=[
    {"rate": 20, "duration": 1},
    {"rate": 40, "duration": 1, "slo": "ttft.p50 < 1us"},
])
@pytest.mark.llm_slo("ttft.p50 < 5s", "error_rate < 1%")
async def test_two_stages(llm_loadgen):
    await llm_loadgen.run()
"""


def test_a_staged_test_fails_naming_the_stage(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(STAGED_TEST)
    result = pytester.runpytest("--llm-json=r.json", "--junitxml=j.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*SLO violated: ttft.p50 < 1us [[]stage 1: 40 req/s[]], observed * ms",
            "*SLO*run*stage*observed*target*verdict*",
            "*ttft.p50 < 5s*run0*0: 20 req/s*ms*< 5000.0 ms*PASS*",
            "*ttft.p50 < 1us*run0*1: 40 req/s*ms*< 0.001 ms*FAIL*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*✗ ttft.p50 < 1us [[]run0[]] [[]stage 1: 40 req/s[]]: observed*",
            "*run0 stage 1: 40 req/s planned (*drawn), *req/s achieved; "
            "40/40 ok, ttft p99 *; ✗ fail",
        ]
    )
    report = json.loads((pytester.path / "r.json").read_text())
    (test,) = report["tests"]
    (run,) = test["runs"]
    assert [s["planned_rate"] for s in run["stages"]] == [20, 40]
    assert [s["counts"]["issued"] for s in run["stages"]] == [20, 40]
    assert [(s["expr"], s["stage"], s["verdict"]) for s in test["slos"]] == [
        ("ttft.p50 < 5s", 0, "pass"),
        ("error_rate < 1%", 0, "pass"),
        ("ttft.p50 < 5s", 1, "pass"),
        ("error_rate < 1%", 1, "pass"),
        ("ttft.p50 < 1us", 1, "fail"),
    ]
    assert {s["run"] for s in test["slos"]} == {"run0"}
    junit = (pytester.path / "j.xml").read_text()
    assert "llm_slo[ttft.p50 &lt; 1us][run0][stage 1].verdict" in junit
