"""The server's own metrics in every report: units, the time split, missing reasons.

Unit tests render synthetic run dicts shaped as the JSON report's ``runs[]``
entries (``server_metrics``, ``ttft_split``, ``cache_reset``: see
``RunResult.to_dict`` and ``ServerMetrics.to_dict``); two pytester sessions on
the embedded simulator check the whole path, one of them only once the
plugin's wiring fills ``server_metrics`` on simulator runs (marked below).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from chromium import needs_chromium, probe
from synthetic_session import ENDPOINT, payload, synthetic_run

from pytest_llmperf.reports.html import build_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.junit import junit_properties, regression_properties, server_properties
from pytest_llmperf.reports.plots import server_series_plots, ttft_split_plot
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.table import MARKS, format_value, regression_table, verdict_table
from pytest_llmperf.reports.terminal import summary_lines
from pytest_llmperf.reports.time_split import format_server_value, time_split
from pytest_llmperf.slo.regression import RegressionCheck
from pytest_llmperf.slo.verdicts import SloVerdict

NODEID = "tests/test_chat.py::test_latency"


def latency(p50: float, p99: float, mean: float, count: int = 1200) -> dict[str, float]:
    """A scraped histogram's statistics: each percentile (and the max) at its bucket's
    upper bound, ``{stat}_lo`` the bucket's lower one (here half the upper)."""
    bounds = {
        "p50": p50,
        "p90": p99 * 0.8,
        "p95": p99 * 0.9,
        "p99": p99,
        "p99.9": p99 * 1.5,
        "max": p99 * 2,
    }
    return {
        **bounds,
        **{f"{stat}_lo": value / 2 for stat, value in bounds.items()},
        "mean": mean,
        "count": count,
        "bucket_ms": p50 / 2,
    }


SERVER: dict[str, Any] = {
    "source": "http://10.0.0.7:8000/metrics",
    "family": "vllm",
    "scrapes": 31,
    "missing": None,
    "metrics": {
        "server.queue_time": latency(5.0, 50.0, 9.5),
        "server.prefill_time": latency(25.0, 60.0, 26.0),
        "server.decode_time": latency(80.0, 150.0, 90.0),
        "server.ttft": latency(40.0, 120.0, 38.0),
        "server.kv_cache_usage": {"max": 0.935, "mean": 0.61, "min": 0.02},
        "server.running": {"max": 12.0, "mean": 7.4, "min": 0.0},
        "server.waiting": {"max": 5.0, "mean": 1.25, "min": 0.0},
        "server.preemptions": {"value": 3.0},
        "server.requests": {"value": 1200.0},
        "server.prefix_cache_hit_rate": {"value": 0.41},
    },
    "series": {
        "server.kv_cache_usage": [[float(t), 0.02 + 0.03 * t] for t in range(31)],
        "server.running": [[float(t), float(t % 12)] for t in range(31)],
        "server.waiting": [[float(t), float(max(0, t % 12 - 7))] for t in range(31)],
    },
    "raw": {},
    "buckets": {},
}
SPLIT: dict[str, Any] = {
    "count": 1200,
    "client_queue": {"p50": 0.1, "p90": 0.3, "p99": 1.5, "mean": 0.2},
    "server_queue": {"p50": 4.2, "p90": 22.0, "p99": 47.0, "mean": 9.0},
    "engine": {"p50": 24.0, "p90": 38.0, "p99": 58.0, "mean": 25.0},
    "remainder": {"p50": 11.0, "p90": 14.0, "p99": 22.0, "mean": 11.5},
    "ttft": {"p50": 41.0, "p90": 70.0, "p99": 128.0, "mean": 45.7},
    "server_queue_reported": 1200,
    "remainder_negative": 0,
}
MISSING: dict[str, Any] = {
    "source": "http://10.0.0.7:8000/metrics",
    "family": "unknown",
    "metrics": {},
    "series": {},
    "raw": {},
    "missing": "GET http://10.0.0.7:8000/metrics: 404",
    "scrapes": 0,
    "buckets": {},
}
SLOS = [
    "ttft.p99 < 50ms",
    "ttft.p50 < 500ms",
    "server.preemptions == 0",
    "server.kv_cache_usage.max < 90%",
    "server.queue_time.p99 < 20ms",
]
# what the plugin's verdicts on SERVER say (slo/verdicts.py evaluate_server)
SERVER_VERDICTS = {
    "server.preemptions == 0": (3.0, 0.0, "count", "fail"),
    "server.kv_cache_usage.max < 90%": (0.935, 0.9, "fraction", "fail"),
    "server.queue_time.p99 < 20ms": (50.0, 20.0, "ms", "fail"),
}


