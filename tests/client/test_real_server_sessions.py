"""Whole sessions against a strict server: what a user sees in the terminal and the reports."""

from __future__ import annotations

import json

import pytest
from strict_server import StrictServer, serve

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=6, requests=12{extra})
@pytest.mark.llm_load("concurrency", concurrency=3)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_strict(llm_loadgen):
    await llm_loadgen.run()
"""


def _session(pytester: pytest.Pytester, server: StrictServer, *args: str, extra: str = ""):
    pytester.makepyfile(test_suite=SUITE.format(extra=extra))
    return pytester.runpytest(
        f"--llm-endpoint={server.url}", "--llm-json=report.json", "-p", "no:cacheprovider", *args
    )


def test_a_strict_server_runs_clean_and_the_report_says_what_it_refused(pytester):
    with serve(StrictServer(style="pydantic")) as server:
        result = _session(pytester, server, "--junitxml=junit.xml")
    assert result.ret == 0, result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    fields = report["endpoint"]["request_fields"]
    assert fields["ignore_eos"] is False and "ignore_eos" in fields["refused"]["ignore_eos"]
    [run] = report["tests"][0]["runs"]
    assert run["counts"]["completed"] == 12 and run["error_samples"] == []
    assert run["metrics"]["ttfo"]["count"] == 12
    assert run["token_lengths"]["output_server_mean"] == server.tokens
    assert any("refused ignore_eos" in note for note in fields["notes"]), fields
    # no output fell short of its length: the refusal is recorded, not said (issue 36)
    assert "refused ignore_eos" not in result.stdout.str()


@pytest.mark.parametrize(
    ("args", "extra", "where"),
    [
        (("--llm-request-extra", '{"top_k": 5}'), "", "--llm-request-extra"),
        ((), ', extra_body={"top_k": 5}', "test_suite.py::test_strict llm_workload"),
    ],
)
def test_a_user_field_the_server_refuses_stops_the_session_before_load(
    pytester, args, extra, where
):
    with serve(StrictServer()) as server:
        result = _session(pytester, server, *args, extra=extra)
        loaded = [s for s in server.served if "Say hello." not in json.dumps(s.body)]
    assert result.ret not in (0, 1), result.stdout.str()  # a usage error, not a test failure
    output = result.stdout.str() + result.stderr.str()
    assert "Unrecognized request argument supplied: top_k" in output
    assert where in output
    assert "Traceback" not in output
    assert loaded == []  # only the preflight's probes reached the server: no load was sent


def test_failed_requests_show_the_servers_message_in_terminal_json_and_junit(pytester):
    class Refuses(StrictServer):
        """Accepts the probes, then refuses every request of the run with a 422 of its own."""

        def _refusal(self, body, *, chat):
            if "Say hello." in json.dumps(body):
                return super()._refusal(body, chat=chat)
            return 422, {"error": "prompt rejected by policy P-7"}

    with serve(Refuses()) as server:
        result = _session(pytester, server, "--junitxml=junit.xml")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*http_error x12: HTTP 422: prompt rejected by policy P-7*"])
    report = json.loads((pytester.path / "report.json").read_text())
    [run] = report["tests"][0]["runs"]
    assert run["error_samples"] == [
        {
            "kind": "http_error",
            "status": 422,
            "message": "prompt rejected by policy P-7",
            "count": 12,
        }
    ]
    junit = (pytester.path / "junit.xml").read_text()
    assert "prompt rejected by policy P-7" in junit
