"""The ``llm_server`` marker: a server per test, module or session, started before the
test's first use of the endpoint and stopped when its scope ends; and xdist's one
session server, started by the controller."""

from __future__ import annotations

import json
import sys

import psutil
import pytest

PYTHON = sys.executable
SIM = f"{PYTHON} -m pytest_llmperf.sim --port {{port}} --profile tiny"


def _gated(name: str, marks: str = "", args: str = "llm_loadgen") -> str:
    return (
        f"{marks}"
        '@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=3)\n'
        '@pytest.mark.llm_load("concurrency", concurrency=3)\n'
        f"async def {name}({args}):\n"
        "    await llm_loadgen.run()\n"
    )


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_restart_test_gives_each_test_its_own_server(pytester: pytest.Pytester) -> None:
    mark = f"@pytest.mark.llm_server(cmd={SIM!r}, restart='test')\n"
    pytester.makepyfile(
        test_marked="import pytest\n\n\n"
        + _gated("test_one", mark)
        + "\n\n"
        + _gated("test_two", mark, "llm_loadgen, llm_endpoint, llm_endpoints")
        + "    assert llm_endpoints.server_for(llm_endpoint) is not None\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--llm-json=r.json")
    assert result.ret == 0, result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    # (test_two's llm_endpoint argument, a session fixture, started the simulator too)
    servers = [s for s in report["session"]["servers"] if s["restart"] == "test"]
    assert len(servers) == 2 and len({s["pid"] for s in servers}) == 2
    assert all(s["restart"] == "test" and s["startup"]["ready_s"] > 0 for s in servers)
    assert all(s["stopped_by"] == "pytest-llmperf" and not _alive(s["pid"]) for s in servers)
    urls = [t["endpoint"]["url"] for t in report["tests"]]
    assert sorted(urls) == sorted(s["url"] + "/v1" for s in servers)


def test_restart_module_shares_one_server_in_the_module(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_marked=f"import pytest\n\npytestmark = pytest.mark.llm_server(cmd={SIM!r}, "
        "restart='module')\n\n\n" + _gated("test_one") + "\n\n" + _gated("test_two")
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--llm-json=r.json")
    assert result.ret == 0, result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    [server] = report["session"]["servers"]
    assert {t["endpoint"]["url"] for t in report["tests"]} == {server["url"] + "/v1"}


def test_a_bad_llm_server_marker_names_the_test(pytester: pytest.Pytester) -> None:
    mark = f"@pytest.mark.llm_server(cmd={SIM!r}, restart='weekly')\n"
    pytester.makepyfile(test_marked="import pytest\n\n\n" + _gated("test_one", mark))
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*test_marked.py::test_one llm_server marker: restart must be one of*weekly*"]
    )


def test_under_xdist_the_controller_starts_one_server(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(
        test_shared="import pytest\n\n\n" + _gated("test_one") + "\n\n" + _gated("test_two")
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-n", "2", f"--llm-server-cmd={SIM}", "--llm-json=r.json"
    )
    assert result.ret == 0, result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    [server] = report["session"]["servers"]  # the controller's: no worker started one
    assert {t["endpoint"]["url"] for t in report["tests"]} == {server["url"] + "/v1"}
    assert len(report["tests"]) == 2 and not _alive(server["pid"])


def test_a_module_server_that_exited_is_started_afresh(pytester: pytest.Pytester) -> None:
    kill = (
        "    server = llm_endpoints.server_for(llm_endpoint)\n"
        "    os.kill(server.pid, 9)\n"
        "    server.wait(10)\n"
    )
    pytester.makepyfile(
        test_marked=f"import os\n\nimport pytest\n\npytestmark = pytest.mark.llm_server("
        f"cmd={SIM!r}, restart='module')\n\n\n"
        + _gated("test_one", args="llm_loadgen, llm_endpoint, llm_endpoints")
        + kill
        + "\n\n"
        + _gated("test_two")
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--llm-json=r.json")
    assert result.ret == 0, result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    servers = [s for s in report["session"]["servers"] if s["restart"] == "module"]
    assert len(servers) == 2 and servers[0]["exit"]["signal"] == 9
    assert [t["endpoint"]["url"] for t in report["tests"]] == [s["url"] + "/v1" for s in servers]
