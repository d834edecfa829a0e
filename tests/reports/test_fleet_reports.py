"""A fleet's run in every report: the terminal's block, the Markdown and HTML per-replica
and per-pool tables, the HTML plots and JUnit properties, from hand-made run dicts
(``runs[].by_replica``, ``runs[].fleet``): with and without attribution, a page missing,
a page without numbers, a disaggregated fleet; and nothing new for a single endpoint."""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from synthetic_session import ENDPOINT

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.reports.fleet_view import fleet_view
from pytest_llmperf.reports.html import build_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.junit import run_properties
from pytest_llmperf.reports.markdown import build_markdown
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.terminal import summary_lines
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult

MS = 1_000_000
NODEID = "tests/test_fleet.py::test_fleet"


def plain_run() -> dict[str, Any]:
    """A single endpoint's run: 12 requests, TTFT 20 ms, E2E 100 ms."""
    acc = MetricsAccumulator()
    for i in range(12):
        t = i * 100 * MS
        r = RequestRecord(index=i, t_sched=t, t_send=t, t_first=t + 20 * MS)
        r.t_last = r.t_end = t + 100 * MS
        r.token_events = 4
        acc.add(r)
    run = RunResult(workload={}, load={}, endpoint=ENDPOINT, accumulator=acc, label="run0")
    return run.to_dict()


def client(issued: int, ttft_p99: float, e2e_p99: float, failed: int = 0) -> dict[str, Any]:
    """A ``by_replica`` entry: counts and metrics as a run's."""
    return {
        "counts": {"issued": issued, "completed": issued - failed, "failed": failed},
        "metrics": {
            "ttft": {"p50": ttft_p99 / 2, "p99": ttft_p99},
            "e2e": {"p99": e2e_p99},
            "error_rate": failed / issued,
        },
    }


def page(
    role: str, name: str, *, requests: float, queue: float, kv: float, hits: float
) -> dict[str, Any]:
    """A ``fleet.pages`` entry, its server metrics as one page's."""
    return {
        "role": role,
        "name": name,
        "server_metrics": {
            "source": f"http://127.0.0.1:900{name}/metrics",
            "family": "sim",
            "metrics": {
                "server.requests": {"value": requests},
                "server.queue_time": {"p99": queue, "p99_lo": queue / 2, "count": requests},
                "server.kv_cache_usage": {"max": kv, "mean": kv / 2, "min": 0.0},
                "server.running": {"max": 4.0, "mean": requests / 20, "min": 0.0},
                "server.prefix_cache_hit_rate": {"value": hits},
                "server.preemptions": {"value": 0.0},
            },
            "series": {
                "server.running": [[0.5, 1.0], [1.0, requests / 20], [1.5, 2.0]],
                "server.kv_cache_usage": [[0.5, kv / 2], [1.0, kv], [1.5, kv / 3]],
            },
            "missing": None,
            "scrapes": 4,
            "notes": [],
        },
    }


def fleet_run(*, attributed: bool = True, missing_page: bool = False) -> dict[str, Any]:
    """12 requests over replicas 0 and 1 (1 slow, 8 of the 12); pages for both, and a
    replica 2 the client saw without a page where ``missing_page``."""
    run = plain_run()
    pages = [
        page("replica", "0", requests=4, queue=5.0, kv=0.30, hits=0.5),
        page("replica", "1", requests=8, queue=80.0, kv=0.90, hits=0.25),
    ]
    run["fleet"] = {
        "pages": pages,
        "roles": {"replica": copy.deepcopy(pages[1]["server_metrics"])},
        "prefix_hit_rate": 0.375,
        "requests": {"0": 4.0, "1": 8.0},
        "discovered": None,
        "notes": [],
    }
    if attributed:
        run["by_replica"] = {"0": client(4, 21.0, 90.0), "1": client(7, 410.0, 900.0, failed=1)}
        if missing_page:
            run["by_replica"]["2"] = client(1, 30.0, 120.0)
    return run


def replica_verdict(verdict: str, name: str) -> dict[str, Any]:
    return {
        "expr": "replica.ttft.p99 < 300ms",
        "observed": 410.0 if verdict == "fail" else 21.0,
        "target": 300.0,
        "unit": "ms",
        "verdict": verdict,
        "run": "run0",
        "samples": 7,
        "reason": "",
        "stage": None,
        "replica": name,
    }


