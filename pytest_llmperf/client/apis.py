"""Every API the client drives, in one dispatch: paths, request bodies, event parsers.

The transport (:mod:`~pytest_llmperf.client.stream_client`,
:mod:`~pytest_llmperf.client.request`) is the same for every API; what differs
is the path, the body, how one stream event is read and where the stream
ends. Each API's wire format lives in a module of its own:

- ``chat``, ``completions``: :mod:`~pytest_llmperf.client.openai` — their
  per-chunk parser, :func:`~pytest_llmperf.client.openai.parse_chunk`, stays the
  one on their hot path, untouched;
- ``responses``: :mod:`~pytest_llmperf.client.responses_api` (typed events, ends
  at ``response.completed``/``response.incomplete``);
- ``messages``: :mod:`~pytest_llmperf.client.messages_api` (typed events, ends at
  ``message_stop``);
- ``embeddings``: :mod:`~pytest_llmperf.client.embeddings_api` (one JSON answer,
  checked whole; no stream, no event parser of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_llmperf.client import embeddings_api, messages_api, openai, responses_api
from pytest_llmperf.client.api_kinds import API_NAMES, API_PATHS, ApiKind
from pytest_llmperf.client.chunk_shapes import ChunkReader
from pytest_llmperf.client.openai import DEFAULT_FIELDS, ChunkInfo, RequestFields, parse_chunk
from pytest_llmperf.workloads.apis import IMAGE_APIS  # whose request bodies carry images
from pytest_llmperf.workloads.base import Sample

__all__ = [
    "API_NAMES",
    "API_PATHS",
    "IMAGE_APIS",
    "STREAM_END",
    "ApiKind",
    "answer_text_for",
    "build_payload",
    "chunk_parser",
    "request_model",
    "sends_images",
]

# What ends each API's stream, for the message of a stream cut before it.
STREAM_END: dict[str, str] = {
    "chat": "finish_reason or [DONE]",
    "completions": "finish_reason or [DONE]",
    "responses": "response.completed or response.incomplete",
    "messages": "message_stop",
    "embeddings": "its JSON answer",
}

_BUILDERS: dict[str, Callable[[str, Sample, RequestFields], dict[str, Any]]] = {
    "responses": responses_api.build_payload,
    "messages": messages_api.build_payload,
    "embeddings": embeddings_api.build_payload,
}
_PARSERS: dict[str, Callable[[str], ChunkInfo]] = {
    "chat": parse_chunk,
    "completions": parse_chunk,
    "responses": responses_api.parse_event,
    "messages": messages_api.parse_event,
    "embeddings": parse_chunk,  # only ever an error frame; the answer is checked whole
}
_ANSWERS: dict[str, Callable[[str], str]] = {
    "chat": openai.answer_text,
    "completions": openai.answer_text,
    "responses": responses_api.answer_text,
    "messages": messages_api.answer_text,
    "embeddings": lambda _data: "",
}


def _known(api: str) -> str:
    if api not in API_PATHS:
        raise ValueError(f"unknown API {api!r}; expected one of {', '.join(API_NAMES)}")
    return api


def build_payload(
    api: str, model: str, sample: Sample, fields: RequestFields = DEFAULT_FIELDS
) -> dict[str, Any]:
    """The request body of ``sample`` for ``api``, with only the fields ``fields`` allows
    (``ValueError`` for an API that is not one of :data:`API_NAMES`)."""
    if api == "chat" or api == "completions":
        return openai.build_openai_payload(api, model, sample, fields)
    return _BUILDERS[_known(api)](model, sample, fields)


def request_model(sample: Sample, endpoint_model: str) -> str:
    """The ``model`` a request of ``sample`` names: the adapter (or base model) the
    sample drew (``llm_workload(adapters=...)``: ``""`` is the base model, by the
    endpoint's name for it), else the endpoint's model."""
    return sample.model or endpoint_model


def chunk_parser(api: str) -> Callable[[str], ChunkInfo]:
    """The parser of one stream event's ``data`` (or of a whole answer) of ``api``: for
    chat and completions a new :class:`~pytest_llmperf.client.chunk_shapes.ChunkReader`
    (one stream's: it learns the stream's common chunk), else the API's own."""
    if api == "chat" or api == "completions":
        return ChunkReader()
    return _PARSERS[_known(api)]


def answer_text_for(api: str) -> Callable[[str], str]:
    """The function that gives the answer text of one event (or a whole answer) of ``api``:
    what a collected reply (``RequestRecord.reply``) is made of."""
    return _ANSWERS[_known(api)]


def sends_images(api: str, sample: Sample) -> bool:
    """Whether ``sample``'s images go out in an ``api`` request (completions and
    embeddings carry none)."""
    return bool(sample.images) and api in IMAGE_APIS
