"""The one message for an endpoint that cannot be reached.

Every call outside a run goes through the metadata client
(:mod:`~pytest_llmperf.client.metadata`); when one of them fails in transport
(nothing listens, the name does not resolve, the certificate is refused,
something answered that is not HTTP), this module says so in one line that
names the URL (never the key), the call, the failure's category and what to
check. How long a call may take is the metadata client's business
(:class:`~pytest_llmperf.client.metadata.CallLimits`), not this module's.
"""

from __future__ import annotations

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.failures import classify_transport_error
from pytest_llmperf.redaction import scrub

__all__ = ["unreachable_message"]

_HINTS = {
    "connect_error": "is the server running, and is the host and port right?",
    "dns_error": "the host name does not resolve; check its spelling",
    "tls_error": "check http:// vs https:// and the server's certificate",
    "connect_timeout": "nothing answered the connection; check the address and any firewall",
    "stall_timeout": "the server accepted the connection but never answered",
    "first_token_timeout": "the server accepted the connection but never answered",
    "protocol_error": "something answered, but not HTTP; check the port",
}


def unreachable_message(endpoint: Endpoint, exc: BaseException, *, call: str = "") -> str:
    """``cannot reach URL: [CALL: ]<category>: <detail> (<hint>)``, with secrets scrubbed."""
    kind, detail = classify_transport_error(exc)
    hint = _HINTS.get(kind, "check --llm-endpoint")
    during = f"{call}: " if call else ""
    text = f"cannot reach {endpoint.label}: {during}{kind}: {detail} ({hint})"
    return scrub(text, *endpoint.secrets)
