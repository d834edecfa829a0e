"""tests/managed_server: every server a test started is stopped at its end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_llmperf.managed_server import ManagedServer


@pytest.fixture
def started() -> Iterator[list[ManagedServer]]:
    """Servers a test started, stopped at its end whatever happened."""
    servers: list[ManagedServer] = []
    yield servers
    for server in servers:
        server.stop()
