"""The metadata client (httpx) fails with the same categories as the load generator.

``Endpoint.client()`` serves the metadata client (``client/metadata.py``: model
discovery, preflight, ``/tokenize``, ``/metrics``); its exceptions are
classified by ``client/failures.py``. Its deadlines and retries are tested in
``test_metadata_deadlines.py``. Each case is a real
socket on 127.0.0.1 (or a ``.invalid`` name), the real ``httpx`` transport,
and the category the load generator's own client gives the same fault
(``test_endpoint_faults.py``).
"""

from __future__ import annotations

import socket
import ssl

import faults
import httpx
import pytest
from odd_servers import OddServer
from tls_certs import self_signed_server_context

from pytest_llmperf.client.endpoint import Endpoint, Timeouts, normalize_base_url
from pytest_llmperf.client.failures import classify_transport_error
from pytest_llmperf.client.preflight import preflight
from pytest_llmperf.client.records import ErrorKind
from pytest_llmperf.errors import LlmPerfUsageError, StopCause

SHORT = Timeouts(connect=0.5, first_token=0.5, stall=0.5, total=1.0)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _failure(url: str, timeouts: Timeouts = SHORT) -> tuple[ErrorKind, str]:
    endpoint = Endpoint(normalize_base_url(url), model="m", timeouts=timeouts)
    async with endpoint.client(max_connections=2) as http:
        with pytest.raises(httpx.TransportError) as info:
            response = await http.post(f"{endpoint.base_url}/chat/completions", json={})
            await response.aread()
    return classify_transport_error(info.value)


@pytest.mark.asyncio
async def test_refused_is_a_connect_error_naming_the_socket_error() -> None:
    kind, detail = await _failure(f"http://127.0.0.1:{_closed_port()}")
    assert kind == ErrorKind.CONNECT
    assert "ConnectionRefusedError" in detail


@pytest.mark.asyncio
async def test_unknown_host_is_a_dns_error() -> None:
    kind, detail = await _failure("http://llm-server.invalid:8000")
    assert kind == ErrorKind.DNS, detail


@pytest.mark.asyncio
async def test_self_signed_certificate_is_a_tls_error(tmp_path) -> None:
    async with OddServer(ssl_context=self_signed_server_context(tmp_path)) as server:
        kind, detail = await _failure(server.url)
    assert kind == ErrorKind.TLS
    assert "certificate" in detail.lower()


@pytest.mark.asyncio
async def test_tls_to_a_plain_http_server_is_a_tls_error() -> None:
    async with OddServer(greeting=b"HTTP/1.1 400 Bad Request\r\n\r\n") as server:
        kind, detail = await _failure(server.url.replace("http://", "https://"))
    assert kind == ErrorKind.TLS, detail


@pytest.mark.asyncio
async def test_unanswered_syns_are_a_connect_timeout() -> None:
    with faults.unanswered_port() as port:
        kind, detail = await _failure(f"http://127.0.0.1:{port}", Timeouts(0.3, 1, 1, 1))
    assert kind == ErrorKind.CONNECT_TIMEOUT, detail


@pytest.mark.parametrize(
    ("behaviour", "kind"),
    [
        (faults.hang_up_at_once, ErrorKind.TRUNCATED),
        (faults.cut_mid_stream, ErrorKind.TRUNCATED),
        (faults.not_http, ErrorKind.PROTOCOL),
        (faults.stall_before_headers, ErrorKind.READ_TIMEOUT),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
@pytest.mark.asyncio
async def test_server_faults_keep_their_categories(behaviour, kind) -> None:
    async with OddServer(behaviour) as server:
        got, detail = await _failure(server.url)
    assert got == kind, detail


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (socket.gaierror(-2, "Name or service not known"), ErrorKind.DNS),
        (ssl.SSLCertVerificationError("certificate verify failed"), ErrorKind.TLS),
        (ConnectionRefusedError(111, "Connection refused"), ErrorKind.CONNECT),
        (ConnectionResetError(104, "Connection reset by peer"), ErrorKind.TRUNCATED),
        (OSError(113, "No route to host"), ErrorKind.CONNECT),
        (ValueError("a bug"), ErrorKind.CLIENT),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_bare_socket_and_ssl_exceptions(exc: BaseException, kind: ErrorKind) -> None:
    got, detail = classify_transport_error(exc)
    assert got == kind
    assert type(exc).__name__ in detail


def test_the_cause_in_a_chain_decides() -> None:
    try:
        try:
            raise socket.gaierror(-2, "Name or service not known")
        except OSError as inner:
            raise RuntimeError("lookup failed") from inner
    except RuntimeError as outer:
        assert classify_transport_error(outer)[0] == ErrorKind.DNS


@pytest.mark.asyncio
async def test_preflight_against_a_dead_port_is_one_connect_error_message() -> None:
    port = _closed_port()
    endpoint = Endpoint(f"http://127.0.0.1:{port}/v1", timeouts=SHORT)
    with pytest.raises(LlmPerfUsageError) as info:
        await preflight(endpoint)
    text = str(info.value)
    assert text.startswith("--llm-endpoint: cannot reach")
    assert f"127.0.0.1:{port}" in text and "connect_error" in text and "running" in text
    assert "GET /v1/models: connect_error" in text  # the call that failed is named
    # nothing answered: the address is the user's to fix (a usage error, exit status 4)
    assert info.value.cause is StopCause.UNREACHABLE and info.value.server_says is None
