"""``connection_retries`` in the reports: JSON always (0 included), HTML, and the terminal.

Whole pytest sessions against a loopback server (``closing_servers``) that
keeps its keep-alive promise, or that condemns each connection after one
answer and resets a request sent on it (the race a client always loses).
"""

from __future__ import annotations

import json

import pytest
from closing_servers import After, ClosingServer, serving

from pytest_llmperf.client.stream_client import BROKEN_PROMISES

PROMISE = {"Connection": "keep-alive", "Keep-Alive": "timeout=5, max=100"}


SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=4, output_tokens=3, requests=12)
@pytest.mark.llm_load("concurrency", concurrency=2)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_retried(llm_loadgen):
    await llm_loadgen.run()
"""


@pytest.mark.parametrize("after", [After.KEEP, After.CONDEMN])
def test_the_reports_carry_the_count(pytester: pytest.Pytester, after: After) -> None:
    """JSON ``runs[].counts.connection_retries`` always (0 included), the HTML table's
    column, and a terminal line when there were any; the requests all completed."""
    pytester.makepyfile(test_suite=SUITE)
    with serving(ClosingServer(after, PROMISE)) as server:
        result = pytester.runpytest(
            f"--llm-endpoint={server.url}",
            "--llm-json=report.json",
            "--llm-html=report.html",
            "-p",
            "no:cacheprovider",
        )
    assert result.ret == 0, result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    [run] = report["tests"][0]["runs"]
    retried = run["counts"]["connection_retries"]
    assert run["counts"]["completed"] == 12
    [group] = report["session"]["merged"].values()
    assert group["counts"]["connection_retries"] == retried
    html = (pytester.path / "report.html").read_text()
    assert "connection retries</th>" in html
    if after is After.KEEP:
        assert retried == 0
        assert "sent once more" not in result.stdout.str()
    else:
        # each of the first broken keep-alive promises, and at most one request per worker
        # already under way when the pool stopped keeping connections
        assert BROKEN_PROMISES <= retried <= BROKEN_PROMISES + 1
        result.stdout.fnmatch_lines([f"*! run0: {retried} request(s) sent once more on a new*"])
        assert f"{retried} request(s) lost on a reused connection" in html