def session(
    server: dict[str, Any] | None = SERVER,
    split: dict[str, Any] | None = None,
    reset: dict[str, Any] | None = None,
) -> tuple[SessionData, dict[str, Any]]:
    """One failing test whose run carries ``server`` metrics, a TTFT ``split``, a cache
    ``reset``; its verdicts as the plugin would judge them."""
    run = synthetic_run(40, 1200, seed=1, rate=40, label="run0")
    p = payload([run], SLOS, endpoint={**ENDPOINT, "server_metrics": "vllm at …/metrics"})
    entry = p["runs"][0]
    entry["server_metrics"] = copy.deepcopy(server)
    if split is not None:
        entry["ttft_split"] = copy.deepcopy(split)
    if reset is not None:
        entry["cache_reset"] = reset
    for v in p["slos"]:
        if v["expr"] in SERVER_VERDICTS:
            observed, target, unit, verdict = SERVER_VERDICTS[v["expr"]]
            v.update(observed=observed, target=target, unit=unit, verdict=verdict, samples=31)
            v["reason"] = ""
    data = SessionData()
    data.add(NODEID, "failed", p)
    return data, p


def html_of(data: SessionData) -> str:
    endpoint = data.tests[NODEID].endpoint
    return build_html_report(build_report(data, endpoint=endpoint, session={}), data)


# -- units ----------------------------------------------------------------------------


def test_server_units_are_formatted_in_their_own_terms() -> None:
    assert format_value(3.0, "count") == "3"
    assert format_value(7.4, "count") == "7.40"  # a gauge's mean
    assert format_value(0.935, "fraction") == "93.50%"
    assert format_server_value("server.kv_cache_usage", 0.935) == "93.5%"
    assert format_server_value("server.preemptions", 3.0) == "3"
    assert format_server_value("server.queue_time", 5.0) == "5.000 ms"
    assert format_server_value("server.ttft", 120.0) == "120.0 ms"
    assert format_server_value("vllm:odd_raw_name", 2.5) == "2.5"


def test_the_failure_table_writes_counts_fractions_and_the_equality_operator() -> None:
    verdicts = [
        SloVerdict("server.preemptions == 0", 3.0, 0.0, "count", "fail", "run0", 31),
        SloVerdict("server.kv_cache_usage.max < 95%", 0.935, 0.95, "fraction", "pass", "run0", 31),
    ]
    rows = verdict_table(verdicts).splitlines()
    assert rows[2].split() == ["server.preemptions", "==", "0", "run0", "3", "==", "0", "✗", "FAIL"]
    assert "93.50%" in rows[3] and "< 95.00%" in rows[3]
    props = dict(junit_properties(verdicts))
    assert props["llm_slo[server.preemptions == 0][run0].observed"] == "3"
    assert props["llm_slo[server.preemptions == 0][run0].target"] == "0"
    assert props["llm_slo[server.kv_cache_usage.max < 95%][run0].observed"] == "93.50%"


