"""Every call of a multi-turn conversation or agent tree carries what ``--llm-affinity``
sends, and the router token the conversation's last response returned.

A router-like stub (aiohttp on 127.0.0.1) records each request's headers, hands a fresh
token to a request that brings none (``x-route-token``) and names its replica
(``x-replica-id``); a request that brings a token gets the same one back.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_trees import Spawn, Thread, TreeSource
from aiohttp import web
from loopback import aiohttp_apps

from pytest_llmperf.client.affinity import Affinity
from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

pytestmark = pytest.mark.asyncio

TOKEN = "x-route-token"


class Router:
    """Records ``(headers, messages)`` of each chat request; answers a two-token stream."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        self.issued = 0

    async def chat(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        await request.json()
        self.seen.append(headers)
        token = headers.get(TOKEN)
        if not token:
            token = f"tok-{self.issued}"
            self.issued += 1
        response = web.StreamResponse(headers={TOKEN: token, "x-replica-id": "r1"})
        response.content_type = "text/event-stream"
        await response.prepare(request)
        for piece, finish in (("Hi", None), (" there", "stop")):
            delta = {"index": 0, "delta": {"content": piece}, "finish_reason": finish}
            chunk = {"id": "x", "object": "chat.completion.chunk", "choices": [delta]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


@pytest.fixture
def router() -> Iterator[tuple[Router, str]]:
    stub = Router()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", stub.chat)
    with aiohttp_apps() as serve:
        yield stub, serve(app) + "/v1"


def endpoint(url: str, affinity: str) -> Endpoint:
    return Endpoint(
        url, model="m", timeouts=Timeouts.from_seconds(20), affinity=Affinity.parse(affinity)
    )


async def run(url: str, affinity: str, spec: RunSpec) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    await LoadRun(endpoint(url, affinity), spec, observers=[records.append]).execute()
    return records


async def test_an_agent_trees_calls_carry_its_thread_ids_and_the_routers_token(
    router: tuple[Router, str],
) -> None:
    stub, url = router
    root = Thread("root", 3, waits_ms=(5, 5), spawns=(Spawn(0, Thread("explore", 2)),))
    load = LoadSpec.parse("concurrency", {"concurrency": 1})
    spec = RunSpec("test-agent-trees", {"source": TreeSource([root])}, 0, load, requests=15)
    records = await run(url, "dynamo,token:x-route-token", spec)
    assert len(stub.seen) == len(records) == 3 * 5
    assert {r.replica for r in records} == {"r1"}  # the replica, read from the response
    by_conversation: dict[str, list[dict[str, str]]] = defaultdict(list)
    for headers in stub.seen:
        session = headers["x-dynamo-session-id"]
        conversation, _, agent = session.partition("/")
        by_conversation[conversation].append(headers)
        if agent:  # a subagent names its parent thread
            assert agent == "explore" and headers["x-dynamo-parent-session-id"] == conversation
        else:
            assert "x-dynamo-parent-session-id" not in headers
    assert sorted(by_conversation) == ["conv-0", "conv-1", "conv-2"]
    tokens = set()
    for calls in by_conversation.values():  # the first call brings none; the rest, its token
        assert TOKEN not in calls[0]
        assert len({h[TOKEN] for h in calls[1:]}) == 1
        tokens.add(calls[1][TOKEN])
    assert len(tokens) == 3


async def test_a_multi_turn_conversations_turns_are_pinned_too(
    router: tuple[Router, str], tmp_path: Path
) -> None:
    stub, url = router
    path = tmp_path / "c.jsonl"
    with path.open("w") as f:
        for c in range(2):
            messages: list[dict[str, Any]] = []
            for k in range(3):
                messages.append({"role": "user", "content": f"c{c} t{k} ask"})
                messages.append({"role": "assistant", "content": "one two"})
            f.write(json.dumps({"messages": messages}) + "\n")
    spec = RunSpec(
        "conversation", {"path": str(path), "conversations": True}, 0,
        LoadSpec.parse("concurrency", {"concurrency": 1}), requests=6,
    )  # fmt: skip
    await run(url, "header:x-conv,token:x-route-token", spec)
    assert [h["x-conv"] for h in stub.seen] == ["s0-0"] * 3 + ["s0-1"] * 3
    assert [h.get(TOKEN) for h in stub.seen] == [None, "tok-0", "tok-0", None, "tok-1", "tok-1"]
