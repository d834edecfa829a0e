"""Model discovery from synchronous code (the plugin's session-scoped fixture)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.models import resolve_model

__all__ = ["resolve_model_sync"]


def resolve_model_sync(endpoint: Endpoint) -> Endpoint:
    """:func:`resolve_model` on a private loop in a private thread.

    The caller may itself be running inside an event loop (a fixture set up
    by pytest-asyncio), where ``asyncio.run`` is not allowed.
    """
    if endpoint.model:
        return endpoint
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="llmperf-models") as pool:
        return pool.submit(asyncio.run, resolve_model(endpoint)).result()
