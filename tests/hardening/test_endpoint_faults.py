"""Endpoint faults end as failed requests with a reason category, never a crash or a hang.

Each case runs the library's real client against a real socket on 127.0.0.1:
a purpose-built odd server (``faults.py``), a closed port, a ``.invalid`` host
name (reserved: resolves nowhere, no traffic leaves the machine) or a TLS
server with a self-signed certificate made for the test. One row each of
docs/fault-matrix.md.
"""

from __future__ import annotations

import asyncio
import socket

import faults
import pytest
from faults import FAST, send_one
from odd_servers import OddServer
from tls_certs import self_signed_server_context

from pytest_llmperf.client.endpoint import Timeouts
from pytest_llmperf.client.records import ErrorKind

CASES = [
    # (behaviour, expected kind, text the detail must contain)
    (faults.stall_before_headers, ErrorKind.READ_TIMEOUT, "no bytes for 0.4 s"),
    (faults.stall_before_first_token, ErrorKind.READ_TIMEOUT, "no bytes for 0.4 s"),
    (faults.stall_mid_stream, ErrorKind.READ_TIMEOUT, "no bytes for 0.4 s"),
    (faults.keepalives_only, ErrorKind.FIRST_TOKEN_TIMEOUT, "first token"),
    (faults.never_ending, ErrorKind.TOTAL_TIMEOUT, "end of stream"),
    (faults.cut_mid_stream, ErrorKind.TRUNCATED, "closed the connection mid-body"),
    (faults.ends_without_finish, ErrorKind.TRUNCATED, "without finish_reason"),
    (faults.hang_up_at_once, ErrorKind.TRUNCATED, "closed the connection before the response head"),
    (faults.not_http, ErrorKind.PROTOCOL, "not an HTTP response"),
    (faults.malformed_json, ErrorKind.PROTOCOL, "malformed stream chunk"),
    (faults.json_not_object, ErrorKind.PROTOCOL, "not a JSON object"),
    (faults.wrong_shape_chunk, ErrorKind.PROTOCOL, "malformed stream chunk"),
    (faults.error_frame_mid_stream, ErrorKind.STREAM_ERROR, "CUDA out of memory"),
    (faults.empty_stream, ErrorKind.EMPTY, "no generated text"),
    (faults.status_429_retry_after, ErrorKind.RATE_LIMITED, "Retry-After: 7"),
    (faults.status_500_openai_body, ErrorKind.HTTP, "HTTP 500: The engine is dead"),
    (faults.status_502_html, ErrorKind.HTTP, "HTTP 502: <html>"),
    (faults.status_503_empty, ErrorKind.HTTP, "HTTP 503"),
    (faults.status_400_openai_body, ErrorKind.HTTP, "max_tokens is too large"),
    (faults.status_404_plain, ErrorKind.HTTP, "HTTP 404: Not Found"),
    (faults.redirect, ErrorKind.HTTP, "redirects are not followed"),
    (faults.endless_line, ErrorKind.FIRST_TOKEN_TIMEOUT, "first token"),
]


@pytest.mark.parametrize(("behaviour", "kind", "detail"), CASES, ids=[c[0].__name__ for c in CASES])
@pytest.mark.asyncio
async def test_fault_is_a_failed_request_with_its_category(behaviour, kind, detail):
    async with OddServer(behaviour) as server:
        loop = asyncio.get_running_loop()
        started = loop.time()
        record = await send_one(server.url)
        elapsed = loop.time() - started
    assert record.error == kind, record.error_detail
    assert detail in record.error_detail
    assert record.t_end >= record.t_send > 0
    # Bounded by the configured limits (total 1.5 s), with slack for a loaded machine.
    assert elapsed < FAST.total + 1.0


@pytest.mark.asyncio
async def test_huge_chunk_is_measured_not_rejected():
    async with OddServer(faults.huge_chunk) as server:
        record = await send_one(server.url, timeouts=Timeouts(5, 10, 10, 20))
    assert record.ok, record.error_detail
    assert record.token_events == 1
    assert record.output_tokens == 1


