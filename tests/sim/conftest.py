"""Helpers shared by the simulator tests: SSE parsing over real sockets."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest


async def read_sse(resp: httpx.Response) -> list[str]:
    """Raw ``data:`` payloads (and ``:`` comments as ':...') in arrival order."""
    events: list[str] = []
    async for line in resp.aiter_lines():
        if line.startswith("data: "):
            events.append(line[len("data: ") :])
        elif line.startswith(":"):
            events.append(line)
    return events


def json_events(events: list[str]) -> list[dict[str, Any]]:
    """Parsed JSON chunks, excluding [DONE] and comments."""
    return [json.loads(e) for e in events if e != "[DONE]" and not e.startswith(":")]


class SSE:
    """Namespace handed to tests by the ``sse`` fixture."""

    read = staticmethod(read_sse)
    json = staticmethod(json_events)


@pytest.fixture
def sse() -> type[SSE]:
    return SSE