def test_a_baseline_check_on_a_server_metric_keeps_its_unit() -> None:
    check = RegressionCheck(
        metric="server.kv_cache_usage",
        stat="max",
        baseline=0.5,
        current=0.9,
        change=0.8,
        threshold=0.1,
        p_value=None,
        verdict="regressed",
        run="run0",
    )
    assert "50.00%" in regression_table([check]) and "90.00%" in regression_table([check])
    props = dict(regression_properties([check]))
    assert props["llm_baseline[server.kv_cache_usage.max][run0].current"] == "90.00%"


# -- the time split -------------------------------------------------------------------


def test_the_split_from_the_servers_histograms_leaves_the_client_remainder() -> None:
    run = {"metrics": {"ttft": {"p50": 40.0, "p99": 130.0, "mean": 45.0}}, "server_metrics": SERVER}
    split = time_split(run)
    assert split is not None and not split.per_request and split.count == 1200
    assert [p.key for p in split.parts] == ["server_queue", "prefill", "remainder"]
    remainder = split.parts[-1].values
    assert remainder == {"mean": 45.0 - 9.5 - 26.0, "p50": 40.0 - 5.0 - 25.0, "p99": 20.0}
    assert split.server_ttft["p99"] == 120.0


def test_the_per_request_split_wins_over_the_histograms() -> None:
    run = {"metrics": {"ttft": {"p50": 40.0}}, "server_metrics": SERVER, "ttft_split": SPLIT}
    split = time_split(run)
    assert split is not None and split.per_request and split.notes == ()
    assert [p.label for p in split.parts] == [
        "client queue",
        "server queue",
        "engine",
        "network/other",
    ]
    assert split.ttft["p99"] == 128.0  # the timed requests' own TTFT, not the run's


def test_a_split_without_server_queue_times_says_where_the_wait_went() -> None:
    llamacpp = {**SPLIT, "server_queue": None, "server_queue_reported": 0, "remainder_negative": 2}
    split = time_split({"ttft_split": llamacpp})
    assert split is not None and "server queue" not in [p.label for p in split.parts]
    assert any("no queue time" in n for n in split.notes)
    assert any("2 request(s)" in n for n in split.notes)


def test_nothing_to_split_without_queue_or_prefill() -> None:
    only_gauges = {**SERVER, "metrics": {"server.kv_cache_usage": {"max": 0.5}}}
    assert time_split({"metrics": {"ttft": {"p50": 1.0}}, "server_metrics": only_gauges}) is None
    assert time_split({"metrics": {"ttft": {"p50": 1.0}}, "server_metrics": None}) is None


# -- terminal -------------------------------------------------------------------------


def test_terminal_explains_a_failing_latency_slo_and_names_the_servers_figures() -> None:
    data, _ = session(reset={"done": True, "how": "POST /reset_prefix_cache", "why": ""})
    lines = summary_lines(data, [], width=80)
    # a test's SLO lines (✓, ✗, ?) stay whole, verdict, interval and n together; the rest fit
    slo_lines = [x for x in lines if x.startswith(tuple(f"  {m} " for m in MARKS.values()))]
    assert all(re.search(r", n=\d+$", x) for x in slo_lines), slo_lines
    long = [x for x in lines if len(x) > 80 and x not in slo_lines]
    assert not long, long
    at = next(i for i, x in enumerate(lines) if x.startswith("  ✗ ttft.p99 < 50ms [run0]"))
    head, names, p50, p99 = lines[at + 1 : at + 5]
    assert head == (
        "    where the time went [run0] (ms; server histograms, bucket-bounded, n=1200):"
    )
    assert names.split() == ["ttft", "=", "server", "queue", "+", "prefill", "+", "client/network"]
    client = data.tests[NODEID].runs[0]["metrics"]["ttft"]
    rest = f"{client['p50'] - 30:.2f}"
    assert p50.split()[:8] == ["p50", f"{client['p50']:.1f}", "=", "5.00", "+", "25.0", "+", rest]
    assert p99.split()[:6] == ["p99", f"{client['p99']:.1f}", "=", "50.0", "+", "60.0"]
    # the same '=' column: names over figures
    assert names.index("=") == p50.index("=") == p99.index("=")
    # said once for the run, though four of its SLOs failed
    assert sum("where the time went" in x for x in lines) == 1
    text = "\n".join(lines)
    for part in (
        "✗ server.preemptions == 0 [run0]: observed 3, target 0, n=31",
        "✗ server.kv_cache_usage.max < 90% [run0]: observed 93.50%, target 90.00%",
        "server [run0]: vllm at http://10.0.0.7:8000/metrics",
        # percentiles of bucket histograms are bounds, the bucket named: never a bare
        # 40.0 ms beside the client's own p50 as if the two disagreed
        "ttft p50 ≤ 40.0 ms (bucket 20.0–40.0), p99 ≤ 120.0 ms (bucket 60.0–120.0)",
        "queue p99 ≤ 50.0 ms (bucket 25.0–50.0)",
        "KV max 93.5%",
        "preemptions 3",
        "prefix hits 41.0%",
        "cache reset (POST /reset_prefix_cache)",
    ):
        assert part in text, part


