"""Fixtures of the cache-reset tests: stub servers (reset_stubs.py), and no server
remembered from one test to the next."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from loopback import aiohttp_apps
from reset_stubs import Serve

from pytest_llmperf.server_metrics.cache_reset import forget_cache_resets


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(app)`` -> the root URL of ``app`` on a free port, until the test ends."""
    with aiohttp_apps() as start:
        yield start


@pytest.fixture(autouse=True)
def _fresh_memory() -> Iterator[None]:
    """Each test starts with no server remembered (ports are reused across tests)."""
    forget_cache_resets()
    yield
    forget_cache_resets()