SLOS = [replica_verdict("pass", "0"), replica_verdict("fail", "1")]


def session(run: dict[str, Any], slos: Sequence[dict[str, Any]] = ()) -> SessionData:
    data = SessionData()
    outcome = "failed" if any(v["verdict"] == "fail" for v in slos) else "passed"
    data.add(NODEID, outcome, {"endpoint": ENDPOINT, "runs": [run], "slos": list(slos)})
    return data


def report_of(data: SessionData) -> dict[str, Any]:
    return build_report(data, endpoint=ENDPOINT, session={"exitstatus": 0, "options": {}})


def terminal(
    run: dict[str, Any], slos: Sequence[dict[str, Any]] = (), width: int | None = None
) -> str:
    return "\n".join(summary_lines(session(run, slos), [], width=width))


def test_terminal_block_joins_client_and_page() -> None:
    text = terminal(fleet_run(), SLOS)
    # 6 and 4 requests completed: max 6 over mean 5
    assert "fleet [run0]: 2 replica(s), 2 page(s), imbalance 1.20" in text
    assert "busy imbalance 1.33" in text  # mean running 0.2 and 0.4
    assert "prefix hits 37.5%" in text
    line = next(x for x in text.splitlines() if "replica 1:" in x)
    assert "7 req, 1 failed, ttft p99 410.0 ms, e2e p99 900.0 ms" in line
    assert "queue p99 ≤ 80.0 ms, KV max 90.0%, prefix hits 25.0%, preemptions 0" in line
    assert line.strip().startswith("✗ replica 1:")  # its worst verdict first
    assert next(x for x in text.splitlines() if "replica 0:" in x).strip().startswith("✓")
    assert "replica.ttft.p99 < 300ms [run0] [replica 1]: observed 410.0 ms" in text
    # 12 issued, 11 attributed: the one no response named is said
    assert "not attributed: 1 of 12 request(s) named no replica" in text


def test_terminal_block_fits_80_columns() -> None:
    lines = terminal(fleet_run(missing_page=True), SLOS, width=80).splitlines()
    assert all(len(x) <= 80 for x in lines if "[replica" not in x)  # an SLO line stays whole
    no_page = "      replica 2 (no page): 1 req, 0 failed, ttft p99 30.0 ms, e2e p99 120.0 ms"
    assert no_page in lines


def test_terminal_without_attribution_says_so() -> None:
    text = terminal(fleet_run(attributed=False))
    assert "replica 0: not attributed, page: 4 req, queue p99 ≤ 5.000 ms" in text
    assert "not attributed: no response named the replica that served it" in text
    assert "imbalance 1.33" in text  # from the pages' request counters: 8 over 6


def test_a_page_without_numbers() -> None:
    run = fleet_run()
    server = run["fleet"]["pages"][1]["server_metrics"]
    server.update(metrics={}, series={}, missing="GET http://w1/metrics: 404 Not Found")
    text = terminal(run)
    assert "page: no numbers (GET http://w1/metrics: 404 Not Found)" in text
    props = dict(run_properties([run]))
    assert props["llm_server[run0][replica 1].missing"].endswith("404 Not Found")
    html = build_html_report(report_of(session(run)))
    assert 'title="GET http://w1/metrics: 404 Not Found">page: no numbers' in html


def disaggregated_run() -> dict[str, Any]:
    """A router and prefill/decode pools, no attribution; the fleet's KV transfer."""
    run = plain_run()
    pages = [
        page("router", "r", requests=12, queue=1.0, kv=0.0, hits=0.0),
        page("prefill", "p0", requests=12, queue=40.0, kv=0.2, hits=0.5),
        page("decode", "d0", requests=12, queue=2.0, kv=0.7, hits=0.0),
    ]
    run["fleet"] = {
        "pages": pages,
        "roles": {p["role"]: copy.deepcopy(p["server_metrics"]) for p in pages},
        "prefix_hit_rate": 0.25,
        "requests": {},
        "discovered": "vllm-router at http://127.0.0.1:9000",
        "notes": ["page d0: buckets differ from p0's; histograms not merged"],
    }
    kv = {"p50": 4.0, "p50_lo": 2.0, "p99": 16.0, "p99_lo": 8.0, "count": 12}
    run["fleet"]["roles"]["decode"]["metrics"]["server.kv_transfer"] = kv
    run["server_metrics"] = {
        "source": "fleet",
        "family": "sim",
        "metrics": {"server.kv_transfer": kv},
    }
    return run


