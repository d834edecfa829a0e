"""The endpoint client: OpenAI chat, completions and Responses, Anthropic Messages (streamed
SSE, a timestamp per event) and embeddings (one JSON answer, checked whole);
:mod:`~pytest_llmperf.client.apis` dispatches over them."""

from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.client.endpoint import Endpoint, Timeouts, normalize_base_url, redact_url
from pytest_llmperf.client.models import resolve_model
from pytest_llmperf.client.openai import RequestFields
from pytest_llmperf.client.preflight import preflight, preflight_sync
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import StreamClient, TransportFailure

__all__ = [
    "CancelAt",
    "Endpoint",
    "ErrorKind",
    "RequestFields",
    "RequestRecord",
    "StreamClient",
    "Timeouts",
    "TransportFailure",
    "normalize_base_url",
    "preflight",
    "preflight_sync",
    "redact_url",
    "resolve_model",
    "send_request",
]
