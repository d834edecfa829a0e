"""Fixtures of the fingerprint tests: stub servers (fingerprint_stubs.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fingerprint_stubs import Serve
from loopback import aiohttp_apps


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(app)`` -> the root URL of ``app`` on a free port, until the test ends."""
    with aiohttp_apps() as start:
        yield start