def test_disaggregated_pools_and_kv_transfer() -> None:
    run = disaggregated_run()
    view = fleet_view(run)
    assert view is not None and [r.name for r in view.rows] == ["p0", "d0"]  # no router
    text = terminal(run)
    assert "fleet [run0]: 1 prefill, 1 decode, 3 page(s)" in text
    assert "KV transfer p50 ≤ 4.000 ms, p99 ≤ 16.0 ms (n=12)" in text
    assert "pool prefill (1 page(s)): requests 12, queue p99 ≤ 40.0 ms" in text
    assert "pool decode (1 page(s)): requests 12" in text and "KV transfer p99 ≤ 16.0 ms" in text
    assert "! fleet [run0]: page d0: buckets differ" in text
    prefill = {**replica_verdict("fail", ""), "expr": "prefill.queue_time.p99 < 20ms"}
    del prefill["replica"]  # a pool's verdict: the whole run's, its expression names the pool
    data = session(run, [prefill])
    markdown = build_markdown(report_of(data))
    assert "discovered: vllm-router at http://127.0.0.1:9000" in markdown
    pools = {x.split(" | ")[0][2:]: x for x in markdown.splitlines() if x.startswith("| ")}
    assert pools["decode"].endswith("| ≤ 16.0 ms | - |")
    assert pools["prefill"].endswith("| - | ❌ fail |")
    assert "      ✗ pool prefill (1 page(s)): requests 12" in terminal(run, [prefill])
    html = build_html_report(report_of(data))
    part = html[html.index('<table class="fleet-pools">') :]
    assert re.search(r"<th>prefill</th>.*✗ prefill\.queue_time\.p99 &lt; 20ms", part)
    props = dict(run_properties([run]))
    assert props["llm_fleet[kv_transfer.p99][run0]"] == "≤ 16.0 ms"
    assert props["llm_server[server.queue_time.p99][run0][pool prefill]"] == "≤ 40.0 ms"


def test_markdown_tables() -> None:
    markdown = build_markdown(report_of(session(fleet_run(missing_page=True), SLOS)))
    assert "### Fleet: per replica and per pool" in markdown
    assert "<details open><summary>Fleet: tests/test_fleet.py::test_fleet [run0]" in markdown
    rows = {x.split(" | ")[0][2:]: x for x in markdown.splitlines() if x.startswith("| ")}
    assert "| 7/8 |" not in rows["1"] and "| 6/7 | 14.29% | 205.0 ms | 410.0 ms |" in rows["1"]
    assert "| ≤ 80.0 ms | 90.0% | 25.0% | 0 | ❌ fail |" in rows["1"]
    assert "| (no page) | 1/1 |" in rows["2"] and rows["2"].endswith("| - | - | - | - | - | - |")
    unattributed = build_markdown(report_of(session(fleet_run(attributed=False))))
    row = next(x for x in unattributed.splitlines() if x.startswith("| 0 "))
    assert "| not attributed | - | - | - | - | 4 | ≤ 5.000 ms |" in row
    assert "<details><summary>Fleet:" in unattributed  # a passing test's: collapsed


def test_html_tables_and_plots() -> None:
    run = fleet_run(missing_page=True)
    html = build_html_report(report_of(session(run, SLOS)))
    start = html.index('<section class="fleet">')
    part = html[start : html.index("</section>", start)]
    rows = re.findall(r"<tr><th>([^<]+)</th><td>([^<]+)</td><td class=\"num\">([^<]+)</td>", part)
    assert rows[:3] == [("0", "replica", "4/4"), ("1", "replica", "6/7"), ("2", "(no page)", "1/1")]
    assert '<span class="badge v-fail" title="replica.ttft.p99 < 300ms' not in part  # escaped
    assert "✗ replica.ttft.p99 &lt; 300ms" in part
    assert '<table class="fleet-pools">' in part
    bars = re.findall(r'data-replica="(\d)"', part)
    assert bars == ["0", "1", "2", "0", "1", "2"]  # requests, then TTFT p99
    assert 'data-kind="replica-ttft"' in part
    red = re.findall(r'data-replica="(\d)"[^>]*fill="#d62728"', part)
    assert red == ["1", "1"]  # the replica a verdict failed, on both bar charts
    assert part.count('data-kind="fleet-timeline"') == 2  # running and KV usage per page
    assert 'data-series="replica 1"' in part


