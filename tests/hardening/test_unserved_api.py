"""A server without the API asked for: the session stops at preflight, quoting it.

A server that answers the field probe with 404 (no such path: llama.cpp's server
before its Responses endpoint, a gateway that routes chat only; or no such model:
vLLM answers an unknown model so) or 405 would answer every request of the run the
same way, and a run of nothing but 404s measures nothing. Preflight says so, with the
path, the status and the server's own words, before any load.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from odd_servers import OddServer, Request, Wire, routed, serve_in_thread

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.preflight import preflight
from pytest_llmperf.errors import LlmPerfUsageError


def answering(status: int, message: str) -> Any:
    async def behaviour(req: Request, wire: Wire) -> None:
        body = {"error": {"message": message, "type": "not_found_error"}}
        await wire.whole(status, json.dumps(body).encode())

    return behaviour


@pytest.mark.parametrize(
    ("api", "status", "message"),
    [
        ("responses", 404, "File Not Found"),
        ("chat", 404, "The model `nope` does not exist."),
        ("messages", 405, "Method Not Allowed"),
        ("embeddings", 501, "This server does not support embeddings."),
    ],
)
def test_an_api_the_server_does_not_serve_stops_at_preflight(
    api: str, status: int, message: str
) -> None:
    # every POST answered so; GET /v1/models (the server's own answer) lists a model
    with serve_in_thread(OddServer(routed({}, default=answering(status, message)))) as server:
        endpoint = Endpoint(server.url + "/v1", api=api, timeouts=Timeouts.from_seconds(5))
        with pytest.raises(LlmPerfUsageError) as caught:
            asyncio.run(preflight(endpoint, []))
        posts = [r for r in server.requests if r.method == "POST"]
    text = str(caught.value)
    assert caught.value.where == "--llm-endpoint"
    assert f"HTTP {status}: {message}" in text, text
    assert f"POST {urlsplit(endpoint.request_url).path} " in text, text
    assert f"does not serve the {api} API there" in text and "No load was sent" in text
    assert len(posts) <= 3  # the field probes only: no run