def test_terminal_uses_the_per_request_split_when_the_server_sent_its_timings() -> None:
    data, _ = session(split=SPLIT)
    lines = summary_lines(data, [], width=80)
    at = next(i for i, x in enumerate(lines) if "where the time went" in x)
    assert lines[at].endswith("(ms; per request, n=1200):")
    assert lines[at + 1].split("=")[1].split("+") == [
        " client queue ",
        " server queue ",
        " engine ",
        " network/other",
    ]
    assert lines[at + 3].split() == [
        "p99",
        "128.0",
        "=",
        "1.50",
        "+",
        "47.0",
        "+",
        "58.0",
        "+",
        "22.0",
    ]


def test_terminal_says_why_the_servers_metrics_are_missing() -> None:
    data, _ = session(server=MISSING)
    lines = summary_lines(data, [], width=80)
    assert "    server [run0]: none (GET http://10.0.0.7:8000/metrics: 404)" in lines
    at = next(i for i, x in enumerate(lines) if "where the time went" in x)
    assert " ".join(x.strip() for x in lines[at : at + 2]) == (
        "where the time went [run0]: no server metrics to split ttft"
        " (GET http://10.0.0.7:8000/metrics: 404)"
    )


def test_terminal_is_silent_on_server_metrics_when_they_are_off() -> None:
    data, _ = session(server=None)
    text = "\n".join(summary_lines(data, [], width=80))
    assert "server [run0]" not in text and "where the time went" not in text


def test_terminal_explains_a_stage_from_the_stages_own_server_metrics() -> None:
    data, _ = session()
    run = data.tests[NODEID].runs[0]
    stage_server = copy.deepcopy(SERVER)
    stage_server["metrics"]["server.queue_time"]["p99"] = 400.0
    run["stages"] = [
        {
            "index": 1,
            "planned_rate": 40.0,
            "start_s": 0.0,
            "duration_s": 30.0,
            "achieved_rate": 40.0,
            "counts": run["counts"],
            "metrics": run["metrics"],
            "server_metrics": stage_server,
        }
    ]
    data.tests[NODEID].slos = [
        {
            "expr": "ttft.p99 < 50ms",
            "observed": 90.0,
            "target": 50.0,
            "unit": "ms",
            "verdict": "fail",
            "run": "run0",
            "samples": 1200,
            "reason": "",
            "stage": 1,
            "stage_load": "40 req/s",
        }
    ]
    lines = summary_lines(data, [], width=None)
    at = next(i for i, x in enumerate(lines) if "where the time went" in x)
    assert "[run0] [stage 1: 40 req/s]" in lines[at]
    assert lines[at + 3].split()[3] == "400.0"  # the stage's queue p99, not the run's


# -- the failure message --------------------------------------------------------------


