"""A run's conversations in every report: JSON ``runs[].conversations``, the terminal's
short block, JUnit properties, Markdown and HTML tables and plots — each read from the
same block, so the figures agree."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from synthetic_session import ENDPOINT

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.reports.html import build_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.junit import run_properties
from pytest_llmperf.reports.markdown import build_markdown
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.terminal import summary_lines
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.verdicts import evaluate_runs
from pytest_llmperf.specs.slo import parse_slo

MS = 1_000_000
NODEID = "tests/test_agent.py::test_agent"


def agent_run(n: int = 20, *, replicas: bool = True, cached: bool = True) -> RunResult:
    """``n`` conversations: a root call (turn 1), two parallel subagent calls, then root
    turns 2..7 back to back; TTFT 40 ms on turn 1 and 10 ms later, 50% cache on later
    turns. Each root call 100 ms, tool waits 50 ms."""
    acc = MetricsAccumulator()
    for c in range(n):
        t = (1 + c) * 100_000 * MS
        replica = ("r1" if c % 2 else "r2") if replicas else ""
        calls = [(t, 0, "", 40.0), (t + 150 * MS, 0, "a", 10.0), (t + 150 * MS, 0, "b", 10.0)]
        calls += [(t + (150 + 150 * k) * MS, k, "", 10.0) for k in range(1, 7)]
        for start, turn, agent, ttft_ms in calls:
            r = RequestRecord(index=0, t_sched=start, t_send=start)
            r.conversation, r.turn, r.agent, r.replica = c, turn, agent, replica
            r.t_first = start + int(ttft_ms * MS)
            r.t_last = r.t_end = start + 100 * MS
            r.token_events = 4
            r.usage_prompt_tokens = 2000 * (turn + 1)
            if cached:
                r.usage_cached_tokens = 0 if turn == 0 else 1000 * (turn + 1)
            acc.add(r)
    return RunResult(
        workload={"name": "agentic"},
        load={"pattern": "trace"},
        endpoint=ENDPOINT,
        accumulator=acc,
        self_check={"generator_bound": False, "reasons": []},
        label="run0",
    )


def session(run: RunResult, slos: list[str]) -> SessionData:
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
    return data


def report_of(data: SessionData) -> dict[str, Any]:
    return build_report(data, endpoint=ENDPOINT, session={"exitstatus": 0, "options": {}})


def test_json_block() -> None:
    report = report_of(session(agent_run(), ["conversation.makespan.p90 < 10s"]))
    block = json.loads(json.dumps(report))["tests"][0]["runs"][0]["conversations"]
    assert block["count"] == 20 and block["failed"] == 0 and block["calls_mean"] == 9
    # root 0-100, subagents 150-250, root turns 300-400 ... 1050-1150 ms
    assert block["makespan"]["max"] == pytest_approx(1150)
    assert block["makespan_excl_tools"]["max"] == pytest_approx(800)
    assert block["fan_out"] == {"max": 2, "p50": 2, "mean": 2.0}
    assert block["threads"]["max"] == 3
    assert block["affinity"]["same_replica_rate"] == 1.0
    bands = [row["turns"] for row in block["by_turn_band"]]
    assert bands == ["1", "2-5", "6-10"]
    first, early = block["by_turn_band"][0], block["by_turn_band"][1]
    assert first["cache_hit_rate"] == 0.0 and early["cache_hit_rate"] == 0.5
    # turn 1: the root's first call (40 ms) and the subagents' first calls (10 ms)
    assert first["ttft"]["max"] == pytest_approx(40) and first["ttft"]["p50"] == pytest_approx(10)
    assert early["ttft"]["max"] == pytest_approx(10)
    assert [row["prompt"] for row in block["by_prompt_band"]] == ["1k-4k", "4k-16k"]


def pytest_approx(value: float) -> Any:
    return pytest.approx(value, rel=2e-3)


def test_terminal_block() -> None:
    lines = summary_lines(session(agent_run(), []), [], width=None)
    text = "\n".join(lines)
    assert "run0: 20 conversation(s), 9 calls each" in text
    assert "makespan p50 1.15 s" in text and "excl. tools p50 800.0 ms" in text
    assert "fan-out max 2 p50 2" in text
    assert "same replica 100.00% of" in text
    assert "turns 2-5: TTFT p90 10.0 ms cache 50.00%" in text
    plain = "\n".join(summary_lines(session(agent_run(replicas=False, cached=False), []), []))
    assert "replica not attributed" in plain and "cache -" in plain


def test_junit_properties() -> None:
    props = dict(run_properties([agent_run().to_dict()]))
    assert props["llm_conversations[run0].count"] == "20"
    assert props["llm_conversations[makespan_excl_tools.p90][run0]"] == "800.0 ms"
    assert props["llm_conversations[fan_out.max][run0]"] == "2"
    assert props["llm_conversations[same_replica_rate][run0]"] == "100.00%"
    assert props["llm_conversations[turns 2-5][cache_hit_rate][run0]"] == "50.00%"
    assert props["llm_conversations[turns 1][ttft.p90][run0]"] == "40.0 ms"
    unattributed = dict(run_properties([agent_run(replicas=False).to_dict()]))
    assert unattributed["llm_conversations[same_replica_rate][run0]"] == "-"


def test_markdown_tables() -> None:
    markdown = build_markdown(report_of(session(agent_run(), [])))
    assert "Conversations: " in markdown
    assert "makespan excl. tools: p50 800.0 ms" in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| 2-5 "))
    assert "50.00%" in row and "10.0 ms" in row
    unreported = build_markdown(report_of(session(agent_run(cached=False), [])))
    assert "not reported" in unreported


def test_html_section_tables_and_plots() -> None:
    data = session(agent_run(), ["turns[1].ttft.p90 < 1s"])
    html = build_html_report(report_of(data), data)
    start = html.index("<h4>Conversations</h4>")
    part = html[start : html.find("<h4>", start + 1)]
    assert "makespan excl. tools: p50 800.0 ms" in part
    rows = re.findall(r"<tr><td>([^<]+)</td><td class=\"num\">(\d+)/(\d+)</td>", part)
    assert rows[:3] == [("1", "60", "60"), ("2-5", "80", "80"), ("6-10", "40", "40")]
    assert 'data-kind="ttft-by-turn"' in part and 'data-kind="cache-hit-by-turn"' in part


def test_a_run_without_conversations_shows_none() -> None:
    acc = MetricsAccumulator()
    r = RequestRecord(index=0, t_sched=MS, t_send=MS, t_first=2 * MS, t_last=3 * MS, t_end=3 * MS)
    acc.add(r)
    run = RunResult(workload={}, load={}, endpoint=ENDPOINT, accumulator=acc, label="run0")
    data = session(run, [])
    report = report_of(data)
    assert "conversations" not in report["tests"][0]["runs"][0]
    assert "Conversations" not in build_markdown(report)
    assert "<h4>Conversations</h4>" not in build_html_report(report, data)
    assert not any(k.startswith("llm_conversations") for k, _ in run_properties([run.to_dict()]))


def test_a_percentile_an_slo_names_is_in_the_json_metrics() -> None:
    report = report_of(session(agent_run(), ["conversation.makespan.p75 < 10s"]))
    metrics = report["tests"][0]["runs"][0]["metrics"]
    assert metrics["conversation.makespan"]["p75"] == pytest_approx(1150)
    banded = report_of(session(agent_run(), ["turns[1].ttft.p75 < 1s"]))
    assert "p75" not in banded["tests"][0]["runs"][0]["metrics"]["ttft"]
