"""The wire formats: one module per API (chat, completions, Responses, Messages,
embeddings), each holding its path, its request body builder, its stream or
answer reader and its output extraction (the client's half), and the
simulator's handler (the server's half, at the end of the module), registered
in one table keyed by :class:`Api` (:mod:`~pytest_llmperf.apis.registry`).

The floor below the client, the simulator and the workloads: it imports only
:mod:`pytest_llmperf.errors`, :mod:`pytest_llmperf.tokens` and itself, so each of
them can ask a format what it needs without knowing any API by name.
"""

from pytest_llmperf.apis.events import ChunkInfo
from pytest_llmperf.apis.fields import DEFAULT_FIELDS, FieldRules, RequestFields
from pytest_llmperf.apis.format import AnswerFault, ApiFormat, RunReader, WholeAnswer
from pytest_llmperf.apis.names import Api
from pytest_llmperf.apis.registry import API_FORMATS, api_format, parse_api, register, unregister

__all__ = [
    "API_FORMATS",
    "DEFAULT_FIELDS",
    "AnswerFault",
    "Api",
    "ApiFormat",
    "ChunkInfo",
    "FieldRules",
    "RequestFields",
    "RunReader",
    "WholeAnswer",
    "api_format",
    "parse_api",
    "register",
    "unregister",
]