def test_the_failure_table_adds_where_the_time_went_given_the_runs() -> None:
    _, p = session(split=SPLIT)
    verdicts = [SloVerdict(**{k: v for k, v in s.items()}) for s in p["slos"]]
    plain = verdict_table(verdicts)
    assert "Where the time went" not in plain  # no runs given: the table as before
    text = verdict_table(verdicts, p["runs"])
    block = text[text.index("Where the time went:") :].splitlines()
    assert block[1] == "  [run0] (ms; per request, n=1200):"
    assert block[4].split()[:3] == ["p99", "128.0", "="]
    assert block[5].startswith("    server: ttft p50 ≤ 40.0 ms (bucket 20.0–40.0), p99 ≤ 120.0 ms")
    assert text.count("[run0] (ms;") == 1  # once per run, not per failing SLO


def test_the_failure_table_says_why_nothing_splits_the_time() -> None:
    _, p = session(server=MISSING)
    verdicts = [SloVerdict(**s) for s in p["slos"]]
    text = verdict_table(verdicts, p["runs"])
    assert "  [run0]: no server metrics to split ttft (GET http://10.0.0.7:8000/metrics: 404)" in (
        text.splitlines()
    )
    _, p = session(server=None)
    assert "Where the time went" not in verdict_table([SloVerdict(**s) for s in p["slos"]])


# -- JUnit ----------------------------------------------------------------------------


def test_junit_properties_per_run_carry_the_servers_figures_and_the_split() -> None:
    _, p = session(split=SPLIT, reset={"done": False, "how": "", "why": "404 from the server"})
    props = dict(server_properties(p["runs"]))
    assert props["llm_server[run0].source"] == "http://10.0.0.7:8000/metrics"
    assert props["llm_server[run0].family"] == "vllm"
    assert props["llm_server[run0].scrapes"] == "31"
    assert props["llm_server[run0].cache_reset"] == "cache not reset: 404 from the server"
    assert props["llm_server[server.ttft.p50][run0]"] == "40.0 ms"
    assert props["llm_server[server.queue_time.p99][run0]"] == "50.0 ms"
    assert props["llm_server[server.kv_cache_usage.max][run0]"] == "93.5%"
    assert props["llm_server[server.running.mean][run0]"] == "7.40"
    assert props["llm_server[server.preemptions][run0]"] == "3"
    assert props["llm_server[server.prefix_cache_hit_rate][run0]"] == "41.0%"
    assert props["llm_ttft_split[run0].source"] == "per request, n=1200"
    assert props["llm_ttft_split[p50][run0].ttft"] == "41.0 ms"
    assert props["llm_ttft_split[p99][run0].server_queue"] == "47.0 ms"
    assert props["llm_ttft_split[p50][run0].remainder"] == "11.0 ms"
    assert props["llm_ttft_split[mean][run0].client_queue"] == "0.200 ms"
    assert all(isinstance(v, str) for v in props.values())
    json.dumps(props)  # plain data: it crosses xdist's wire


def test_junit_properties_say_why_the_servers_metrics_are_missing() -> None:
    _, p = session(server=MISSING)
    props = dict(server_properties(p["runs"]))
    assert props["llm_server[run0].missing"] == "GET http://10.0.0.7:8000/metrics: 404"
    assert not any(name.startswith("llm_ttft_split") for name in props)
    _, p = session(server=None)
    assert server_properties(p["runs"]) == []


# -- HTML -----------------------------------------------------------------------------


