"""Generated but blank is counted, not failed; nothing generated is ``empty_response``.

docs/measurement.md, "Blank replies": a reply whose text, reasoning and
tool-call arguments are all empty is *completed* and counted ``blank`` when
something says tokens were generated — a token event (an empty delta
included: vLLM streams a token that decodes to nothing as ``"content": ""``)
or a usage that counts output tokens (``transformers serve`` streams nothing
for such tokens, but its usage counts them). With neither (no event and no
usage, or a usage of 0) it is a failed request, ``empty_response``. Real
sockets on 127.0.0.1 (``scripted_server.ScriptedServer`` replays each answer's
bytes; ``api_server.ApiServer`` answers each POST as the test says).
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import pytest
from api_server import ApiServer, Reply, serve
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


def _usage_chunk(completion: int) -> bytes:
    """The usage on a chunk of its own, with no choices (``stream_options.include_usage``)."""
    return chat_chunk(choices=False, usage=_usage(completion))


DONE = sse("[DONE]")
ROLE = chat_chunk("", role="assistant")

# (api, events, token events): generated (an event, or a usage that counts tokens), blank
BLANK_STREAMS = {
    # the vLLM reply: one "" delta per token of a random-weight model, usage 32
    "vllm-32-empty-deltas": (
        "chat",
        [ROLE, *[chat_chunk("")] * 31, chat_chunk("", finish="length", usage=_usage(32)), DONE],
        32,  # the finish's "" is the 32nd token: the usage says so
    ),
    # the transformers serve reply: no delta at all for such tokens, usage 32
    "transformers-serve-no-deltas-usage-32": (
        "chat",
        [ROLE, chat_chunk(None, finish="length"), _usage_chunk(32), DONE],
        0,
    ),
    "role-and-finish-usage-claims-1": (
        "chat",
        [ROLE, chat_chunk(None, finish="stop", usage=_usage(1)), DONE],
        0,
    ),
    "one-empty-delta-no-usage": (
        "chat",
        [chat_chunk(""), chat_chunk(None, finish="stop"), DONE],
        1,
    ),
    "empty-deltas-usage-claims-3": (
        "chat",
        [*[chat_chunk("")] * 3, chat_chunk(None, finish="length", usage=_usage(3)), DONE],
        3,
    ),
    # vLLM's shape with nothing in it: an empty finish the usage counts as a token
    "vllm-role-and-blank-finish": (
        "chat",
        [ROLE, chat_chunk("", finish="length", usage=_usage(1)), DONE],
        1,
    ),
    "empty-reasoning-deltas": (
        "chat",
        [_delta({"reasoning_content": ""}), _delta({}, "stop", _usage(2)), DONE],
        1,
    ),
    "tool-call-without-arguments": (
        "chat",
        [_delta(_call("", name="f")), _delta(_call("")), _delta({}, "tool_calls", _usage(2)), DONE],
        2,
    ),
    "completions-empty-texts": (
        "completions",
        [_text(""), _text(""), _text("", "length", _usage(3)), DONE],
        3,
    ),
    # the finish's "" is no token here (usage 4, not 0 + 1): no event, the usage counts 4
    "completions-no-text-usage-4": ("completions", [_text("", "length", _usage(4)), DONE], 0),
}

# (api, events, what the failure says): nothing says a token was generated
EMPTY_STREAMS = {
    "role-and-finish-no-usage": (
        "chat",
        [ROLE, chat_chunk(None, finish="stop"), DONE],
        "no token event and no usage",
    ),
    "usage-counts-0": (
        "chat",
        [ROLE, chat_chunk(None, finish="stop", usage=_usage(0)), DONE],
        "its usage counts 0 completion tokens",
    ),
    # the server's own count of 0 outweighs empty-string deltas
    "empty-deltas-usage-counts-0": (
        "chat",
        [chat_chunk(""), chat_chunk(""), chat_chunk(None, finish="stop", usage=_usage(0)), DONE],
        "its usage counts 0 completion tokens beside 2 empty delta(s)",
    ),
    # llama.cpp's closing "text": "" is no token without a usage that counts one
    "completions-blank-finish-no-usage": (
        "completions",
        [_text("", "stop"), DONE],
        "no token event and no usage",
    ),
}

DELIVERED_STREAMS = {
    # vLLM: partial characters as "" among text; each is still a token event
    "partial-characters-among-text": (
        "chat",
        [
            ROLE,
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


def _whole_chat(message: dict[str, Any], usage: Any = None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
        ]
    }
    if usage is not None:
        answer["usage"] = usage
    return answer


BLANK_WHOLE = {
    "chat-empty-content": _whole_chat({"content": ""}, _usage(5)),
    "chat-null-content-no-tools": _whole_chat({"content": None, "tool_calls": []}, _usage(2)),
    "completions-empty-text": {
        "choices": [{"index": 0, "text": "", "finish_reason": None}],
        "usage": _usage(3),
    },
}

EMPTY_WHOLE = {
    "chat-empty-content-no-usage": _whole_chat({"content": ""}),
    "chat-empty-content-usage-0": _whole_chat({"content": ""}, _usage(0)),
    "completions-empty-text-no-usage": {
        "choices": [{"index": 0, "text": "", "finish_reason": None}]
    },
}

DELIVERED_WHOLE = {
    "chat-content": _whole_chat({"content": "Hi"}, _usage(1)),
    "chat-reasoning-only": _whole_chat({"reasoning_content": "hmm", "content": None}),
    "chat-tool-call": _whole_chat({"content": None, **_call('{"a": 1}', name="f")}),
}


async def _send(srv: ScriptedServer, api: str) -> RequestRecord:
    endpoint = Endpoint.from_env(srv.url, api_key_env=None, model="m", api=api)  # type: ignore[arg-type]
    record = RequestRecord(index=0, t_sched=time.monotonic_ns())
    async with StreamClient(endpoint) as http:
        return await send_request(http, endpoint, SAMPLE, record)


def _stream(events: list[bytes]) -> Script:
    return Script([(0, event) for event in events])


def _whole_api(answer: dict[str, Any]) -> str:
    return "completions" if "text" in answer["choices"][0] else "chat"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("api", "events", "tokens"), BLANK_STREAMS.values(), ids=list(BLANK_STREAMS)
)
async def test_a_stream_generated_but_blank_completes_and_is_counted_blank(
    api: str, events: list[bytes], tokens: int
) -> None:
    async with ScriptedServer(_stream(events)) as srv:
        record = await _send(srv, api)
    assert record.ok, (record.error, record.error_detail)
    assert record.blank and not record.has_output
    assert record.token_events == tokens
    # timed where it had an event to time; no first token otherwise, its end still known
    assert bool(record.t_first) == bool(tokens) and record.t_end >= record.t_send > 0
    # no answer ever came, but for a tool call's name (ttfo: the call began)
    assert bool(record.t_out) == (record.finish_reason == "tool_calls")


@pytest.mark.asyncio
@pytest.mark.parametrize(("api", "events", "why"), EMPTY_STREAMS.values(), ids=list(EMPTY_STREAMS))
async def test_a_stream_with_no_sign_of_a_generated_token_is_empty(
    api: str, events: list[bytes], why: str
) -> None:
    async with ScriptedServer(_stream(events)) as srv:
        record = await _send(srv, api)
    assert record.error == ErrorKind.EMPTY, (record.error, record.error_detail)
    assert "no generated text" in record.error_detail and why in record.error_detail
    assert not record.blank


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("api", "events", "tokens"), DELIVERED_STREAMS.values(), ids=list(DELIVERED_STREAMS)
)
async def test_a_stream_that_delivers_something_completes_and_is_not_blank(
    api: str, events: list[bytes], tokens: int
) -> None:
    async with ScriptedServer(_stream(events)) as srv:
        record = await _send(srv, api)
    assert record.ok, record.error_detail
    assert not record.blank and record.has_output
    assert record.token_events == tokens  # the empty deltas among text still count


@pytest.mark.asyncio
@pytest.mark.parametrize("answer", BLANK_WHOLE.values(), ids=list(BLANK_WHOLE))
async def test_a_whole_json_answer_blank_with_a_usage_that_counts_tokens_completes(
    answer: dict[str, Any],
) -> None:
    script = Script([(0, json.dumps(answer).encode())], content_type="application/json")
    async with ScriptedServer(script) as srv:
        record = await _send(srv, _whole_api(answer))
    assert record.ok and record.blank, (record.error, record.error_detail)
    assert record.token_events == 0 and record.t_first == 0 and record.t_end > 0


@pytest.mark.asyncio
@pytest.mark.parametrize("answer", EMPTY_WHOLE.values(), ids=list(EMPTY_WHOLE))
async def test_a_whole_json_answer_with_nothing_in_it_is_empty(answer: dict[str, Any]) -> None:
    script = Script([(0, json.dumps(answer).encode())], content_type="application/json")
    async with ScriptedServer(script) as srv:
        record = await _send(srv, _whole_api(answer))
    assert record.error == ErrorKind.EMPTY, (record.error, record.error_detail)
    assert record.error_detail.startswith("response carried no generated text")


@pytest.mark.asyncio
@pytest.mark.parametrize("answer", DELIVERED_WHOLE.values(), ids=list(DELIVERED_WHOLE))
async def test_a_whole_json_answer_with_output_completes(answer: dict[str, Any]) -> None:
    script = Script([(0, json.dumps(answer).encode())], content_type="application/json")
    async with ScriptedServer(script) as srv:
        record = await _send(srv, "chat")
    assert record.ok, record.error_detail
    assert record.token_events == 1 and not record.blank


# -- runs: counts, blank_rate, latencies ------------------------------------------------------


def _chunked(events: list[bytes]) -> Reply:
    return Reply([(0, e) for e in events])


TEXT_REPLY = [
    ROLE,
    chat_chunk("Hello"),
    chat_chunk(" there"),
    chat_chunk(" friend", finish="length"),
    _usage_chunk(3),
    DONE,
]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("shape", "timed_blank"),
    [("vllm-32-empty-deltas", True), ("transformers-serve-no-deltas-usage-32", False)],
)
async def test_a_run_mixing_blank_and_text_replies_counts_them_and_judges_blank_rate(
    shape: str, timed_blank: bool
) -> None:
    """Every 4th reply of 20 is blank: all 20 completed, 5 blank, ``blank_rate`` 25% (of
    the completed), an error rate of 0; a blank reply with no event has e2e and no TTFT."""
    _, blank_events, _ = BLANK_STREAMS[shape]
    served = itertools.count()

    def reply(_path: str, _body: dict[str, Any]) -> Reply:
        return _chunked(blank_events if next(served) % 4 == 3 else TEXT_REPLY)

    with serve(ApiServer(reply)) as srv:
        endpoint = Endpoint.from_env(srv.url, api_key_env=None, model="m", api="chat")
        spec = RunSpec.from_markers(
            ("synthetic",), {"requests": 20}, ("concurrency",), {"concurrency": 4}
        )
        result = await run_load(endpoint, spec)
    counts = result.counts
    assert (counts["issued"], counts["completed"], counts["failed"]) == (20, 20, 0), result.errors
    assert counts["blank"] == 5 and counts["connection_retries"] == 0
    assert result.rate("blank_rate") == 0.25 and result.rate("error_rate") == 0.0
    assert result.accumulator.summary()["blank_rate"] == 0.25
    # the generated tokens are throughput: 15 replies of 3 and 5 of 32
    assert result.accumulator.output_tokens == 15 * 3 + 5 * 32
    assert result.histogram("e2e").count == 20
    assert result.histogram("ttft").count == (20 if timed_blank else 15)
    assert result.histogram("tpot").count == (20 if timed_blank else 15)
    judged = {e: evaluate(parse_slo(e), result) for e in ("blank_rate < 5%", "blank_rate <= 25%")}
    assert judged["blank_rate < 5%"].verdict == Verdict.FAIL
    assert judged["blank_rate < 5%"].observed == 0.25 and judged["blank_rate < 5%"].samples == 20
    assert judged["blank_rate <= 25%"].verdict == Verdict.PASS
    assert evaluate(parse_slo("error_rate < 1%"), result).verdict == Verdict.PASS


@pytest.mark.asyncio
async def test_a_run_of_empty_replies_fails_every_request_and_the_error_rate_slo() -> None:
    _, events, _ = EMPTY_STREAMS["role-and-finish-no-usage"]
    async with ScriptedServer(_stream(events)) as srv:
        endpoint = Endpoint.from_env(srv.url, api_key_env=None, model="m", api="chat")
        spec = RunSpec.from_markers(
            ("synthetic",), {"requests": 20}, ("concurrency",), {"concurrency": 4}
        )
        result = await run_load(endpoint, spec)
    assert result.counts["failed"] == 20 and result.counts["completed"] == 0
    assert result.counts["blank"] == 0 and result.errors == {"empty_response": 20}
    verdict = evaluate(parse_slo("error_rate < 1%"), result)
    assert verdict.verdict == Verdict.FAIL and verdict.observed == 1.0
    # no completed reply: nothing to rate blank, so its SLO cannot pass
    blank = evaluate(parse_slo("blank_rate < 5%"), result)
    assert blank.verdict == Verdict.INCONCLUSIVE and blank.observed is None


# -- whole sessions ---------------------------------------------------------------------------

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=4, output_tokens=4, requests=20)
@pytest.mark.llm_load("concurrency", concurrency=2)
@pytest.mark.llm_slo("{slo}")
async def test_replies(llm_loadgen):
    await llm_loadgen.run()
"""
ALL_BLANK = "all 20 completed replies were blank"


