"""Discovering the model to name in requests when the user did not say."""

from __future__ import annotations

import httpx

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.unreachable import unreachable_message
from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["model_from_listing", "resolve_model"]


async def resolve_model(endpoint: Endpoint, http: httpx.AsyncClient | None = None) -> Endpoint:
    """``endpoint`` with ``model`` set: as given, or the first id of ``GET /v1/models``.

    A dead or odd endpoint raises one :class:`LlmPerfUsageError` that names the
    URL (never the key) and says what went wrong, so a session against a
    wrong address fails once and clearly instead of with N request errors.
    """
    if endpoint.model:
        return endpoint
    owned = http is None
    client = http or endpoint.client(max_connections=4)
    url = f"{endpoint.base_url}/models"
    try:
        response = await client.get(url)
    except Exception as exc:  # any transport failure: one clear message, no traceback
        raise LlmPerfUsageError(
            unreachable_message(endpoint, exc), where="--llm-endpoint"
        ) from None
    finally:
        if owned:
            await client.aclose()
    return model_from_listing(endpoint, response)


def model_from_listing(endpoint: Endpoint, response: httpx.Response) -> Endpoint:
    """``endpoint`` with the first model id of a ``GET /v1/models`` answer, or a usage error.

    Kept apart from the request so the preflight can use its own answer: a
    server that fails ``/models`` with a 500 may reset the connection after
    it (uvicorn does), and a second request would report that reset rather
    than the 500 and its remedy.
    """
    if response.status_code != 200:
        raise LlmPerfUsageError(
            f"GET {endpoint.label}/models answered HTTP {response.status_code}; "
            "pass --llm-model to name the model explicitly",
            where="--llm-endpoint",
        )
    try:
        data = response.json()["data"]
        model = data[0]["id"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise LlmPerfUsageError(
            f"GET {endpoint.label}/models returned no model ids; pass --llm-model",
            where="--llm-endpoint",
        ) from None
    return endpoint.with_model(str(model))
