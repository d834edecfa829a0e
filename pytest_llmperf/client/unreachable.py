"""The one message for an endpoint that cannot be reached, and how long a metadata call waits.

Model discovery (:mod:`~pytest_llmperf.client.models`) and the preflight
(:mod:`~pytest_llmperf.client.preflight`) both turn a transport failure of
``GET /v1/models`` into a single usage error that names the URL (never the
key), the failure's category and what to check. A module of its own so
both can use it without importing each other.
"""

from __future__ import annotations

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.failures import classify_transport_error
from pytest_llmperf.redaction import scrub

__all__ = ["PREFLIGHT_LIMIT_S", "metadata_limit_s", "unreachable_message"]

PREFLIGHT_LIMIT_S = 30.0  # beyond the connect timeout: a server that accepts but never answers

_HINTS = {
    "connect_error": "is the server running, and is the host and port right?",
    "dns_error": "the host name does not resolve; check its spelling",
    "tls_error": "check http:// vs https:// and the server's certificate",
    "connect_timeout": "nothing answered the connection; check the address and any firewall",
    "stall_timeout": "the server accepted the connection but never answered",
    "first_token_timeout": "the server accepted the connection but never answered",
    "protocol_error": "something answered, but not HTTP; check the port",
}


def metadata_limit_s(endpoint: Endpoint) -> float:
    """How long one metadata call (``GET /v1/models``, a field probe) may take in all."""
    t = endpoint.timeouts
    return min(t.total, t.connect + PREFLIGHT_LIMIT_S)


def unreachable_message(endpoint: Endpoint, exc: BaseException) -> str:
    """``cannot reach URL: <category>: <detail> (<hint>)``, with secrets scrubbed."""
    if isinstance(exc, TimeoutError) and type(exc) is TimeoutError:
        limit = metadata_limit_s(endpoint)
        kind, detail = "stall_timeout", f"no answer to GET /models within {limit:g} s"
    else:
        kind, detail = classify_transport_error(exc)
    hint = _HINTS.get(kind, "check --llm-endpoint")
    text = f"cannot reach {endpoint.label}: {kind}: {detail} ({hint})"
    return scrub(text, *endpoint.secrets)
