"""Discovering the model to name in requests when the user did not say."""

from __future__ import annotations

import httpx

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import Answer, MetadataClient, Read, server_words
from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["NAME_THE_MODEL", "list_models", "model_from_listing", "resolve_model"]

NAME_THE_MODEL = "pass --llm-model to name the model explicitly"


async def resolve_model(endpoint: Endpoint, http: httpx.AsyncClient | None = None) -> Endpoint:
    """``endpoint`` with ``model`` set: as given, or the first id of ``GET /v1/models``.

    A dead or odd endpoint raises one :class:`LlmPerfUsageError` that names the
    URL (never the key) and says what went wrong, so a session against a
    wrong address fails once and clearly instead of with N request errors.
    ``http`` lends a client of the caller's for the call.
    """
    if endpoint.model:
        return endpoint
    async with MetadataClient(endpoint, http=http) as meta:
        return model_from_listing(endpoint, await list_models(meta))


async def list_models(meta: MetadataClient, *, read: Read = Read.BODY) -> Answer:
    """``GET /v1/models`` through the metadata client (retried, bounded, one message)."""
    return await meta.call("GET", meta.url("/models"), read=read, hint=NAME_THE_MODEL)


def model_from_listing(endpoint: Endpoint, answer: Answer) -> Endpoint:
    """``endpoint`` with the first model id of a ``GET /v1/models`` answer, or a usage error.

    Kept apart from the request so the preflight can use its own answer: a
    second request could meet what the first left behind (uvicorn resets the
    connection after a 500) and report that instead of the answer and its remedy.
    """
    if not answer.ok:
        said = server_words(answer.status, answer.message)
        raise LlmPerfUsageError(
            f"GET {endpoint.label}/models answered {said}; {NAME_THE_MODEL}",
            where="--llm-endpoint",
            server_says=said,
        )
    try:
        data = answer.json()["data"]
        model = data[0]["id"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise LlmPerfUsageError(
            f"GET {endpoint.label}/models returned no model ids; pass --llm-model",
            where="--llm-endpoint",
        ) from None
    return endpoint.with_model(str(model))