def test_junit_properties() -> None:
    props = dict(run_properties([fleet_run(missing_page=True)]))
    assert props["llm_run[run0][replica 1].issued"] == "7"
    assert props["llm_run[ttft.p99][run0][replica 1]"] == "410.0 ms"
    assert props["llm_run[error_rate][run0][replica 1]"] == "14.29%"
    assert props["llm_server[server.queue_time.p99][run0][replica 1]"] == "≤ 80.0 ms"
    assert props["llm_server[server.kv_cache_usage.max][run0][replica 0]"] == "30.0%"
    assert props["llm_fleet[run0].imbalance"] == "1.64"  # 6 completed over mean 11/3
    assert props["llm_fleet[run0].not_attributed"] == "0"
    assert "llm_server[server.requests][run0][replica 2]" not in props  # no page
    none = dict(run_properties([fleet_run(attributed=False)]))
    assert none["llm_fleet[run0].not_attributed"] == "all"
    assert "llm_run[run0][replica 0].issued" not in none


def test_a_single_endpoint_run_gets_nothing_new() -> None:
    run = plain_run()
    data = session(run)
    report = report_of(data)
    assert fleet_view(run) is None
    assert "fleet [run0]" not in terminal(run)
    assert "Fleet" not in build_markdown(report)
    assert 'class="fleet' not in build_html_report(report, data)
    assert not any("replica" in k or "fleet" in k for k, _ in run_properties([run]))


def test_a_page_no_response_named_served_none() -> None:
    """Every replica the responses named has a page: page 1, named by none, served none
    (it counts 0 in the imbalance); where the names do not join, it is not attributed."""
    run = fleet_run()
    run["by_replica"] = {"0": client(12, 21.0, 90.0)}
    text = terminal(run)
    assert "imbalance 2.00" in text  # 12 and 0 over mean 6
    assert "replica 1: 0 req, 0 failed, ttft p99 -, e2e p99 -, queue p99 ≤ 80.0 ms" in text
    run["by_replica"] = {"w0": client(12, 21.0, 90.0)}  # a header that names them otherwise
    text = terminal(run)
    assert "replica 1: not attributed, page: 8 req" in text
    assert "replica w0 (no page): 12 req" in text


def test_disaggregated_attribution_names_the_decode_engines() -> None:
    """The header names the decode engine that answered: a decode page none named served
    none; a prefill engine is not attributed (the client cannot tell which prefilled)."""
    run = disaggregated_run()
    run["fleet"]["pages"].append(page("decode", "d1", requests=0, queue=1.0, kv=0.0, hits=0.0))
    run["by_replica"] = {"d0": client(12, 50.0, 200.0)}
    lines = terminal(run, width=80).splitlines()
    assert "      prefill p0: not attributed, page: 12 req, queue p99 ≤ 40.0 ms," in lines
    assert any(x.startswith("      decode d1: 0 req, 0 failed, ttft p99 -") for x in lines)
    assert any(x.startswith("      decode d0: 12 req, 0 failed, ttft p99 50.0 ms") for x in lines)
    assert all(len(x) <= 80 for x in lines if not x.startswith("    run0:"))
    run["fleet"]["notes"] = [
        "the whole adds the prefill and the decode pages: a request served by both counts on "
        "each (server.requests, tokens); the pools (roles) count it once each"
    ]
    lines = terminal(run, width=80).splitlines()
    at = lines.index(
        "    ! fleet [run0]: the whole adds the prefill and the decode pages: a request"
    )
    assert lines[at + 1].startswith("        served by both counts on each (server.requests,")
    html = build_html_report(report_of(session(run)))
    assert "requests per replica (client, else the page" in html  # p0 from its page
    assert re.findall(r'data-replica="(\w+)"', html)[:4] == ["p0", "d0", "d1", "d0"]
