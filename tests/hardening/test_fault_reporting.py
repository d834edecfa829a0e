"""Faults as a session sees them: counted in error_rate, broken down in the report, fast to fail.

Real pytest sessions (subprocesses) against real sockets: a server that
answers with a different fault per request, a closed port, a ``.invalid``
host. The per-request timeouts come from ``--llm-timeout`` in its
``key=seconds`` form, so the slow faults end quickly.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import faults
from odd_servers import OddServer, Request, Wire, error_body, serve_in_thread, sse_ok

MIXED_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=40)
@pytest.mark.llm_load("concurrency", concurrency=8)
async def test_mixed(llm_loadgen):
    result = await llm_loadgen.run()
    print("ERRORS", result.errors)
"""

ROTATION = [
    sse_ok,
    faults.status_429_retry_after,
    faults.status_502_html,
    faults.cut_mid_stream,
    faults.malformed_json,
    faults.error_frame_mid_stream,
    faults.stall_mid_stream,
    faults.not_http,
]
EXPECTED = {
    "rate_limited": 5,
    "http_error": 5,
    "truncated_stream": 5,
    "protocol_error": 10,
    "stream_error_frame": 5,
    "stall_timeout": 5,
}


def _rotating():
    count = 0

    async def behaviour(req: Request, wire: Wire) -> None:
        nonlocal count
        body = req.json() or {}
        index = count
        count += 1
        assert body.get("stream") is True
        await ROTATION[index % len(ROTATION)](req, wire)

    return behaviour


def _pytest(tmp: Path, *args: str, test: str = MIXED_TEST) -> tuple[int, str, float]:
    (tmp / "test_session.py").write_text(test)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *args],
        cwd=tmp,
        capture_output=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    return proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace"), elapsed


def test_every_fault_is_counted_and_broken_down_in_the_report(tmp_path):
    server = OddServer(_rotating())
    with serve_in_thread(server):
        rc, out, _ = _pytest(
            tmp_path,
            f"--llm-endpoint={server.url}",
            f"--llm-json={tmp_path / 'report.json'}",
            "--llm-timeout=connect=2,first_token=5,stall=0.5,total=5",
        )
    assert rc == 0, out  # no SLO declared: the test itself passes, the faults are data
    assert "Traceback" not in out
    # The terminal summary says why, most frequent first.
    assert "errors 87.50% (protocol_error 10, " in out and "stall_timeout 5" in out
    run = json.loads((tmp_path / "report.json").read_text())["tests"][0]["runs"][0]
    assert run["counts"]["issued"] == 40
    assert run["counts"]["completed"] == 5
    assert run["counts"]["failed"] == 35
    assert run["metrics"]["error_rate"] == 35 / 40
    assert run["errors"] == EXPECTED
    assert run["metrics"]["ttft"]["count"] == 5  # failures never enter latency histograms


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