def test_html_has_a_server_section_with_units_plots_and_the_split() -> None:
    data, _ = session(split=SPLIT, reset={"done": True, "how": "POST /reset_prefix_cache"})
    html = html_of(data)
    section = html[html.index('<section class="server-metrics">') :]
    section = section[: section.index("</section>")]
    assert "vllm at http://10.0.0.7:8000/metrics · 31 scrape(s)" in section
    # a percentile of a bucket histogram is its bucket's upper bound, said as a bound
    queue = re.search(r"<th>server.queue_time</th>((?:<td[^>]*>[^<]*</td>)+)", section)
    assert queue is not None, section
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", queue.group(1))
    assert cells[:2] == ["≤ 5.000 ms", "≤ 40.0 ms"], cells  # p50, p90
    assert cells[5] == "9.500 ms", cells  # the mean: exact, no bound
    assert re.search(r"<th>server.kv_cache_usage</th><td class=\"num\">93.5%</td>", section)
    assert re.search(r"<th>server.running</th><td class=\"num\">12</td>", section)
    assert re.search(r"<th>server.preemptions</th><td class=\"num\">3</td>", section)
    assert re.search(r"<th>server.prefix_cache_hit_rate</th><td class=\"num\">41.0%</td>", section)
    assert "POST /reset_prefix_cache" in html
    assert "server metrics: vllm at …/metrics" in html  # the endpoint's note
    # the gauges beside the throughput plots, on the run's time axis
    assert html.count('data-kind="server-timeline"') == 2
    assert 'data-series="running"' in html and 'data-series="waiting"' in html
    # the split: a table and stacked bars (mean, p50, p99; one segment per non-zero part)
    split = html[html.index('<section class="ttft-split">') :]
    assert (
        "<th>client queue</th><th>server queue</th><th>engine</th><th>network/other</th>" in split
    )
    assert html.count('data-kind="ttft-split"') == 1
    assert split.count('<rect class="bar"') == 12 and split.count('class="ttft-mark"') == 3


def test_html_stage_table_gains_each_stages_server_figures() -> None:
    data, _ = session()
    run = data.tests[NODEID].runs[0]
    stage = {"index": 0, "planned_rate": 40.0, "start_s": 0.0, "duration_s": 30.0}
    stage |= {"achieved_rate": 40.0, "counts": run["counts"], "metrics": run["metrics"]}
    run["stages"] = [{**stage, "server_metrics": SERVER}, {**stage, "index": 1}]
    html = html_of(data)
    table = html[html.index('<table class="stages">') :]
    table = table[: table.index("</table>")]
    assert "<th>server</th>" in table
    figures = "ttft p50 ≤ 40.0 ms (bucket 20.0–40.0), p99 ≤ 120.0 ms (bucket 60.0–120.0)"
    assert f'<td class="stage-server">{figures}, queue p99 ≤ 50.0 ms' in table
    assert '<td class="stage-server">-</td>' in table  # a stage the server said nothing of


def test_html_says_why_the_servers_metrics_are_missing() -> None:
    html = html_of(session(server=MISSING)[0])
    assert "none (GET http://10.0.0.7:8000/metrics: 404)" in html
    assert 'data-kind="server-timeline"' not in html and 'data-kind="ttft-split"' not in html
    off = html_of(session(server=None)[0])
    assert 'class="server-metrics"' not in off


def test_html_lists_an_unknown_familys_raw_metrics_escaped() -> None:
    raw = {**MISSING, "missing": None, "raw": {"my_server:<queue>_total": 12.0}, "scrapes": 4}
    html = html_of(session(server=raw)[0])
    assert "my_server:&lt;queue&gt;_total" in html and "<queue>" not in html
    assert "1 metric(s) under the server's own names (unknown: no mapping" in html


def test_plots_skip_what_the_server_did_not_give() -> None:
    assert server_series_plots(None) == []
    assert server_series_plots({"series": {"server.running": [[0.0, 1.0], [1.0, 2.0]]}})
    split = time_split(
        {"metrics": {"ttft": {"p50": 1.0, "p99": 2.0, "mean": 1.0}}, **{"server_metrics": SERVER}}
    )
    assert split is not None
    svg = ttft_split_plot(split)
    # the remainder is negative at every statistic here: drawn as nothing, never as a bar
    assert 'data-part="remainder"' not in svg and svg.count('class="ttft-mark"') == 3


