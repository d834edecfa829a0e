"""Which certificates the package's HTTP clients trust.

A module of the top level because every client shares the policy: the load
generator's own (:mod:`pytest_llmperf.client.stream_client`), the metadata
client (``Endpoint.client()``), and the calls that size prompts
(:mod:`pytest_llmperf.workloads.server_tokenizer`, the session's tokenizer
discovery), which sit below the client package.

The clients ignore the environment (``trust_env=False``) so that proxy
variables cannot silently route a load test through a proxy. Certificate
trust is the exception: a team testing a server behind an internal CA points
``SSL_CERT_FILE`` (a PEM bundle) and/or ``SSL_CERT_DIR`` at it, the convention
OpenSSL, httpx and requests share. Without them the default trust store is
used, and a self-signed or unknown certificate fails each request as a
``tls_error``.
"""

from __future__ import annotations

import functools
import os
import ssl

import httpx

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["tls_context", "tls_verify"]


def tls_verify() -> ssl.SSLContext | bool:
    """``True`` (default trust store) or a context trusting ``SSL_CERT_FILE``/``SSL_CERT_DIR``."""
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    if not cafile and not capath:
        return True
    try:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    except (OSError, ssl.SSLError) as exc:
        raise LlmPerfUsageError(
            f"cannot load CA certificates from SSL_CERT_FILE={cafile!r} / "
            f"SSL_CERT_DIR={capath!r}: {exc}"
        ) from None


def tls_context() -> ssl.SSLContext:
    """The context the httpx-based clients verify with, built once per trust setting.

    Building one loads the whole CA bundle (13–16 ms), and a metadata client is
    opened for every call site (each run's server-metrics sampler among them): one
    context per process instead of one per client. Without ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR`` it is httpx's own default; a bad file is the usage error of
    :func:`tls_verify` (never cached).
    """
    return _context(os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None)


@functools.lru_cache(maxsize=8)
def _context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    verify = tls_verify()
    if isinstance(verify, ssl.SSLContext):
        return verify
    return httpx.create_ssl_context()