def _session(
    pytester: pytest.Pytester, events: list[bytes], slo: str
) -> tuple[pytest.RunResult, dict[str, Any]]:
    server = ScriptedServer(_stream(events))
    pytester.makepyfile(test_suite=SUITE.format(slo=slo))
    with running_in_thread(lambda: server, "scripted server"):
        result = pytester.runpytest(
            f"--llm-endpoint={server.url}",
            "--llm-json=report.json",
            "--llm-markdown=summary.md",
            "-p",
            "no:cacheprovider",
        )
    [test] = json.loads((pytester.path / "report.json").read_text())["tests"]
    return result, test


def test_a_session_against_a_server_of_blank_replies_says_so_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    """The server generates tokens (its usage counts them) that decode to nothing: every
    request completes, and the run is never a silent success: one line says all its
    replies were blank and what to do, in the terminal and as a warning."""
    _, events, _ = BLANK_STREAMS["role-and-finish-usage-claims-1"]
    result, test = _session(pytester, events, "error_rate < 1%")
    [run] = test["runs"]
    out = result.stdout.str()
    assert result.ret == 0, out
    counts = run["counts"]
    assert (counts["completed"], counts["failed"], counts["blank"]) == (20, 0, 20)
    assert run["metrics"]["blank_rate"] == 1.0 and run["errors"] == {}
    said = [line for line in out.splitlines() if ALL_BLANK in line]
    assert any(line.strip().startswith("! run0: all 20") for line in said), out
    assert any("LlmPerfBlankWarning" in line for line in said), out  # pytest's warnings summary
    assert 'llm_slo("blank_rate < 5%")' in said[0] and "check the model" in said[0]
    summary = (pytester.path / "summary.md").read_text()
    assert "20/20 (20 blank)" in summary


