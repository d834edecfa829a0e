"""Per-request headers (``Sample.headers``): in that request's head only, checked first."""

from __future__ import annotations

import time
from dataclasses import replace

import httptools
import pytest
from scripted_server import Script, ScriptedServer, chat_chunk, sse

from pytest_llmperf.client import Endpoint, ErrorKind, RequestRecord, send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.workloads import Sample

SAMPLE = Sample(index=0, prompt="Tell me about harbours.", input_tokens=5, max_tokens=8)
STEPS = [(0, chat_chunk("Hi")), (0, chat_chunk(" there", finish="stop")), (0, sse("[DONE]"))]


def _endpoint(url: str = "http://127.0.0.1:9/v1", **kwargs: object) -> Endpoint:
    return Endpoint.from_env(url, api_key_env=None, model="m", **kwargs)  # type: ignore[arg-type]


async def _send(http: StreamClient, endpoint: Endpoint, sample: Sample) -> RequestRecord:
    record = RequestRecord(index=sample.index, t_sched=time.monotonic_ns())
    return await send_request(http, endpoint, sample, record)


@pytest.mark.asyncio
async def test_headers_reach_the_server_on_their_request_only() -> None:
    session = replace(SAMPLE, headers={"X-Session-ID": "s-17", "x-tenant": "blue team"})
    async with ScriptedServer(Script(STEPS)) as srv:
        endpoint = _endpoint(srv.url)
        async with StreamClient(endpoint) as http:
            with_headers = await _send(http, endpoint, session)
            without = await _send(http, endpoint, SAMPLE)  # same (reused) connection
        seen = [{k.lower(): v for k, v in h.items()} for h in srv.headers_seen]
    assert with_headers.ok and without.ok, (with_headers.error_detail, without.error_detail)
    assert seen[0]["x-session-id"] == "s-17" and seen[0]["x-tenant"] == "blue team"
    assert seen[0]["content-type"] == "application/json"  # the client's own are all there
    assert "x-session-id" not in seen[1] and "x-tenant" not in seen[1]
    assert srv.requests[0]["messages"][-1]["content"] == SAMPLE.prompt  # body framed right


def test_request_bytes_put_the_headers_before_the_length_and_frame_the_body() -> None:
    http = StreamClient(_endpoint(), max_connections=1)
    body = b'{"x": 1}'
    plain = http.request_bytes("chat", body)
    extra = http.request_bytes("chat", body, {"X-Session-ID": "s-17"})
    assert plain == http.request_bytes("chat", body, {})  # no headers: the cached prefix
    head, _, rest = extra.partition(b"\r\n\r\n")
    assert rest == body
    assert head.endswith(b"\r\nX-Session-ID: s-17\r\nContent-Length: 8")
    assert extra.replace(b"X-Session-ID: s-17\r\n", b"") == plain
    # and a strict parser (llhttp, as uvicorn) reads it as one request with that header
    got: dict[bytes, bytes] = {}
    bodies: list[bytes] = []

    class Sink:
        def on_header(self, name: bytes, value: bytes) -> None:
            got[name.lower()] = value

        def on_body(self, data: bytes) -> None:
            bodies.append(data)

    httptools.HttpRequestParser(Sink()).feed_data(extra)
    assert got[b"x-session-id"] == b"s-17" and b"".join(bodies) == body


@pytest.mark.parametrize(
    ("headers", "named"),
    [
        ({"X Session": "1"}, "'X Session'"),
        ({"X-Session:": "1"}, "'X-Session:'"),
        ({"": "1"}, "''"),
        ({"X-Session-ID": "s-17\r\nX-Injected: 1"}, "X-Session-ID"),
        ({"X-Session-ID": "s-17\n"}, "X-Session-ID"),
        ({"X-Session-ID": "s\x00"}, "X-Session-ID"),
        ({"X-Name": "Łódź"}, "X-Name"),
        ({"content-length": "0"}, "'content-length'"),
        ({"Transfer-Encoding": "chunked"}, "'Transfer-Encoding'"),
        ({"HOST": "elsewhere"}, "'HOST'"),
        ({"user-agent": "me"}, "'user-agent'"),
    ],
)
def test_bad_headers_are_refused_naming_the_header(headers: dict[str, str], named: str) -> None:
    http = StreamClient(_endpoint(), max_connections=1)
    with pytest.raises(ValueError, match="header") as info:
        http.request_bytes("chat", b"{}", headers)
    assert named in str(info.value)
    assert "s-17" not in str(info.value)  # a value may be a secret: never shown


def test_the_endpoint_authorization_may_not_be_repeated() -> None:
    http = StreamClient(Endpoint(base_url="http://127.0.0.1:9/v1", model="m", api_key="k"))
    with pytest.raises(ValueError, match="'authorization'"):
        http.request_bytes("chat", b"{}", {"authorization": "Bearer other"})


@pytest.mark.asyncio
async def test_a_bad_header_fails_its_request_before_anything_is_sent() -> None:
    bad = replace(SAMPLE, headers={"X-Session-ID": "s-17\r\nX-Injected: 1"})
    async with ScriptedServer(Script(STEPS)) as srv:
        endpoint = _endpoint(srv.url)
        async with StreamClient(endpoint) as http:
            record = await _send(http, endpoint, bad)
            good = await _send(http, endpoint, SAMPLE)
        requests = len(srv.requests)
    assert record.error == ErrorKind.CLIENT and "X-Session-ID" in record.error_detail
    assert record.t_end >= record.t_send > 0
    assert good.ok
    assert requests == 1  # only the good one reached the server
