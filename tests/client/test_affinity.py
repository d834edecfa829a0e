"""Session affinity on real sockets: what ``pin`` puts on the wire for each mode, the
router token's round trip, and which replica served each request.

The server (:mod:`router_server`) is router-like: a request with a token it issued goes
to that token's replica, any other to the next replica in turn, so a conversation stays
on one replica only if its token comes back.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from router_server import RouterServer

from pytest_llmperf.client import Endpoint, RequestRecord, send_request
from pytest_llmperf.client.affinity import (
    DEFAULT_REPLICA_HEADERS,
    Affinity,
    AffinityKind,
    parse_replica_headers,
    pin,
)
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.options import LlmPerfOptions
from pytest_llmperf.workloads import Sample

SAMPLE = Sample(index=0, prompt="Fix the failing test.", input_tokens=5, max_tokens=8)


def _endpoint(url: str, affinity: str | None = None, replica: str | None = None) -> Endpoint:
    return Endpoint.from_env(
        url,
        api_key_env=None,
        model="m",
        affinity=Affinity.parse(affinity, replica_headers=parse_replica_headers(replica)),
    )


async def _send(http: StreamClient, endpoint: Endpoint, sample: Sample) -> RequestRecord:
    record = RequestRecord(index=sample.index, t_sched=time.monotonic_ns())
    await send_request(http, endpoint, sample, record)
    assert record.ok, record.error_detail
    return record


@pytest.mark.asyncio
async def test_each_mode_puts_its_headers_and_fields_on_the_wire() -> None:
    sample = replace(SAMPLE, headers={"x-tenant": "blue"}, extra_body={"nvext": {"x": 1}})
    modes = "dynamo,dynamo-session-control,sglang,header:x-conversation"
    async with RouterServer() as srv:
        endpoint = _endpoint(srv.url, modes)
        async with StreamClient(endpoint) as http:
            await _send(http, endpoint, pin(sample, endpoint, "conv-7"))
            await _send(http, endpoint, pin(sample, endpoint, "conv-7", "sub-1"))
            await _send(http, endpoint, pin(sample, endpoint, "conv-7", "sub-1/sub-2"))
    (root, root_body), (child, child_body), (grandchild, _) = srv.seen
    assert root["x-dynamo-session-id"] == "conv-7" and "x-dynamo-parent-session-id" not in root
    assert child["x-dynamo-session-id"] == "conv-7/sub-1"
    assert child["x-dynamo-parent-session-id"] == "conv-7"
    assert grandchild["x-dynamo-session-id"] == "conv-7/sub-1/sub-2"
    assert grandchild["x-dynamo-parent-session-id"] == "conv-7/sub-1"
    for headers in (root, child, grandchild):  # the conversation's own id, whatever the thread
        assert headers["x-smg-routing-key"] == "conv-7"
        assert headers["x-conversation"] == "conv-7"
        assert headers["x-tenant"] == "blue"  # the sample's own headers stay
    assert root_body["nvext"] == {
        "x": 1,  # merged into the sample's own nvext, not over it
        "session_control": {"session_id": "conv-7", "action": "bind", "timeout": 300},
    }
    assert child_body["nvext"]["session_control"]["session_id"] == "conv-7/sub-1"
    assert root_body["messages"][-1]["content"] == SAMPLE.prompt


def test_no_affinity_leaves_the_sample_as_it_is() -> None:
    endpoint = _endpoint("http://127.0.0.1:9/v1")
    assert pin(SAMPLE, endpoint, "conv-7", "sub", "tok") is SAMPLE
    # a token mode with no token yet adds nothing either
    assert pin(SAMPLE, _endpoint("http://127.0.0.1:9/v1", "token:x-t"), "c", "", "") is SAMPLE


async def _two_conversations(endpoint: Endpoint, http: StreamClient) -> dict[str, list[str]]:
    """Conversations a and b, three calls each, interleaved; each call pinned with the
    token of its conversation's last response. Returns each one's replicas."""
    tokens = {"a": "", "b": ""}
    replicas: dict[str, list[str]] = {"a": [], "b": []}
    for _ in range(3):
        for conv in ("a", "b"):
            record = await _send(http, endpoint, pin(SAMPLE, endpoint, conv, "", tokens[conv]))
            tokens[conv] = record.route_token or tokens[conv]
            replicas[conv].append(record.replica)
    return replicas


@pytest.mark.asyncio
async def test_the_router_token_comes_back_and_keeps_each_conversation_on_its_replica() -> None:
    async with RouterServer(token_header="x-route-token") as srv:
        endpoint = _endpoint(srv.url, "token:X-Route-Token")
        async with StreamClient(endpoint) as http:
            replicas = await _two_conversations(endpoint, http)
    assert replicas == {"a": ["replica-0"] * 3, "b": ["replica-1"] * 3}
    sent = [h.get("x-route-token") for h, _ in srv.seen]
    assert sent == [None, None, "tok-0", "tok-1", "tok-0", "tok-1"]  # first calls: no token yet
    assert len(srv.tokens) == 2


@pytest.mark.asyncio
async def test_without_the_token_the_router_spreads_a_conversation() -> None:
    """The same router and loop, no affinity: the calls move between replicas (so the
    test above is not passing by accident; three replicas, as two conversations taking
    turns on two would each land on one by round robin alone)."""
    async with RouterServer(replicas=3) as srv:
        endpoint = _endpoint(srv.url)
        async with StreamClient(endpoint) as http:
            replicas = await _two_conversations(endpoint, http)
    assert replicas == {
        "a": ["replica-0", "replica-2", "replica-1"],
        "b": ["replica-1", "replica-0", "replica-2"],
    }
    assert all("x-route-token" not in h for h, _ in srv.seen)


@pytest.mark.asyncio
async def test_a_cookie_token_goes_back_as_a_cookie() -> None:
    async with RouterServer(cookie=True) as srv:
        endpoint = _endpoint(srv.url, "token:set-cookie")
        async with StreamClient(endpoint) as http:
            first = await _send(http, endpoint, pin(SAMPLE, endpoint, "a"))
            second = await _send(http, endpoint, pin(SAMPLE, endpoint, "a", "", first.route_token))
    assert first.route_token == "route=tok-0"  # the attributes (Path, HttpOnly) dropped
    assert srv.seen[1][0]["cookie"] == "route=tok-0"
    assert second.replica == first.replica == "replica-0"


@pytest.mark.asyncio
async def test_the_replica_is_read_from_the_named_header() -> None:
    async with RouterServer(replica_header="x-worker") as srv:
        by_default = _endpoint(srv.url)  # x-worker is on no default list
        named = _endpoint(srv.url, replica="X-Other, X-Worker")
        none = _endpoint(srv.url, replica="none")
        async with StreamClient(by_default) as http:
            unread = await _send(http, by_default, SAMPLE)
            read = await _send(http, named, SAMPLE)
            off = await _send(http, none, SAMPLE)
    assert unread.replica == "" and off.replica == ""
    assert read.replica == "replica-1"  # the second request: round robin's next replica
    assert read.route_token == ""  # no token mode: the token header is not kept


@pytest.mark.asyncio
async def test_the_default_list_reads_the_simulators_header() -> None:
    assert DEFAULT_REPLICA_HEADERS[0] == "x-replica-id"
    async with RouterServer() as srv:
        endpoint = _endpoint(srv.url)
        async with StreamClient(endpoint) as http:
            record = await _send(http, endpoint, SAMPLE)
    assert record.replica == "replica-0"


def _options(**raw: str) -> LlmPerfOptions:
    return LlmPerfOptions.resolve(lambda o: raw.get(o.dest))


def test_the_options_parse_into_the_endpoints_affinity() -> None:
    options = _options(llm_affinity="dynamo, token:x-route", llm_replica_header="X-Pod")
    affinity = options.affinity
    assert [r.kind for r in affinity.rules] == [AffinityKind.DYNAMO, AffinityKind.TOKEN]
    assert affinity.token_header == "x-route" and affinity.replica_headers == ("x-pod",)
    assert affinity.describe() == {
        "modes": ["dynamo", "token:x-route"],
        "replica_headers": ["x-pod"],
    }
    plain = _options()
    assert plain.affinity.rules == () and plain.affinity.replica_headers == DEFAULT_REPLICA_HEADERS
    assert _options(llm_affinity="none").affinity.rules == ()


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("llm_affinity", "dynamoo", "unknown affinity mode 'dynamoo'; use any of header:NAME"),
        ("llm_affinity", "header", "'header' needs a header name: header:NAME"),
        ("llm_affinity", "token:", "'token' needs a header name"),
        ("llm_affinity", "sglang:x-key", "'sglang' takes no header name"),
        ("llm_affinity", "header:x session", "'x session' in 'header:x session' is not an HTTP"),
        ("llm_affinity", "header:Authorization", "Authorization is a header the client sends"),
        ("llm_affinity", "token:content-length", "content-length cannot carry a router's token"),
        ("llm_affinity", "token:a,token:b", "one token:HEADER at most"),
        ("llm_affinity", "sglang,sglang", "'sglang' is given twice"),
        ("llm_affinity", "sglang,header:X-SMG-Routing-Key", "send the same header"),
        ("llm_replica_header", "x-pod,bad header", "'bad header' is not an HTTP header name"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_the_option(option: str, value: str, says: str) -> None:
    flag = "--" + option.replace("_", "-")
    with pytest.raises(LlmPerfUsageError) as info:
        _options(**{option: value})
    assert flag in str(info.value) and says in str(info.value)