def test_a_blank_rate_slo_fails_a_session_of_blank_replies(pytester: pytest.Pytester) -> None:
    _, events, _ = BLANK_STREAMS["vllm-role-and-blank-finish"]
    result, test = _session(pytester, events, "blank_rate < 5%")
    [run] = test["runs"]
    assert result.ret == 1, result.stdout.str()
    assert run["counts"]["blank"] == 20 and run["counts"]["failed"] == 0
    [verdict] = test["slos"]
    assert verdict["verdict"] == "fail" and verdict["observed"] == 1.0
    assert verdict["samples"] == 20  # the completed replies
    result.stdout.fnmatch_lines(["*blank_rate < 5%*observed 100*"])


def test_a_session_against_a_server_of_empty_replies_fails_its_error_rate_slo(
    pytester: pytest.Pytester,
) -> None:
    """No event and no usage: nothing was generated. Preflight passes (the server
    answers), every request of the run is ``empty_response``, the SLO fails, and the
    reports say why."""
    _, events, _ = EMPTY_STREAMS["role-and-finish-no-usage"]
    result, test = _session(pytester, events, "error_rate < 1%")
    [run] = test["runs"]
    assert result.ret == 1, result.stdout.str()
    assert run["counts"]["failed"] == 20 and run["counts"]["connection_retries"] == 0
    assert run["counts"]["blank"] == 0 and run["errors"] == {"empty_response": 20}
    result.stdout.fnmatch_lines(["*error_rate < 1%*observed 100*", "*empty_response*"])
    assert ALL_BLANK not in result.stdout.str()