DEAD_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", requests=50)
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_one(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", requests=50)
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_two(llm_loadgen):
    await llm_loadgen.run()
"""


def _assert_one_clear_message(
    rc: int, out: str, elapsed: float, *fragments: str, status: int = 4
) -> None:
    """``status`` 4: the user's mistake (nothing answers, refused credentials); 1: a server
    that answers but is broken fails the gate (docs/gate-states.md). Nothing was measured."""
    assert rc == status, out
    assert elapsed < 20, f"{elapsed:.1f} s"
    assert "Traceback" not in out and "test_one" not in out and "test_two" not in out, out
    lines = [x for x in out.splitlines() if "pytest-llmperf" in x]
    assert len(lines) == 1, out
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_dead_endpoint_fails_once_and_clearly(tmp_path):
    port = _closed_port()
    rc, out, elapsed = _pytest(tmp_path, f"--llm-endpoint=http://127.0.0.1:{port}", test=DEAD_TEST)
    _assert_one_clear_message(rc, out, elapsed, f"127.0.0.1:{port}", "connect_error", "running")


def test_dead_endpoint_with_model_given_fails_once_and_clearly(tmp_path):
    port = _closed_port()
    rc, out, elapsed = _pytest(
        tmp_path, f"--llm-endpoint=http://127.0.0.1:{port}", "--llm-model=m", test=DEAD_TEST
    )
    _assert_one_clear_message(rc, out, elapsed, f"127.0.0.1:{port}", "connect_error")


def test_unresolvable_host_fails_once_and_clearly(tmp_path):
    rc, out, elapsed = _pytest(
        tmp_path, "--llm-endpoint=http://llm.invalid:8000", "--llm-model=m", test=DEAD_TEST
    )
    _assert_one_clear_message(rc, out, elapsed, "llm.invalid", "dns_error")


def test_server_that_accepts_but_never_answers_fails_within_the_timeouts(tmp_path):
    server = OddServer(faults.stall_before_headers, models=False)
    with serve_in_thread(server):
        url = server.url
        rc, out, elapsed = _pytest(
            tmp_path,
            f"--llm-endpoint={url}",
            "--llm-model=m",
            "--llm-timeout=connect=1,first_token=2,stall=2,total=2",
            test=DEAD_TEST,
        )
    # it accepted the connection: a server is there, and it stalls (not the user's mistake)
    _assert_one_clear_message(
        rc, out, elapsed, url.split("//")[1], "never answered", "the gate did not run", status=1
    )


GATED_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=20)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p99 < 500ms")
async def test_gate(llm_loadgen):
    await llm_loadgen.run()
"""


def test_a_gate_over_a_run_where_everything_failed_fails_even_when_inconclusive_is_relaxed(
    tmp_path,
):
    """No latency can be measured when no request succeeded; that must not pass as a warning."""

    async def probe_ok_then_500(req: Request, wire: Wire) -> None:
        # a 500 to the preflight's probe too would stop the session there (retried, then a
        # usage error: test_metadata_deadlines.py); here only the run's requests fail
        probe = b"Say hello." in req.body
        await (sse_ok if probe else faults.status_500_openai_body)(req, wire)

    server = OddServer(probe_ok_then_500)
    with serve_in_thread(server):
        rc, out, _ = _pytest(
            tmp_path, f"--llm-endpoint={server.url}", "--llm-inconclusive=warn", test=GATED_TEST
        )
    assert rc == 1, out
    assert "every request failed" in out and "http_error x20" in out


def _auth_required(token: str):
    async def behaviour(req: Request, wire: Wire) -> None:
        if req.headers.get("authorization") != f"Bearer {token}":
            await wire.whole(401, error_body(f"invalid key {req.headers.get('authorization')}"))
        else:
            await sse_ok(req, wire)

    return behaviour


def test_refused_credentials_fail_once_and_clearly_without_printing_the_key(tmp_path):
    import os

    wrong = "sk-wrong-key-Qm3Lp8Vx"
    server = OddServer(_auth_required("sk-right-key"), models=False)
    with serve_in_thread(server):
        url = server.url
        env = {**os.environ, "OPENAI_API_KEY": wrong}
        (tmp_path / "test_session.py").write_text(DEAD_TEST)
        started = time.monotonic()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--llm-endpoint={url}",
            ],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
            env=env,
        )
    out = (proc.stdout + proc.stderr).decode(errors="replace")
    _assert_one_clear_message(
        proc.returncode, out, time.monotonic() - started, "HTTP 401", "--llm-api-key-env"
    )
    assert wrong not in out
    assert sum(r.method == "POST" for r in server.requests) == 0  # no load was sent


def test_dead_endpoint_under_xdist_fails_once_and_clearly(tmp_path):
    """Under xdist a worker's usage error would be an INTERNALERROR: the controller checks."""
    import pytest

    pytest.importorskip("xdist")
    port = _closed_port()
    rc, out, elapsed = _pytest(
        tmp_path, "-n", "2", f"--llm-endpoint=http://127.0.0.1:{port}", test=DEAD_TEST
    )
    assert "INTERNALERROR" not in out
    _assert_one_clear_message(rc, out, elapsed, f"127.0.0.1:{port}", "connect_error")
