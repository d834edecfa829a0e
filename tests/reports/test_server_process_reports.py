"""A run's server process (``runs[].server_process``) in every report: the JSON (and the
session's ``servers``), the HTML table and exit banner, the Markdown line, the terminal's
line per run and, under the brief summary, only its exit. Hand-made blocks, no server."""

from __future__ import annotations

import copy
from typing import Any

from server_process_block import BLOCK
from synthetic_session import ENDPOINT, payload, synthetic_run

from pytest_llmperf.reports.html import build_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.junit import server_properties
from pytest_llmperf.reports.markdown import build_markdown
from pytest_llmperf.reports.server_process import process_line
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.terminal import summary_lines
from pytest_llmperf.slo.startup_regression import compare_process

NODEID = "tests/test_chat.py::test_latency"
EXIT = {
    "code": None,
    "signal": 9,
    "signal_name": "SIGKILL",
    "oom": True,
    "at_s": 12.3,
    "message": "server exited with signal 9 (SIGKILL, out of memory) at 12.3 s into run0",
    "log_tail": "INFO loading weights\nKilled <oom>",
}
SERVER = {"name": "vllm", "cmd": BLOCK["cmd"], "log": BLOCK["log"], "pid": 1234, "exit": None}


def session(block: dict[str, Any] | None, outcome: str = "passed") -> SessionData:
    run = synthetic_run(40, 200, seed=1, rate=40, label="run0")
    run.server_process = copy.deepcopy(block)
    data = SessionData()
    data.add(NODEID, outcome, payload([run], ["startup.ready_s < 90s"]))
    data.add_server(SERVER)
    data.add_server({**SERVER, "exit": "stopped"})  # described again at its stop: replaced
    return data


def died() -> dict[str, Any]:
    return {**copy.deepcopy(BLOCK), "exit": dict(EXIT)}


def test_the_json_carries_the_block_per_run_and_the_sessions_servers() -> None:
    report = build_report(session(BLOCK), endpoint=ENDPOINT, session={})
    (run,) = report["tests"][0]["runs"]
    assert run["server_process"] == BLOCK
    assert report["session"]["servers"] == [{**SERVER, "exit": "stopped"}]
    (verdict,) = report["tests"][0]["slos"]
    assert (verdict["verdict"], verdict["observed"], verdict["unit"]) == ("pass", 41.2, "s")
    plain = build_report(session(None), endpoint=ENDPOINT, session={})
    assert "server_process" not in plain["tests"][0]["runs"][0]


def test_the_html_has_a_server_process_table_with_the_log_linked() -> None:
    data = session(BLOCK)
    html = build_html_report(build_report(data, endpoint=ENDPOINT, session={}), data)
    section = html.split("<h4>Server process</h4>")[1].split("</section>")[0]
    for said in (
        "ready 41.2 s, first token 41.9 s (from spawn)",
        "start 812 MB, end 820 MB, max 830 MB, growth +8.5 MB",
        "12.3 s, 1.9 ms per output token",
        "not measured: no NVML (pip install pytest-llmperf[gpu])",
        '<a href="file:///tmp/llmperf-servers/vllm-1.log">/tmp/llmperf-servers/vllm-1.log</a>',
    ):
        assert said in section
    assert '<div class="server-exit' not in html  # green: no banner


def test_the_html_shows_an_exit_in_a_red_banner_with_the_log_tail() -> None:
    data = session(died(), outcome="failed")
    html = build_html_report(build_report(data, endpoint=ENDPOINT, session={}), data)
    banner = html.split('<div class="server-exit stopped">')[1].split("</div>")[0]
    assert "server exited with signal 9 (SIGKILL, out of memory) at 12.3 s into run0" in banner
    assert "Killed &lt;oom&gt;" in banner  # the tail, escaped


def test_markdown_gives_a_line_per_run_and_the_exit_in_bold() -> None:
    green = build_markdown(build_report(session(BLOCK), endpoint=ENDPOINT, session={}))
    assert "**The server process** (started by the gate):" in green
    assert "server vllm: ready 41.2 s (first token 41.9 s), RSS max 830 MB (+8.5)" in green
    red = build_markdown(build_report(session(died(), "failed"), endpoint=ENDPOINT, session={}))
    assert "; **server exited with signal 9 (SIGKILL, out of memory) at 12.3 s into run0**" in red


def test_the_terminal_says_one_line_per_run_and_under_brief_only_the_exit() -> None:
    assert process_line(BLOCK, "run0") == (
        "server vllm [run0]: ready 41.2 s (first token 41.9 s), RSS max 830 MB (+8.5), "
        "CPU 1.9 ms/token"
    )
    full = summary_lines(session(BLOCK), [], width=None)
    said = [line.strip() for line in full if "server vllm [run0]" in line]
    assert said == [process_line(BLOCK, "run0")]
    brief = summary_lines(session(BLOCK), [], width=None, brief=True)
    assert not any("server" in line for line in brief)  # green and brief: quiet
    dead = summary_lines(session(died(), "failed"), [], width=None)
    exits = [line for line in dead if "server exited" in line]
    assert exits == [
        "    ✗ run0: server exited with signal 9 (SIGKILL, out of memory) at 12.3 s into run0 "
        "(log: /tmp/llmperf-servers/vllm-1.log)"
    ]
    quiet = summary_lines(session(died(), "passed"), [], width=None, brief=True)
    assert [line for line in quiet if "server" in line] == exits  # brief: the exit alone


def test_junit_properties_carry_the_figures_the_log_and_the_exit() -> None:
    props = dict(server_properties([{"label": "run0", "server_process": died()}]))
    assert props["llm_server_process[startup.ready_s][run0]"] == "41.2 s"
    assert props["llm_server_process[server.rss_max_mb][run0]"] == "830 MB"
    assert props["llm_server_process[server.cpu_ms_per_output_token][run0]"] == "1.9 ms"
    assert "llm_server_process[server.gpu_mem_max_mb][run0]" not in props
    assert props["llm_server_process[run0].log"] == "/tmp/llmperf-servers/vllm-1.log"
    assert props["llm_server_process[run0].exit"].startswith("server exited with signal 9")
    assert server_properties([{"label": "run0"}]) == []


def test_a_startup_regression_is_shown_in_seconds() -> None:
    (check,) = compare_process({"startup": {"ready_s": 30.0}}, BLOCK, run="run0")
    data = session(BLOCK, outcome="failed")
    data.tests[NODEID].baseline.append(check.to_dict())
    html = build_html_report(build_report(data, endpoint=ENDPOINT, session={}), data)
    row = html.split("<td>startup.ready_s</td>")[1].split("</tr>")[0]
    assert '<td class="num">30.00 s</td><td class="num">41.20 s</td>' in row
    assert "regressed" in row
    lines = summary_lines(data, [], width=None)
    assert "  ✗ baseline startup.ready_s [run0]: regressed: 30.00 s -> 41.20 s (+37.3%)" in lines
