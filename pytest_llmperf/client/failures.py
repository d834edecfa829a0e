"""Which :class:`ErrorKind` an exception of the metadata client stands for.

The metadata calls (``GET /v1/models``, preflight probes, ``/metrics``) go
through plain httpx (:meth:`~pytest_llmperf.client.endpoint.Endpoint.client`),
whose exception types are coarse: a refused connection, an unknown host and a
failed certificate check all arrive as ``httpx.ConnectError``; a server that
hung up and one that answered in another protocol both as
``httpx.RemoteProtocolError``. The cause is in the exception's chain (httpx
raises ``from`` httpcore, which raises ``from`` the socket's ``OSError`` or
h11's parse error), so the httpx type says where it happened and the chain
says why. Bare ``OSError`` / ``ssl`` exceptions are classified the same way.
"""

from __future__ import annotations

import socket
import ssl

import httpx

from pytest_llmperf.client.records import ErrorKind

__all__ = ["classify_transport_error"]

_CHAIN_LIMIT = 8

# A bare OSError (or one found in an httpx exception's chain); most specific first.
_OS_KINDS: tuple[tuple[type[BaseException], ErrorKind], ...] = (
    (socket.gaierror, ErrorKind.DNS),
    (ssl.SSLError, ErrorKind.TLS),  # includes certificate verification failures
    (ConnectionRefusedError, ErrorKind.CONNECT),
    (ConnectionResetError, ErrorKind.TRUNCATED),  # reset by peer mid-response
    (BrokenPipeError, ErrorKind.TRUNCATED),
    (ConnectionAbortedError, ErrorKind.TRUNCATED),
    (TimeoutError, ErrorKind.READ_TIMEOUT),
    (OSError, ErrorKind.CONNECT),  # unreachable network or host
)

# What the peer says when it closed early, in httpcore's and h11's words.
_CLOSED_EARLY = ("disconnected", "peer closed", "incomplete")


def classify_transport_error(exc: BaseException) -> tuple[ErrorKind, str]:
    """``(kind, detail)`` for an exception raised while sending or reading."""
    chain = _chain(exc)
    if isinstance(exc, httpx.TransportError):
        kind = _httpx_kind(exc, chain)
    else:
        kind = next((k for e in chain if (k := _os_kind(e)) is not None), ErrorKind.CLIENT)
    return kind, _detail(chain)


def _httpx_kind(exc: httpx.TransportError, chain: list[BaseException]) -> ErrorKind:
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return ErrorKind.CONNECT_TIMEOUT  # no connection in time (its chain may hold TLS waits)
    if isinstance(exc, httpx.TimeoutException):
        return ErrorKind.READ_TIMEOUT
    if isinstance(exc, httpx.ConnectError):
        causes = [_os_kind(e) for e in chain[1:]]
        for kind in (ErrorKind.DNS, ErrorKind.TLS):
            if kind in causes:
                return kind
        return ErrorKind.CONNECT  # refused, unreachable
    if isinstance(exc, httpx.RemoteProtocolError):
        text = str(exc).lower()
        if any(words in text for words in _CLOSED_EARLY):
            return ErrorKind.TRUNCATED
        return ErrorKind.PROTOCOL  # h11 could not read it: not HTTP/1.1
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        if any(isinstance(e, ssl.SSLError) for e in chain[1:]):
            return ErrorKind.TLS
        return ErrorKind.TRUNCATED  # reset or closed mid-response
    if isinstance(exc, httpx.DecodingError):
        return ErrorKind.PROTOCOL  # a body its Content-Encoding does not describe
    return ErrorKind.CLIENT  # LocalProtocolError, UnsupportedProtocol, proxies: our side


def _os_kind(exc: BaseException) -> ErrorKind | None:
    for exc_type, kind in _OS_KINDS:
        if isinstance(exc, exc_type):
            return kind
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``from``), else its contexts, at most a few deep."""
    chain = [exc]
    while len(chain) < _CHAIN_LIMIT:
        nxt = chain[-1].__cause__ or chain[-1].__context__
        if nxt is None or nxt in chain:
            break
        chain.append(nxt)
    return chain


def _detail(chain: list[BaseException]) -> str:
    """The exception's own words, and the root cause's when they say more."""
    top = _one(chain[0])
    root = next((e for e in reversed(chain[1:]) if isinstance(e, OSError) and str(e)), None)
    if root is None or str(root) in top:
        return top
    return f"{top} ({_one(root)})"


def _one(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
