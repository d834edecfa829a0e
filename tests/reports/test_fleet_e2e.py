"""End to end: a run on the simulator's two replicas behind its round-robin router (a
real HTTP server on 127.0.0.1, each response naming its replica in ``x-replica-id``),
each replica's own ``/metrics`` page found in the simulator's listing, its ``replica.*``
verdicts, and every report's per-replica view of it: the terminal's
block, the Markdown table (the client's columns joined with the page of the same name),
the HTML table and bars, the JUnit properties. The counts per replica add up to the
client's, and each page counts its own; latencies are only checked to be there (a busy
machine)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from synthetic_session import ENDPOINT

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.reports.html import build_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.junit import run_properties
from pytest_llmperf.reports.markdown import build_markdown
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.terminal import summary_lines
from pytest_llmperf.server_metrics.fleet_source import resolve_metrics
from pytest_llmperf.sim import start_sim_process
from pytest_llmperf.slo.verdicts import evaluate_runs
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.specs.slo import parse_slo

NODEID = "tests/test_fleet.py::test_two_replicas"


@pytest.mark.asyncio
async def test_two_replicas_in_every_report() -> None:
    # the simulator in a process of its own: in this one its work would count as the
    # client's CPU, and on a busy machine the run would be "generator bound" (inconclusive)
    server = start_sim_process("fixed", overrides={"ttft_ms": 5.0, "itl_ms": 1.0, "replicas": 2})
    try:
        endpoint = Endpoint(server.url + "/v1", timeouts=Timeouts.from_seconds(20))
        # each replica's own page, found in the simulator's listing
        source, _ = await asyncio.to_thread(resolve_metrics, endpoint, "discover,0.2")
        load = LoadSpec.parse("concurrency", {"concurrency": 2})
        params = {"input_tokens": 8, "output_tokens": 4}
        spec = RunSpec("synthetic", params, 0, load, 8)
        result = await LoadRun(endpoint, spec, server_metrics=source).execute()
    finally:
        server.stop()
    result.label = "run0"
    slos = ["replica.ttft.p99 < 60s", "replica.e2e.max < 0.001ms", "fleet.imbalance < 1.5"]
    verdicts = [v.to_dict() for v in evaluate_runs([parse_slo(e) for e in slos], [result])]
    run: dict[str, Any] = result.to_dict()
    counts = {name: entry["counts"]["issued"] for name, entry in run["by_replica"].items()}
    assert counts == {"0": 4, "1": 4}  # round robin, and they add up to the client's 8
    data = SessionData()
    data.add(NODEID, "failed", {"endpoint": ENDPOINT, "runs": [run], "slos": verdicts})
    report = build_report(data, endpoint=ENDPOINT, session={"exitstatus": 1, "options": {}})

    text = "\n".join(summary_lines(data, [], width=None))
    assert "fleet [run0]: 2 replica(s), 2 page(s), imbalance 1.00" in text
    for name in ("0", "1"):  # every replica failed the impossible e2e target
        assert re.search(rf"✗ replica {name}: 4 req, 0 failed, ttft p99 \S+ ms", text)
        assert f"✗ replica.e2e.max < 0.001ms [run0] [replica {name}]" in text
    # a ratio is said as the grammar writes it (fleet.imbalance < 1.5x), not "1.00 ratio"
    assert "observed 1.00x, target 1.50x" in text, text

    # the client's 4 requests beside the page's own count of them
    markdown = build_markdown(report)
    rows = [x for x in markdown.splitlines() if re.match(r"\| [01] \| replica \| 4/4 \|", x)]
    assert len(rows) == 2 and all(x.endswith("| ❌ fail |") for x in rows)
    assert all(x.split(" | ")[7] == "4" for x in rows)

    html = build_html_report(report, data)
    part = html[html.index('<section class="fleet">') :]
    assert re.findall(r'data-replica="(\d)"', part)[:4] == ["0", "1", "0", "1"]
    assert "✗ replica.e2e.max &lt; 0.001ms" in part

    props = dict(run_properties([run]))
    assert props["llm_run[run0][replica 0].issued"] == "4"
    assert props["llm_run[run0][replica 1].completed"] == "4"
    assert props["llm_fleet[run0].imbalance"] == "1.00"
    assert props["llm_fleet[run0].not_attributed"] == "0"