PROBE = """
<pre id="probe"></pre>
<script>
const out = [];
for (const svg of document.querySelectorAll("svg.plot")) {
  const shapes = [...svg.querySelectorAll("path.series, rect.bar")];
  const drawn = shapes.filter(s => { const b = s.getBBox(); return b.width > 0 || b.height > 0; });
  out.push({kind: svg.dataset.kind, shapes: shapes.length, drawn: drawn.length});
}
document.getElementById("probe").textContent = JSON.stringify(out);
</script>
"""


@needs_chromium
def test_chromium_draws_the_server_plots(tmp_path: Path) -> None:
    html = html_of(session(split=SPLIT)[0])
    plots, _ = probe(html, PROBE, tmp_path)
    server = [p for p in plots if p["kind"] in ("server-timeline", "ttft-split")]
    assert [p["kind"] for p in server] == ["server-timeline", "server-timeline", "ttft-split"]
    for plot in server:
        assert plot["shapes"] >= 1 and plot["drawn"] == plot["shapes"], plot


# -- whole sessions on the simulator --------------------------------------------------

SIM_TESTS = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=40, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 1us", "server.ttft.p50 < 60s")
async def test_misses(llm_loadgen):
    await llm_loadgen.run()
"""


def run_sim_session(pytester: pytest.Pytester) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makepyfile(test_sim=SIM_TESTS)
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--llm-endpoint=sim",
        "--llm-json=out/r.json",
        "--llm-html=out/r.html",
        "--junitxml=out/j.xml",
        "-o",
        "junit_family=xunit1",
    )
    result.assert_outcomes(failed=1)
    return result, json.loads((pytester.path / "out" / "r.json").read_text())


def test_sim_session_splits_each_requests_ttft_in_every_report(pytester: pytest.Pytester) -> None:
    """The simulator sends vLLM's per-request ``metrics`` object: the failing TTFT SLO
    says where the time went (terminal), the HTML has the split, the JSON its numbers."""
    result, report = run_sim_session(pytester)
    (run,) = report["tests"][0]["runs"]
    split = run["ttft_split"]
    assert split["count"] == 40
    # structure, not timing: each mean part is a share of the mean TTFT, and they add up
    parts = sum(split[k]["mean"] for k in ("client_queue", "server_queue", "engine", "remainder"))
    assert parts == pytest.approx(split["ttft"]["mean"], rel=0.05, abs=0.05)
    lines = result.stdout.lines
    at = next(i for i, x in enumerate(lines) if "where the time went [run0]" in x)
    assert lines[at].endswith("(ms; per request, n=40):")
    assert "client queue" in lines[at + 1] and lines[at + 2].lstrip().startswith("p50")
    html = (pytester.path / "out" / "r.html").read_text()
    assert 'data-kind="ttft-split"' in html and "Where the time went (TTFT)" in html


def test_sim_session_reports_the_servers_metrics_everywhere(pytester: pytest.Pytester) -> None:
    result, report = run_sim_session(pytester)
    (test,) = report["tests"]
    (run,) = test["runs"]
    server = run["server_metrics"]
    assert server is not None and server["family"] == "sim" and server["missing"] is None
    assert server["source"].endswith("/metrics") and server["scrapes"] >= 2
    assert server["metrics"]["server.ttft"]["count"] >= 1
    verdicts = {v["expr"]: v for v in test["slos"]}
    assert verdicts["server.ttft.p50 < 60s"]["verdict"] == "pass"
    text = result.stdout.str()
    assert re.search(r"server \[run0\]: sim at http://127\.0\.0\.1:\d+/metrics", text)
    assert "Where the time went:" in text  # the failure message (verdict_table given runs)
    html = (pytester.path / "out" / "r.html").read_text()
    assert '<section class="server-metrics">' in html and "server.ttft" in html
    xml = (pytester.path / "out" / "j.xml").read_text()
    assert 'name="llm_server[run0].family" value="sim"' in xml
    assert 'name="llm_ttft_split[p50][run0].ttft"' in xml