@pytest.mark.asyncio
async def test_completions_api_sees_the_same_categories():
    async with OddServer(faults.status_429_retry_after) as server:
        record = await send_one(server.url, api="completions")
    assert record.error == ErrorKind.RATE_LIMITED
    assert server.requests[-1].path == "/v1/completions"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: nothing listens there


@pytest.mark.asyncio
async def test_connection_refused():
    record = await send_one(f"http://127.0.0.1:{_closed_port()}")
    assert record.error == ErrorKind.CONNECT
    assert "127.0.0.1" in record.error_detail


@pytest.mark.asyncio
async def test_dns_failure_on_reserved_invalid_name():
    record = await send_one("http://llm-server.invalid:8000")
    assert record.error == ErrorKind.DNS
    assert "llm-server.invalid" in record.error_detail


@pytest.mark.asyncio
async def test_connect_timeout_when_the_backlog_is_full():
    """A listening socket that never accepts, with its backlog full: SYNs go unanswered."""
    with faults.unanswered_port() as port:
        record = await send_one(f"http://127.0.0.1:{port}", timeouts=Timeouts(0.3, 1.0, 1.0, 1.0))
    assert record.error == ErrorKind.CONNECT_TIMEOUT, record.error_detail


@pytest.mark.asyncio
async def test_tls_self_signed_certificate_is_rejected(tmp_path):
    context = self_signed_server_context(tmp_path)
    async with OddServer(ssl_context=context) as server:
        record = await send_one(server.url)
    assert record.error == ErrorKind.TLS
    assert "certificate" in record.error_detail.lower()


@pytest.mark.asyncio
async def test_tls_to_a_plain_http_server():
    async with OddServer(greeting=b"HTTP/1.1 400 Bad Request\r\n\r\n") as server:
        record = await send_one(server.url.replace("http://", "https://"))
    assert record.error == ErrorKind.TLS, record.error_detail


@pytest.mark.asyncio
async def test_runaway_line_is_cut_off_with_bounded_memory(monkeypatch):
    """A line that never ends fails as a protocol error once it passes the parser's cap."""
    from pytest_llmperf.client import sse

    monkeypatch.setattr(sse, "MAX_LINE_BYTES", 4 * 1024 * 1024)
    monkeypatch.setattr(sse.SSEParser.__init__, "__defaults__", (4 * 1024 * 1024,))
    async with OddServer(faults.endless_line) as server:
        record = await send_one(server.url, timeouts=Timeouts(5, 30, 30, 30))
    assert record.error == ErrorKind.PROTOCOL, record.error_detail
    assert "exceeded" in record.error_detail


def test_sse_parser_joins_a_huge_line_in_linear_time():
    """64 MB in 16 KB reads: each read must not re-copy what came before (O(n) not O(n^2))."""
    import time

    from pytest_llmperf.client.sse import SSEParser

    parser = SSEParser()
    piece = b"x" * 16384
    started = time.process_time()
    assert parser.feed(b"data: ") == []
    for _ in range(2048):  # 32 MB
        assert parser.feed(piece) == []
    events = parser.feed(b"\n\n")
    assert time.process_time() - started < 5.0  # quadratic copying would take minutes
    assert len(events) == 1 and len(events[0]) == 2048 * 16384


@pytest.mark.asyncio
async def test_tls_server_with_a_private_ca_works_via_ssl_cert_file(tmp_path, monkeypatch):
    """The one environment setting the client honours: SSL_CERT_FILE (proxies stay ignored)."""
    context = self_signed_server_context(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
    async with OddServer(ssl_context=context) as server:
        record = await send_one(server.url)
    assert record.ok, record.error_detail
    assert record.token_events == 3


@pytest.mark.asyncio
async def test_unreadable_ssl_cert_file_is_a_usage_error(tmp_path, monkeypatch):
    from pytest_llmperf.errors import LlmPerfUsageError

    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(LlmPerfUsageError, match="SSL_CERT_FILE"):
        await send_one("https://127.0.0.1:9")
