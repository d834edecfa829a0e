"""The simulator serves a made-up API from its module alone (issue 38, item 1).

The "tok" format of tests/tok_format.py (``{"model", "say", "upto"}`` to
``POST /v1/tok``; one SSE event ``tok <word>`` per token, then ``end``), with the
server half its module would end with: parse the body into the simulator's request,
frame each token. Registered here (:func:`~pytest_llmperf.apis.register` and
:func:`~pytest_llmperf.apis.served.serve`), it is routed, admitted, timed and counted
by the simulator with no change to ``sim/``, and read by the real client.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from typing import Any

import httpx
import pytest
from tok_format import TOK

from pytest_llmperf.apis import ApiFormat, register, unregister
from pytest_llmperf.apis.filler_text import token_text
from pytest_llmperf.apis.served import AnswerPlan, ServedTokens, serve, unserve
from pytest_llmperf.apis.server_wire import (
    OutputPlan,
    ParsedRequest,
    Usage,
    WireError,
    check_model,
)
from pytest_llmperf.client import Endpoint, RequestRecord, send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.sim import SimServer
from pytest_llmperf.tokens import split_tokens
from pytest_llmperf.workloads import Sample

# -- the simulator's side of "tok" (tests/tok_format.py is the client's) ----------------------


class TokAnswer:
    """``data: tok <word>`` per token, ``data: end`` at the end; ``{"text"}`` whole."""

    writer = None

    def __init__(self, out: OutputPlan) -> None:
        self.salt = out.salt
        self.shaped = self

    def clip(self, i: int, size: int) -> int:
        return size

    def chunk(self, i: int, size: int = 1) -> bytes:
        words = (token_text(k, self.salt) for k in range(i, i + size))
        return b"".join(b"data: tok" + w.encode() + b"\n\n" for w in words)

    def opening(self) -> bytes:
        return b""

    def closing(self, usage: Usage, include_usage: bool) -> tuple[bytes, ...]:
        return (b"data: end\n\n",)

    def full_body(self, reasoning: str | None, text: str, usage: Usage) -> dict[str, Any]:
        return {"text": text, "tokens": usage.completion_tokens}


class ServedTok(ServedTokens):
    prompt_param = "say"
    max_param = "upto"

    def parse(
        self, body: Any, served_model: str, image_px: int, adapters: Collection[str]
    ) -> ParsedRequest:
        if not isinstance(body, dict) or not isinstance(body.get("say"), str):
            raise WireError(400, "say must be a string", "say")
        return ParsedRequest(
            api="tok",
            model=check_model(body, served_model, adapters),
            prompt_tokens=split_tokens(body["say"]),
            max_tokens=body.get("upto"),
            ignore_eos=True,
            stream=bool(body.get("stream", True)),
            include_usage=False,
        )

    def answer(self, plan: AnswerPlan) -> TokAnswer:
        return TokAnswer(plan.out)


# -- the tests ------------------------------------------------------------------------------


@pytest.fixture
def tok_api() -> Iterator[ApiFormat]:
    register(TOK)
    serve("tok", ServedTok())
    try:
        yield TOK
    finally:
        unserve("tok")
        unregister("tok")


FAST = {"ttft_ms": 5, "itl_ms": 1}


@pytest.mark.asyncio
async def test_the_simulator_serves_a_made_up_api_to_the_client(tok_api: ApiFormat) -> None:
    async with SimServer("fixed", **FAST) as sim:
        endpoint = Endpoint.from_env(sim.url, api_key_env=None, model="sim-fixed", api="tok")
        sample = Sample(index=0, prompt="count to three", input_tokens=3, max_tokens=3)
        record = RequestRecord(index=0, t_sched=time.monotonic_ns(), reply=[])
        async with StreamClient(endpoint, max_connections=1) as http:
            await send_request(http, endpoint, sample, record)
        assert record.error is None, record.error_detail
        assert record.token_events == 3 and len(record.gaps_ns) == 2
        assert record.reply == [token_text(k, 0).strip() for k in range(3)]  # filler words
        assert sim.sim is not None and sim.sim.counters.prompt_tokens == 3


@pytest.mark.asyncio
async def test_its_errors_and_whole_answers_take_the_common_path(tok_api: ApiFormat) -> None:
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as http:
        whole = await http.post("/v1/tok", json={"say": "a b", "upto": 2, "stream": False})
        assert whole.status_code == 200 and whole.json()["tokens"] == 2
        refused = await http.post("/v1/tok", json={"upto": 2})
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "say"
        too_long = await http.post("/v1/tok", json={"say": "x", "upto": 10**7})
        assert too_long.status_code == 400 and too_long.json()["error"]["param"] == "upto"
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as http:
        unserve("tok")  # a format with no server half is not routed
        assert (await http.post("/v1/tok", json={"say": "a"})).status_code == 200
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as http:
        assert (await http.post("/v1/tok", json={"say": "a"})).status_code == 404
