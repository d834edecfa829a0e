"""Which :class:`ErrorKind` a transport exception stands for.

httpx-aiohttp re-raises aiohttp's exceptions as httpx ones, but coarsely (a
refused connection and a server that hung up mid-stream both arrive as
``httpx.ConnectTimeout``), so the cause aiohttp raised is read first and the
httpx type is only the fallback.
"""

from __future__ import annotations

import ssl

import aiohttp
import httpx

from pytest_llmperf.client.records import ErrorKind

__all__ = ["classify_transport_error"]

# Most specific first: the first isinstance match wins.
_AIOHTTP_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (aiohttp.ConnectionTimeoutError, ErrorKind.CONNECT_TIMEOUT),
    (aiohttp.SocketTimeoutError, ErrorKind.READ_TIMEOUT),
    (aiohttp.ClientConnectorDNSError, ErrorKind.DNS),
    (aiohttp.ClientSSLError, ErrorKind.TLS),
    (aiohttp.ClientConnectorError, ErrorKind.CONNECT),  # refused, unreachable
    (aiohttp.ServerDisconnectedError, ErrorKind.TRUNCATED),
    (aiohttp.ClientPayloadError, ErrorKind.TRUNCATED),
    (aiohttp.ClientOSError, ErrorKind.TRUNCATED),  # reset by peer mid-response
    (aiohttp.ClientResponseError, ErrorKind.PROTOCOL),  # not HTTP (raised unmapped)
    (ssl.SSLError, ErrorKind.TLS),
)
_HTTPX_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (httpx.ConnectTimeout, ErrorKind.CONNECT_TIMEOUT),
    (httpx.ReadTimeout, ErrorKind.READ_TIMEOUT),
    (httpx.TimeoutException, ErrorKind.READ_TIMEOUT),
    (httpx.ConnectError, ErrorKind.CONNECT),
    (httpx.RemoteProtocolError, ErrorKind.TRUNCATED),
    (httpx.ReadError, ErrorKind.TRUNCATED),
)


def classify_transport_error(exc: BaseException) -> tuple[str, str]:
    """``(kind, detail)`` for an exception raised while sending or reading."""
    cause = exc.__cause__
    for kinds, candidate in ((_AIOHTTP_KINDS, cause), (_AIOHTTP_KINDS, exc), (_HTTPX_KINDS, exc)):
        if candidate is None:
            continue
        for exc_type, kind in kinds:
            if isinstance(candidate, exc_type):
                return kind, _detail(candidate)
    return ErrorKind.CLIENT, _detail(exc)


def _detail(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
