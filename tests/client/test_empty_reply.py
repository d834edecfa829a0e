"""Nothing counts as generated unless something was: empty replies are failed requests.

DESIGN.md: a completed stream whose text, reasoning and tool-call arguments
are all empty is a failed request of kind ``empty_response``, whatever its
usage claims; an empty-string delta is a token event only inside a stream
that delivers text (vLLM streams a partial UTF-8 character as
``"content": ""``), never the evidence of one. Real sockets on 127.0.0.1
(``scripted_server.ScriptedServer`` replays each answer's bytes).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from loopback import running_in_thread
from scripted_server import Script, ScriptedServer, chat_chunk, sse

from pytest_llmperf.client import Endpoint, ErrorKind, RequestRecord, send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen import run_load
from pytest_llmperf.slo.verdicts import Verdict, evaluate
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.specs.slo import parse_slo
from pytest_llmperf.workloads import Sample

SAMPLE = Sample(index=0, prompt="Say something.", input_tokens=3, max_tokens=4)


def _usage(completion: int) -> dict[str, int]:
    return {"prompt_tokens": 3, "completion_tokens": completion, "total_tokens": 3 + completion}


def _delta(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> bytes:
    obj: dict[str, Any] = {"id": "x", "object": "chat.completion.chunk", "model": "m"}
    obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage is not None:
        obj["usage"] = usage
    return sse(obj)


def _text(text: str, finish: str | None = None, usage: Any = None) -> bytes:
    obj: dict[str, Any] = {"id": "x", "object": "text_completion", "model": "m"}
    obj["choices"] = [{"index": 0, "text": text, "finish_reason": finish}]
    if usage is not None:
        obj["usage"] = usage
    return sse(obj)


def _call(arguments: str, name: str = "") -> dict[str, Any]:
    function = {"name": name, "arguments": arguments} if name else {"arguments": arguments}
    return {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": function}]}


DONE = sse("[DONE]")

EMPTY_STREAMS = {
    # the mock servers' replies that were reported as successes
    "role-and-finish-usage-claims-1": (
        "chat",
        [chat_chunk("", role="assistant"), chat_chunk(None, finish="stop", usage=_usage(1)), DONE],
    ),
    "one-empty-delta-no-usage": ("chat", [chat_chunk(""), chat_chunk(None, finish="stop"), DONE]),
    "empty-deltas-usage-claims-3": (
        "chat",
        [*[chat_chunk("")] * 3, chat_chunk(None, finish="length", usage=_usage(3)), DONE],
    ),
    # vLLM's shapes with nothing in them: an empty finish the usage counts as a token
    "vllm-role-and-blank-finish": (
        "chat",
        [chat_chunk("", role="assistant"), chat_chunk("", finish="length", usage=_usage(1)), DONE],
    ),
    "empty-reasoning-deltas": (
        "chat",
        [_delta({"reasoning_content": ""}), _delta({}, "stop", _usage(2)), DONE],
    ),
    "tool-call-without-arguments": (
        "chat",
        [_delta(_call("", name="f")), _delta(_call("")), _delta({}, "tool_calls", _usage(2)), DONE],
    ),
    "completions-empty-texts": (
        "completions",
        [_text(""), _text(""), _text("", "length", _usage(3)), DONE],
    ),
}

DELIVERED_STREAMS = {
    # vLLM: partial characters as "" among text; each is still a token event
    "partial-characters-among-text": (
        "chat",
        [
            chat_chunk("", role="assistant"),
            chat_chunk(""),
            chat_chunk("é"),
            chat_chunk(""),
            chat_chunk("t"),
            chat_chunk(None, finish="length", usage=_usage(4)),
            DONE,
        ],
        4,
    ),
    "reasoning-only": (
        "chat",
        [
            _delta({"reasoning_content": "hmm"}),
            _delta({"reasoning_content": " so"}),
            _delta({}, "length", _usage(2)),
            DONE,
        ],
        2,
    ),
    "reasoning-field-only": (
        "chat",
        [_delta({"reasoning": "hmm"}), _delta({}, "length", _usage(1)), DONE],
        1,
    ),
    "tool-call-only": (
        "chat",
        [
            _delta(_call("", name="f")),
            _delta(_call('{"a"')),
            _delta(_call(": 1}")),
            _delta({}, "tool_calls", _usage(3)),
            DONE,
        ],
        3,
    ),
    "completions-text": (
        "completions",
        [_text("Hello"), _text(" there", "length", _usage(2)), DONE],
        2,
    ),
}

EMPTY_WHOLE = {
    "chat-empty-content": {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}
        ],
        "usage": _usage(5),
    },
    "chat-null-content-no-tools": {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": []},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(2),
    },
    "completions-empty-text": {
        "choices": [{"index": 0, "text": "", "finish_reason": None}],
        "usage": _usage(3),
    },
}

DELIVERED_WHOLE = {
    "chat-content": {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
        ],
        "usage": _usage(1),
    },
    "chat-reasoning-only": {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "reasoning_content": "hmm", "content": None},
                "finish_reason": "length",
            }
        ],
    },
    "chat-tool-call": {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, **_call('{"a": 1}', name="f")},
                "finish_reason": "tool_calls",
            }
        ],
    },
}


async def _send(srv: ScriptedServer, api: str) -> RequestRecord:
    endpoint = Endpoint.from_env(srv.url, api_key_env=None, model="m", api=api)  # type: ignore[arg-type]
    record = RequestRecord(index=0, t_sched=time.monotonic_ns())
    async with StreamClient(endpoint) as http:
        return await send_request(http, endpoint, SAMPLE, record)


def _stream(events: list[bytes]) -> Script:
    return Script([(0, event) for event in events])


@pytest.mark.asyncio
@pytest.mark.parametrize(("api", "events"), EMPTY_STREAMS.values(), ids=list(EMPTY_STREAMS))
async def test_a_stream_that_delivers_nothing_is_empty_whatever_its_usage_claims(
    api: str, events: list[bytes]
) -> None:
    async with ScriptedServer(_stream(events)) as srv:
        record = await _send(srv, api)
    assert record.error == ErrorKind.EMPTY, (record.error, record.error_detail)
    assert "no generated text" in record.error_detail
    if record.usage_completion_tokens:
        assert f"usage claims {record.usage_completion_tokens}" in record.error_detail


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("api", "events", "tokens"), DELIVERED_STREAMS.values(), ids=list(DELIVERED_STREAMS)
)
async def test_a_stream_that_delivers_something_completes(
    api: str, events: list[bytes], tokens: int
) -> None:
    async with ScriptedServer(_stream(events)) as srv:
        record = await _send(srv, api)
    assert record.ok, record.error_detail
    assert record.token_events == tokens  # the empty deltas among text still count


@pytest.mark.asyncio
@pytest.mark.parametrize("answer", EMPTY_WHOLE.values(), ids=list(EMPTY_WHOLE))
async def test_a_whole_json_answer_with_nothing_in_it_is_empty(answer: dict[str, Any]) -> None:
    api = "completions" if "text" in answer["choices"][0] else "chat"
    script = Script([(0, json.dumps(answer).encode())], content_type="application/json")
    async with ScriptedServer(script) as srv:
        record = await _send(srv, api)
    assert record.error == ErrorKind.EMPTY, (record.error, record.error_detail)


@pytest.mark.asyncio
@pytest.mark.parametrize("answer", DELIVERED_WHOLE.values(), ids=list(DELIVERED_WHOLE))
async def test_a_whole_json_answer_with_output_completes(answer: dict[str, Any]) -> None:
    script = Script([(0, json.dumps(answer).encode())], content_type="application/json")
    async with ScriptedServer(script) as srv:
        record = await _send(srv, "chat")
    assert record.ok, record.error_detail
    assert record.token_events == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["role-and-finish-usage-claims-1", "empty-deltas-usage-claims-3"])
async def test_a_server_of_empty_replies_fails_every_request_and_the_error_rate_slo(
    name: str,
) -> None:
    api, events = EMPTY_STREAMS[name]
    async with ScriptedServer(_stream(events)) as srv:
        endpoint = Endpoint.from_env(srv.url, api_key_env=None, model="m", api=api)  # type: ignore[arg-type]
        spec = RunSpec.from_markers(
            ("synthetic",), {"requests": 20}, ("concurrency",), {"concurrency": 4}
        )
        result = await run_load(endpoint, spec)
    assert result.counts["failed"] == 20 and result.counts["completed"] == 0
    assert result.errors == {"empty_response": 20}
    assert result.accumulator.output_tokens == 0  # the usage's claim is not throughput
    verdict = evaluate(parse_slo("error_rate < 1%"), result)
    assert verdict.verdict == Verdict.FAIL and verdict.observed == 1.0


SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=4, output_tokens=4, requests=20)
@pytest.mark.llm_load("concurrency", concurrency=2)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_empty(llm_loadgen):
    await llm_loadgen.run()
"""


def test_a_session_against_a_server_of_empty_replies_fails_its_error_rate_slo(
    pytester: pytest.Pytester,
) -> None:
    """The whole path: preflight passes (the server answers), every request of the run is
    ``empty_response``, the SLO fails, and the reports say why."""
    _, events = EMPTY_STREAMS["role-and-finish-usage-claims-1"]
    server = ScriptedServer(_stream(events))
    pytester.makepyfile(test_suite=SUITE)
    with running_in_thread(lambda: server, "empty-reply server"):
        result = pytester.runpytest_subprocess(
            f"--llm-endpoint={server.url}", "--llm-json=report.json", "-p", "no:cacheprovider"
        )
    assert result.ret == 1, result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    [run] = report["tests"][0]["runs"]
    assert run["counts"]["failed"] == 20 and run["counts"]["connection_retries"] == 0
    assert run["errors"] == {"empty_response": 20}
    result.stdout.fnmatch_lines(["*error_rate < 1%*observed 100*", "*empty_response*"])
