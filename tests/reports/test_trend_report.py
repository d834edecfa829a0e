"""The HTML report's history (``--llm-history``): each test's metric series, change points
and the current run marked, drawn in headless Chromium; and nothing of it without a history."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from chromium import needs_chromium, probe

from pytest_llmperf.history.session import build_session_record
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.history.trends import TrendReport, report_trends
from pytest_llmperf.reports.html import build_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.session_data import SessionData

LATENCY = "tests/test_chat.py::test_latency[<b>x</b>]"
SWEEP = "tests/test_chat.py::test_sweep"
STORED, STEP_AT = 16, 8  # stored sessions; from session 9 on the server is 20% slower
DRAWN = (("ttft", "p50"), ("ttft", "p99"), ("tpot", "p50"), ("e2e", "p50"))


def _report(data: SessionData) -> dict[str, Any]:
    endpoint = data.tests[next(iter(data.tests))].endpoint
    return build_report(
        data, endpoint=endpoint, session={"exitstatus": 1, "options": {"scale": 1.0}}
    )


def _scaled(metrics: dict[str, Any], factor: float) -> dict[str, Any]:
    out = json.loads(json.dumps(metrics))
    for metric, stat in DRAWN:
        out[metric][stat] *= factor
    return out


def store_history(target: str, data: SessionData, report: dict[str, Any]) -> None:
    """``STORED`` past sessions of the same tests (keyed as the plugin keys them), a step
    at ``STEP_AT``, a little alternating noise."""
    record = build_session_record(
        data.measured_tests(),
        endpoint=report["endpoint"],
        options={},
        started_at="2026-11-01T00:00:00.000+00:00",
        tag="main@0",
    )
    with HistoryStore.open(target) as store:
        for i in range(STORED):
            # slower in the past, by 20%: the current run continues the recent regime
            factor = (1.2 if i < STEP_AT else 1.0) * (1 + 0.01 * (-1) ** i)
            runs = [dataclasses.replace(r, metrics=_scaled(r.metrics, factor)) for r in record.runs]
            store.append_session(
                dataclasses.replace(
                    record,
                    started_at=f"2026-11-01T{i:02d}:00:00.000+00:00",
                    tag=f"main@{i:04x}",
                    runs=runs,
                )
            )


@pytest.fixture
def with_history(session_data: SessionData, tmp_path: Path) -> tuple[dict[str, Any], TrendReport]:
    report = _report(session_data)
    target = str(tmp_path / "h.sqlite")
    store_history(target, session_data, report)
    trends = report_trends(target, report)
    assert not trends.error, trends.error
    return report, trends


def test_each_run_of_each_test_gets_its_series_with_the_change_point(
    with_history: tuple[dict[str, Any], TrendReport],
) -> None:
    _, trends = with_history
    assert set(trends.sections) == {LATENCY, SWEEP}
    assert [s.label for s in trends.sections[SWEEP]] == [
        "run0(rate=10)",
        "run1(rate=20)",
        "run2(rate=30)",
    ]
    for sections in trends.sections.values():
        for section in sections:
            assert [(s.metric, s.stat) for s in section.series] == list(DRAWN)
            for series in section.series:
                assert len(series.points) == STORED + 1 and series.current == STORED
                assert [cp.index for cp in series.change_points] == [STEP_AT]
                assert series.change_points[0].relative_change == pytest.approx(-1 / 6, abs=0.02)


def test_the_report_shows_history_per_test(
    session_data: SessionData, with_history: tuple[dict[str, Any], TrendReport]
) -> None:
    report, trends = with_history
    html = build_html_report(report, session_data, trends)
    assert html.count("<h3>History</h3>") == 2
    assert html.count('<section class="trend"') == 4  # 1 + 3 runs
    assert html.count('data-kind="trend"') == 4 * len(DRAWN)
    assert html.count('class="band-edge"') == 4 * len(DRAWN)  # one change point each
    assert html.count('data-series="this run"') == 4 * len(DRAWN)
    assert html.count('class="current-run"') == 4 * len(DRAWN)
    assert html.count('<table class="change-points">') == 4
    assert "change point at run 9; runs 9-17: mean" in html  # a band's hover text
    assert "<th>history</th>" in html and "2 test(s) with comparable stored runs" in html
    for external in ("<script", "<link", " src=", "url("):
        assert external not in html.lower()


def test_without_history_the_report_is_unchanged(
    session_data: SessionData, with_history: tuple[dict[str, Any], TrendReport]
) -> None:
    report, trends = with_history
    plain = build_html_report(report, session_data)
    assert "History" not in plain and "<th>history</th>" not in plain
    # a history with nothing comparable adds its summary row and nothing else
    empty = build_html_report(
        report, session_data, TrendReport(trends.where, note="no history yet")
    )
    row = re.search(r"<tr><th>history</th>.*?</tr>\n", empty)
    assert row and "no history yet" in row.group(0)
    assert empty.replace(row.group(0), "") == plain


def test_a_missing_or_unreadable_history_is_a_line_in_the_summary(
    session_data: SessionData, tmp_path: Path
) -> None:
    report = _report(session_data)
    first = build_html_report(report, session_data, report_trends(str(tmp_path / "x"), report))
    assert "this session will be its first" in first and "<h3>History</h3>" not in first
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"\x00garbage" * 1000)
    broken = build_html_report(report, session_data, report_trends(str(bad), report))
    assert "unreadable" in broken and str(bad) in broken


PROBE = """
<pre id="probe"></pre>
<script>
const out = [];
for (const svg of document.querySelectorAll('svg.plot[data-kind="trend"]')) {
  const drawn = el => { const b = el.getBBox(); return b.width > 0 || b.height > 0; };
  const line = svg.querySelector('path.series[data-series="history"]');
  const current = [...svg.querySelectorAll("circle.current-run")];
  const edges = [...svg.querySelectorAll("line.band-edge")];
  const box = svg.getBoundingClientRect();
  out.push({line: !!line && drawn(line), points: svg.querySelectorAll("circle").length,
            current: current.filter(drawn).length,
            currentX: current.length ? current[0].getBBox().x : null,
            edges: edges.length, edgeX: edges.length ? edges[0].getBBox().x : null,
            width: box.width, height: box.height});
}
document.getElementById("probe").textContent = JSON.stringify(out);
</script>
"""


@needs_chromium
def test_chromium_draws_the_trends(
    session_data: SessionData,
    with_history: tuple[dict[str, Any], TrendReport],
    tmp_path: Path,
) -> None:
    report, trends = with_history
    html = build_html_report(report, session_data, trends)
    plots, _ = probe(html, PROBE, tmp_path)
    assert len(plots) == 4 * len(DRAWN)
    for plot in plots:
        assert plot["width"] > 100 and plot["height"] > 100, plot
        assert plot["line"], plot  # the stored series is drawn
        assert plot["points"] == STORED + 1, plot  # a marker per stored run, and this run
        assert plot["current"] == 1 and plot["edges"] == 1, plot
        # the change point's dashed line is left of this run, which is the rightmost point
        assert plot["edgeX"] < plot["currentX"], plot


PLUGIN_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=12)
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_chat(llm_loadgen):
    await llm_loadgen.run()
"""


def test_sessions_with_history_and_html_show_the_trend(pytester: pytest.Pytester) -> None:
    """Through the plugin: --llm-history with --llm-html; the first session's report notes
    an empty history, the third draws the two stored runs and the current one."""
    pytester.makepyfile(test_trend=PLUGIN_TEST)
    args = ["--llm-endpoint=sim:fixed", "--llm-history=h.sqlite", "--llm-html=r.html", "-q"]
    for session in range(3):
        result = pytester.runpytest(*args)
        result.assert_outcomes(passed=1)
        html = (pytester.path / "r.html").read_text("utf-8")
        if session == 0:
            assert "this session will be its first" in html and "<h3>History</h3>" not in html
    assert html.count("<h3>History</h3>") == 1
    assert "over 2 stored comparable run(s) and this one" in html
    # and the embedded simulator's own process (started by the gate): startup and RSS
    process = (("startup.ready_s", "value"), ("server.rss_max_mb", "value"))
    assert html.count('data-kind="trend"') == len(DRAWN) + len(process)
    assert html.count('data-series="this run"') == len(DRAWN) + len(process)
    with HistoryStore.open(str(pytester.path / "h.sqlite")) as store:
        assert len(store.sessions()) == 3  # the report read the store before the append
