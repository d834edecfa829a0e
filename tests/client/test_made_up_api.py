"""Adding an API is one module: a made-up format, registered here, driven end to end.

The "tok" API frames a request its own way (``{"model", "say", "upto"}`` to
``POST /v1/tok``) and streams a trivial answer: one SSE event ``tok <text>`` per
token, then ``end``. Its module is tests/tok_format.py alone (no module of the
package changes), registered with :func:`pytest_llmperf.apis.register`, and driven through the real
client (:func:`~pytest_llmperf.client.send_request`) and the load generator
(:func:`~pytest_llmperf.loadgen.run_load`) against a small HTTP server on 127.0.0.1:
the transport, the reading loop and the run's accounting ask the format and know no
API by name. docs/extending.md ("Adding an API") walks through the same example.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from api_server import ApiServer, Reply, serve
from tok_format import TOK

from pytest_llmperf.apis import (
    API_FORMATS,
    Api,
    ApiFormat,
    parse_api,
    register,
    unregister,
)
from pytest_llmperf.client import Endpoint, ErrorKind, RequestRecord, send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen import run_load
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads import Sample

# -- the test server and the tests ---------------------------------------------------------

WORDS = ("one", "two", "three")


@pytest.fixture
def tok_api() -> Iterator[ApiFormat]:
    register(TOK)
    try:
        yield TOK
    finally:
        unregister(TOK.name)
    assert "tok" not in API_FORMATS


def _reply(path: str, body: dict[str, Any]) -> Reply:
    if path != "/v1/tok" or set(body) != {"model", "say", "upto"}:
        return Reply([(0, b'{"error": "not a tok request"}')], 400, "application/json", True)
    events = [f"data: tok {w}\n\n".encode() for w in WORDS[: body["upto"]]]
    return Reply([(0.001, e) for e in events] + [(0, b"data: end\n\n")])


def test_a_registered_api_is_a_name_every_check_accepts(tok_api: ApiFormat) -> None:
    assert parse_api("tok", where="--llm-api") == "tok" == Api("tok")
    assert list(Api) == [Api.CHAT, Api.COMPLETIONS, Api.RESPONSES, Api.MESSAGES, Api.EMBEDDINGS]
    endpoint = Endpoint.from_env("http://127.0.0.1:9", api_key_env=None, api="tok")
    assert endpoint.request_url == "http://127.0.0.1:9/v1/tok"
    assert endpoint.describe()["request_fields"]["max_tokens_field"] == "upto"


def test_an_unregistered_api_is_refused() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"must be one of chat, .*got 'tok'"):
        parse_api("tok", where="--llm-api")
    with pytest.raises(LlmPerfUsageError, match="got 'tok'"):
        Endpoint("http://127.0.0.1:9/v1", api="tok")


@pytest.mark.asyncio
async def test_the_client_sends_and_reads_a_made_up_api(tok_api: ApiFormat) -> None:
    with serve(ApiServer(_reply)) as srv:
        endpoint = Endpoint.from_env(srv.url, api_key_env=None, model="m", api="tok")
        sample = Sample(index=0, prompt="count", input_tokens=1, max_tokens=3)
        record = RequestRecord(index=0, t_sched=time.monotonic_ns(), reply=[])
        async with StreamClient(endpoint, max_connections=1) as http:
            await send_request(http, endpoint, sample, record)
    assert record.error is None, record.error_detail
    assert srv.bodies == [{"model": "m", "say": "count", "upto": 3}]
    assert record.token_events == 3 and len(record.gaps_ns) == 2
    assert 0 < record.t_first == record.t_out <= record.t_last <= record.t_end
    assert record.reply == list(WORDS)


@pytest.mark.asyncio
async def test_a_made_up_api_stream_cut_before_its_end_says_what_it_lacked(
    tok_api: ApiFormat,
) -> None:
    with serve(ApiServer(lambda _p, _b: Reply([(0, b"data: tok one\n\n")]))) as srv:
        endpoint = Endpoint.from_env(srv.url, api_key_env=None, model="m", api="tok")
        sample = Sample(index=0, prompt="count", input_tokens=1, max_tokens=3)
        record = RequestRecord(index=0, t_sched=time.monotonic_ns())
        async with StreamClient(endpoint, max_connections=1) as http:
            await send_request(http, endpoint, sample, record)
    assert record.error is ErrorKind.TRUNCATED
    assert record.error_detail == "stream ended without end"


@pytest.mark.asyncio
async def test_the_load_generator_runs_a_made_up_api(tok_api: ApiFormat) -> None:
    with serve(ApiServer(_reply)) as srv:
        endpoint = Endpoint.from_env(srv.url, api_key_env=None, model="m", api="tok")
        spec = RunSpec.from_markers(
            ("synthetic",),
            {"requests": 12, "output_tokens": 3},
            ("concurrency",),
            {"concurrency": 3},
        )
        result = await run_load(endpoint, spec)
    counts = result.counts
    assert (counts["issued"], counts["completed"], counts["failed"]) == (12, 12, 0), result.errors
    assert len(srv.bodies) == 12 and {b["upto"] for b in srv.bodies} == {3}
    assert result.accumulator.output_tokens == 12 * 3  # counted as token events: no usage
    assert result.histogram("ttft").count == 12 and result.histogram("tpot").count == 12
