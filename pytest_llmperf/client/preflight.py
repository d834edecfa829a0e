"""One check before any load: is there a server at the endpoint at all?

Without it, a session against a wrong address (or a server that is down) would
send every planned request into a closed port and report N identical
failures, one test after another. With it, the session stops once, before
the first test, with a single message that names the URL (never the key),
the reason category and what to check. When ``--llm-model`` is given the
model needs no discovery, but the same ``GET /v1/models`` still proves the
server answers: any HTTP status will do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.models import model_from_listing
from pytest_llmperf.client.negotiation import UserFields, negotiate_fields
from pytest_llmperf.client.unreachable import metadata_limit_s, unreachable_message
from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["preflight", "preflight_sync"]


async def preflight(endpoint: Endpoint, user_fields: Sequence[UserFields] = ()) -> Endpoint:
    """``endpoint`` with its model resolved and its request fields negotiated.

    Raises one :class:`LlmPerfUsageError` (``where="--llm-endpoint"``) when
    nothing answers in time, or when the server refuses the credentials
    (HTTP 401/403): every request would fail the same way; and one when the
    server refuses the user's own request fields (``user_fields``, plus the
    session's ``endpoint.fields.extra``). See
    :mod:`~pytest_llmperf.client.negotiation`.
    """
    try:
        async with endpoint.client(max_connections=2) as http:
            async with asyncio.timeout(metadata_limit_s(endpoint)):
                response = await http.get(f"{endpoint.base_url}/models")
                await response.aread()
                if response.status_code in (401, 403):
                    raise LlmPerfUsageError(_refused_message(endpoint, response.status_code))
                if endpoint.model is None:
                    endpoint = model_from_listing(endpoint, response)
            user = [*user_fields]
            if endpoint.fields.extra:
                user.insert(0, UserFields("--llm-request-extra", {}))
            try:
                async with asyncio.timeout(metadata_limit_s(endpoint)):
                    return await negotiate_fields(endpoint, http, user)
            except TimeoutError:  # a slow first token: keep the fields, the run will tell
                return endpoint
    except LlmPerfUsageError as exc:
        if exc.where is None:
            raise exc.located("--llm-endpoint") from None
        raise
    except Exception as exc:
        raise LlmPerfUsageError(
            unreachable_message(endpoint, exc), where="--llm-endpoint"
        ) from None


def _refused_message(endpoint: Endpoint, status: int) -> str:
    """Every request would fail the same way: say so once, naming the fix, never the key."""
    if endpoint.api_key:
        sent = "an API key (from --llm-api-key-env, default OPENAI_API_KEY)"
    elif endpoint.url_credentials:
        sent = "the user:password of the URL"
    else:
        sent = "no credentials (set the variable named by --llm-api-key-env)"
    return f"{endpoint.label} refused the request with HTTP {status}; it was sent {sent}"


def preflight_sync(endpoint: Endpoint, user_fields: Sequence[UserFields] = ()) -> Endpoint:
    """:func:`preflight` from synchronous code, on a private loop in a private thread.

    The caller may be inside a running event loop (a fixture set up by
    pytest-asyncio), where ``asyncio.run`` is not allowed.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="llmperf-preflight") as pool:
        return pool.submit(asyncio.run, preflight(endpoint, user_fields)).result()
