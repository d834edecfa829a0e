"""One check before any load: is there a server at the endpoint at all?

Without it, a session against a wrong address (or a server that is down) would
send every planned request into a closed port and report N identical
failures, one test after another. With it, the session stops once, before
the first test, with a single message that names the URL (never the key),
the call, what went wrong and what to check. When ``--llm-model`` is given the
model needs no discovery, but the same ``GET /v1/models`` still proves the
server answers: any HTTP status will do, and only the head settles it.

:func:`preflight_server` keeps what the server answered, and asks the few
other things a session wants of it (``GET /version``, ``GET /metrics``) once,
in a :class:`~pytest_llmperf.client.preflight_result.PreflightResult` that the
identity, the fingerprint, the metrics source and the tokenizer discovery read
instead of asking again.

Every call here is one of the metadata client's
(:mod:`~pytest_llmperf.client.metadata`): its deadline, retries and messages
are decided there, once for all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import httpx

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import (
    Answer,
    CallLimits,
    MetadataCallError,
    MetadataClient,
    Read,
    server_words,
)
from pytest_llmperf.client.models import list_models, model_from_listing
from pytest_llmperf.client.negotiation import UserFields, negotiate_fields
from pytest_llmperf.client.preflight_result import (
    IDENTITY_LIMIT_S,
    METRICS_LIMIT_S,
    Outcome,
    PreflightResult,
)
from pytest_llmperf.client.unreachable import unreachable_message
from pytest_llmperf.errors import LlmPerfUsageError, StopCause

__all__ = ["preflight", "preflight_server", "preflight_server_sync", "preflight_sync"]

_VERSION_BODY_LIMIT = 64 << 10  # a version is a line; anything bigger is not one


async def preflight(endpoint: Endpoint, user_fields: Sequence[UserFields] = ()) -> Endpoint:
    """``endpoint`` with its model resolved and its request fields negotiated.

    Raises one :class:`LlmPerfUsageError` (``where="--llm-endpoint"``) when
    nothing answers in time, when a call's retries run out, when the server
    refuses the credentials (HTTP 401/403: every request would fail the same
    way) or even the plainest request; and one when the server refuses the
    user's own request fields (``user_fields``, plus the session's
    ``endpoint.fields.extra``). See :mod:`~pytest_llmperf.client.negotiation`.
    Each says whose it is (:class:`~pytest_llmperf.errors.StopCause`): nothing
    answering and refused credentials are the user's; a server that answers but
    lets no request pass is the server's (the gate fails, exit status 1).
    """
    return (await preflight_server(endpoint, user_fields, describe=False)).endpoint


async def preflight_server(
    endpoint: Endpoint,
    user_fields: Sequence[UserFields] = (),
    *,
    describe: bool = True,
    metrics: bool = False,
    listing: Answer | None = None,
) -> PreflightResult:
    """:func:`preflight`, keeping what the server answered (:class:`PreflightResult`).

    ``describe``: also ask ``GET /version`` and keep the body of ``GET /v1/models``
    where the model was named (the head still settles that check), for the identity,
    the fingerprint and the tokenizer discovery. ``metrics``: also ask the server's
    ``GET /metrics`` (the session scrapes it). Neither can fail the preflight.
    ``listing``: the server's ``GET /v1/models`` answer from an earlier preflight (the
    same server through another API): not asked again. Raises as :func:`preflight`.
    """
    try:
        async with MetadataClient(endpoint) as meta:
            if listing is None:
                listing = await _listing(endpoint, meta, describe=describe)
            if listing.status in (401, 403):  # the credentials: the user's to fix
                raise LlmPerfUsageError(
                    _refused_message(endpoint, listing.status),
                    server_says=server_words(listing.status, listing.message),
                )
            if endpoint.model is None:
                endpoint = model_from_listing(endpoint, listing)
            user = [*user_fields]
            if endpoint.fields.extra:
                user.insert(0, UserFields("--llm-request-extra", {}))
            endpoint = await negotiate_fields(endpoint, meta, user)
            version = await _version(meta) if describe else None
            page = await _metrics(meta) if metrics else None
            return PreflightResult(endpoint, listing, version, page)
    except LlmPerfUsageError as exc:
        if exc.where is None:
            raise exc.located("--llm-endpoint") from None
        raise
    except (httpx.HTTPError, OSError) as exc:  # the metadata client names its calls' failures
        raise LlmPerfUsageError(
            unreachable_message(endpoint, exc), where="--llm-endpoint", cause=StopCause.UNREACHABLE
        ) from None


async def _listing(endpoint: Endpoint, meta: MetadataClient, *, describe: bool) -> Answer:
    """``GET /v1/models``: the model's discovery (retried), or with ``--llm-model`` the
    proof that a server is there (any status will do: the head settles it, no retry)."""
    if endpoint.model is None:
        return await list_models(meta)
    read = Read.HEAD_THEN_BODY if describe else Read.HEAD
    return await meta.call("GET", meta.url("/models"), read=read, retry=False)


async def _version(meta: MetadataClient) -> Outcome:
    """``GET /version`` at the server's root: what software it is (3 s, no retry)."""
    short = meta.sharing(CallLimits.of(meta.endpoint.timeouts).within(IDENTITY_LIMIT_S))
    try:
        return await short.call(
            "GET", short.root_url("/version"), retry=False, max_bytes=_VERSION_BODY_LIMIT
        )
    except MetadataCallError as exc:
        return exc


async def _metrics(meta: MetadataClient) -> Outcome:
    """``GET /metrics`` at the server's root: the counters the session scrapes (5 s)."""
    short = meta.sharing(CallLimits.of(meta.endpoint.timeouts).within(METRICS_LIMIT_S))
    try:
        return await short.call("GET", short.root_url("/metrics"))
    except MetadataCallError as exc:
        return exc


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
    return preflight_server_sync(endpoint, user_fields, describe=False).endpoint


def preflight_server_sync(
    endpoint: Endpoint,
    user_fields: Sequence[UserFields] = (),
    *,
    describe: bool = True,
    metrics: bool = False,
    listing: Answer | None = None,
) -> PreflightResult:
    """:func:`preflight_server` from synchronous code (as :func:`preflight_sync`)."""
    ask = preflight_server(
        endpoint, user_fields, describe=describe, metrics=metrics, listing=listing
    )
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="llmperf-preflight") as pool:
        return pool.submit(asyncio.run, ask).result()
