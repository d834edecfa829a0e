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

import os
import ssl

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["tls_verify"]


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
