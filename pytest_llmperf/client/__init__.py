"""The endpoint client: the transport every API shares (HTTP/1.1 connections, SSE, a
timestamp per read, the per-request limits and retries). What differs between APIs
(the path, the body, the event reader, the answer check) is the format's, asked of the
registry in :mod:`pytest_llmperf.apis`: the client knows no API by name."""

from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.client.affinity import Affinity, pin
from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.client.endpoint import Endpoint, Timeouts, normalize_base_url, redact_url
from pytest_llmperf.client.models import resolve_model
from pytest_llmperf.client.preflight import preflight, preflight_sync
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import StreamClient, TransportFailure

__all__ = [
    "Affinity",
    "CancelAt",
    "Endpoint",
    "ErrorKind",
    "RequestFields",
    "RequestRecord",
    "StreamClient",
    "Timeouts",
    "TransportFailure",
    "normalize_base_url",
    "pin",
    "preflight",
    "preflight_sync",
    "redact_url",
    "resolve_model",
    "send_request",
]
