"""Secrets: the API key and URL credentials never appear in any artefact.

A real pytest session runs against a local server that insists on the key in
the ``Authorization`` header and is hostile in the ways real servers are: it
echoes the key back in a 401 body, in an HTML error page and in an error
frame mid-stream. Then every byte the session produced — terminal output,
JSON, JUnit XML, HTML, event logs (SQLite, including WAL files), baseline —
is searched for the key. The same for ``user:password@`` in the endpoint URL.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

from odd_servers import OddServer, Request, Wire, content_chunk, error_body, serve_in_thread, sse_ok

from pytest_llmperf.client.negotiation import PROBE_SAMPLE

KEY = "sk-hardening-Zq8XvT2mK9pLw4Rj"
PASSWORD = "pw-hardening-Hn5Bc7Yd"

SESSION_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=24)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("error_rate < 1%", "ttft.p50 < 10s")
async def test_with_key(llm_loadgen):
    await llm_loadgen.run()
"""


def _hostile(expected_auth: str, secret: str):
    """Answers well when the header is right, and leaks ``secret`` back in its errors."""
    count = 0

    async def behaviour(req: Request, wire: Wire) -> None:
        nonlocal count
        count += 1
        if req.headers.get("authorization") != expected_auth:
            await wire.whole(401, error_body("missing or wrong key", "auth_error"))
            return
        match count % 4:
            case 1:
                message = f"Incorrect API key provided: {secret}. Authorization: {expected_auth}"
                await wire.whole(401, error_body(message, "invalid_request_error"))
            case 2:
                page = f"<html>upstream said: {expected_auth} ({secret})</html>".encode()
                await wire.whole(502, page, {"Content-Type": "text/html"})
            case 3:
                await wire.head()
                await wire.event(content_chunk("a"))
                await wire.event({"error": {"message": f"token {secret} revoked"}})
                await wire.end()
            case _:
                await sse_ok(req, wire)

    return behaviour


def _run_session(tmp: Path, endpoint: str, env: dict[str, str]) -> str:
    (tmp / "test_secret.py").write_text(SESSION_TEST)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-rA",
            "-l",  # show locals in tracebacks: the key must not be in any of them either
            "-p",
            "no:cacheprovider",
            f"--llm-endpoint={endpoint}",
            f"--llm-json={tmp / 'out' / 'report.json'}",
            f"--llm-html={tmp / 'out' / 'report.html'}",
            f"--llm-events={tmp / 'out' / 'events'}",
            f"--llm-baseline-save={tmp / 'out' / 'baseline.json'}",
            f"--junitxml={tmp / 'out' / 'junit.xml'}",
            "test_secret.py",
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        timeout=120,
    )
    output = (proc.stdout + proc.stderr).decode(errors="replace")
    assert proc.returncode == 1, output  # the SLO fails (errors were served), the run completes
    return output


def _load_posts(server: OddServer) -> list:
    """The run's POSTs, without the preflight's field probe (it carries the secret too) and
    any tokenizer calls."""
    probe = PROBE_SAMPLE.prompt.encode()
    posts = [r for r in server.requests if r.method == "POST" and r.path.endswith("completions")]
    assert sum(probe in r.body for r in posts) >= 1  # the probe ran, with the same credentials
    return [r for r in posts if probe not in r.body]


def _artefacts(tmp: Path) -> dict[str, bytes]:
    files = {str(p): p.read_bytes() for p in (tmp / "out").rglob("*") if p.is_file()}
    assert any(name.endswith(".sqlite") for name in files), sorted(files)
    assert {"report.json", "report.html", "junit.xml", "baseline.json"} <= {
        Path(name).name for name in files
    }, sorted(files)
    return files


def _assert_nowhere(secret: str, output: str, files: dict[str, bytes]) -> None:
    assert secret not in output, "secret in terminal output"
    needles = [secret.encode(), secret.encode("utf-16-le")]
    for name, data in files.items():
        for needle in needles:
            assert needle not in data, f"secret in {name}"


def test_api_key_is_sent_only_in_the_header_and_never_written(tmp_path):
    server = OddServer(_hostile(f"Bearer {KEY}", KEY))
    with serve_in_thread(server):
        env = {**os.environ, "OPENAI_API_KEY": KEY}
        output = _run_session(tmp_path, server.url, env)
    posts = _load_posts(server)
    assert len(posts) == 24
    for request in server.requests:
        assert request.headers.get("authorization") == f"Bearer {KEY}"
        assert KEY not in request.path and KEY.encode() not in request.body
    assert "75.00%" in output  # 18 of 24 requests failed, and the report says so...
    _assert_nowhere(KEY, output, _artefacts(tmp_path))  # ...without the key


def test_url_credentials_are_sent_as_basic_auth_and_never_written(tmp_path):
    basic = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    server = OddServer(_hostile(basic, PASSWORD))
    with serve_in_thread(server):
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        endpoint = server.url.replace("http://", f"http://alice:{PASSWORD}@")
        output = _run_session(tmp_path, endpoint, env)
    posts = _load_posts(server)
    assert len(posts) == 24
    assert all(r.headers.get("authorization") == basic for r in server.requests)
    files = _artefacts(tmp_path)
    _assert_nowhere(PASSWORD, output, files)
    assert f"alice:{PASSWORD}" not in output


def test_the_endpoint_object_never_prints_its_secrets():
    from pytest_llmperf.client.endpoint import Endpoint

    endpoint = Endpoint.from_env(
        f"https://alice:{PASSWORD}@gpu-box.example:8443/v1", api_key_env=None
    )
    keyed = Endpoint(endpoint.base_url, api_key=KEY)
    for shown in (repr(endpoint), str(endpoint), endpoint.label, str(endpoint.describe())):
        assert PASSWORD not in shown
    for shown in (repr(keyed), str(keyed), keyed.label, str(keyed.describe())):
        assert KEY not in shown
    assert endpoint.request_url == "https://gpu-box.example:8443/v1/chat/completions"
    assert set(endpoint.secrets) == {PASSWORD} and set(keyed.secrets) == {KEY}


def test_scrub_masks_keys_url_credentials_and_auth_values():
    from pytest_llmperf.redaction import scrub

    text = (
        f"401: Incorrect API key provided: {KEY}; retry at "
        f"http://alice:{PASSWORD}@h:1/v1 with header Authorization: Bearer abcdef123456 "
        "or Basic YWxpY2U6cHc="
    )
    clean = scrub(text, KEY, PASSWORD)
    for secret in (KEY, PASSWORD, "abcdef123456", "YWxpY2U6cHc="):
        assert secret not in clean
    assert "http://***@h:1/v1" in clean
    assert scrub("plain text, http://h:1/v1", KEY) == "plain text, http://h:1/v1"
