"""Correct on the servers people run: strict field checks, reasoning and empty deltas.

The servers here are real HTTP servers on 127.0.0.1 (``strict_server.py``)
that refuse unknown request fields as the OpenAI API and pydantic servers do,
and stream the way vLLM does with a reasoning model; the client must
negotiate its optional fields away, count every token event, and time
``ttft``/``ttfo`` against the server's own send times.
"""

from __future__ import annotations

import json
import time

import pytest
from strict_server import ServedRequest, StrictServer, serve

from pytest_llmperf.apis.chunks import parse_chunk
from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.client.endpoint import Endpoint, Timeouts, normalize_base_url
from pytest_llmperf.client.preflight import preflight
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.run import run_load
from pytest_llmperf.specs.run import RunSpec

CHUNKS = [
    # (delta or choice, event, answer, reasoning)
    ({"delta": {"role": "assistant", "content": ""}}, False, False, False),  # vLLM's opening
    ({"delta": {"role": "assistant"}}, False, False, False),
    ({"delta": {"role": "assistant", "content": "Hi"}}, True, True, False),  # role + first token
    ({"delta": {"content": "Hi"}}, True, True, False),
    ({"delta": {"content": ""}}, True, False, False),  # a token ending mid UTF-8 character
    ({"delta": {"content": None}}, False, False, False),
    ({"delta": {"reasoning_content": "hmm"}}, True, False, True),
    ({"delta": {"reasoning": "hmm"}}, True, False, True),  # the newer field name
    ({"delta": {"reasoning_content": "hmm", "content": None}}, True, False, True),
    ({"delta": {"reasoning_content": ""}}, True, False, False),
    ({"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}}, True, True, False),
    ({"delta": {}, "finish_reason": "stop"}, False, False, False),  # finish on its own chunk
    ({"delta": {"content": ""}, "finish_reason": "stop"}, False, False, False),
    ({"delta": {"content": "end"}, "finish_reason": "length"}, True, True, False),
    ({"text": "abc"}, True, True, False),  # completions
    ({"text": ""}, True, False, False),
    ({"text": "", "finish_reason": "stop"}, False, False, False),  # llama.cpp's last chunk
]


@pytest.mark.parametrize(("choice", "event", "answer", "reasoning"), CHUNKS)
def test_token_event_rules(choice, event, answer, reasoning):
    info = parse_chunk(json.dumps({"choices": [{"index": 0, "finish_reason": None, **choice}]}))
    assert (info.event, info.answer, info.reasoning) == (event, answer, reasoning)


def test_usage_only_chunk_is_not_a_token_event():
    info = parse_chunk(json.dumps({"choices": [], "usage": {"completion_tokens": 4}}))
    assert not info.event and info.usage == {"completion_tokens": 4}


def _endpoint(server: StrictServer, api: str = "chat", extra: dict | None = None) -> Endpoint:
    return Endpoint(
        normalize_base_url(server.url),
        api=api,  # type: ignore[arg-type]
        timeouts=Timeouts.from_seconds(10),
        fields=RequestFields(extra=extra or {}),
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("style", ["openai", "pydantic"])
async def test_a_refused_optional_field_is_dropped_and_reported(style):
    with serve(StrictServer(style=style)) as server:
        endpoint = await preflight(_endpoint(server))
    fields = endpoint.fields
    assert endpoint.model == "strict-model"
    assert fields.ignore_eos is False and fields.include_usage is True  # stream_options is API
    assert "ignore_eos" in fields.refused["ignore_eos"]  # the server's own words
    assert any("refused ignore_eos" in note for note in fields.notes())
    assert endpoint.describe()["request_fields"]["refused"] == dict(fields.refused)


@pytest.mark.asyncio
async def test_max_tokens_refused_on_chat_becomes_max_completion_tokens():
    with serve(StrictServer(refuse_max_tokens=True)) as server:
        endpoint = await preflight(_endpoint(server))
        assert endpoint.fields.max_tokens_field == "max_completion_tokens"
        spec = RunSpec.from_markers(("synthetic",), {"requests": 4, "output_tokens": 7})
        result = await run_load(endpoint, spec)
        bodies = [s.body for s in server.served]
    assert result.counts["completed"] == 4, result.error_samples
    assert all(b["max_completion_tokens"] == 7 and "max_tokens" not in b for b in bodies[-4:])


@pytest.mark.asyncio
async def test_a_refusal_that_names_no_field_is_narrowed_down_by_probing():
    class Vague(StrictServer):
        def _refusal(self, body, *, chat):  # the field is refused, but not named
            found = super()._refusal(body, chat=chat)
            return None if found is None else (400, {"error": "Bad request"})

    with serve(Vague()) as server:
        endpoint = await preflight(_endpoint(server))
    assert endpoint.fields.ignore_eos is False
    assert endpoint.fields.include_usage is True  # probed on its own and accepted


@pytest.mark.asyncio
async def test_a_user_field_the_server_refuses_is_a_usage_error_quoting_the_server():
    with serve(StrictServer()) as server, pytest.raises(LlmPerfUsageError) as caught:
        await preflight(_endpoint(server, extra={"top_k": 5}))
    text = str(caught.value)
    assert text.startswith("--llm-request-extra: ")
    assert '{"top_k": 5}' in text and "Unrecognized request argument supplied: top_k" in text


@pytest.mark.asyncio
async def test_user_fields_the_server_accepts_ride_on_every_request():
    with serve(StrictServer(allowed_extra=frozenset({"top_k", "seed"}))) as server:
        endpoint = await preflight(_endpoint(server, extra={"top_k": 5}))
        spec = RunSpec.from_markers(
            ("synthetic",), {"requests": 3, "extra_body": {"seed": 11}}, (), {}
        )
        result = await run_load(endpoint, spec)
        bodies = [s.body for s in server.served[-3:]]
    assert result.counts["completed"] == 3
    assert all(b["top_k"] == 5 and b["seed"] == 11 for b in bodies)
    assert result.workload["extra_body"] == {"seed": 11}


@pytest.mark.asyncio
@pytest.mark.parametrize("finish_on_last", [False, True], ids=["finish-apart", "finish-on-last"])
@pytest.mark.parametrize("api", ["chat", "completions"])
async def test_every_token_event_counts_and_ttft_ttfo_match_the_servers_send_times(
    api, finish_on_last
):
    """The issue's acceptance: a strict server streaming reasoning, then answers with empty
    deltas; every request completes, one ITL gap per token after the first, and ttft/ttfo
    within 1 ms of the server's own send times at p50. With ``finish_on_last`` the last
    token is ``""`` and carries the finish, as vLLM sends a final partial character."""
    server = StrictServer(
        reasoning=3 if api == "chat" else 0, answer=9, empty_every=3, finish_on_last=finish_on_last
    )
    records: list[RequestRecord] = []
    with serve(server):
        endpoint = await preflight(_endpoint(server, api=api))
        spec = RunSpec.from_markers(
            ("synthetic",), {"requests": 40}, ("concurrency",), {"concurrency": 4}
        )
        result = await run_load(endpoint, spec, observers=[records.append])
    served = server.served[-40:]
    assert result.counts == {
        "issued": 40,
        "completed": 40,
        "failed": 0,
        "incomplete": 0,
        "cancelled": 0,
        "connection_retries": 0,
        "invalid": 0,
        "blank": 0,
    }
    tokens = server.tokens
    assert all(r.token_events == tokens and len(r.gaps_ns) == tokens - 1 for r in records)
    assert result.metrics["itl"].count == 40 * (tokens - 1)  # type: ignore[union-attr]
    lengths = result.token_lengths
    assert lengths["output_events_mean"] == tokens == lengths["output_server_mean"]
    assert result.accumulator.reasoning_tokens == 40 * server.reasoning

    # Each request's timestamps against the server's own, paired by prompt. Causality bounds
    # them whatever the machine's scheduling: the client stamps t_send before writing the
    # request (so before the server reads it) and t_first/t_out at the read that brought
    # the event (so after the server handed it to the socket), and before the record ends.
    # How close they come (within 1 ms at p50) is timing, a benchmark figure:
    # benchmarks/token_event_timing.py.
    pairs = _paired(records, served, spec, api)
    for r, s in pairs:
        assert r.t_send <= s.received_ns
        assert s.first_event_write_ns <= r.t_first <= r.t_out <= r.t_last <= r.t_end
        assert s.first_answer_write_ns <= r.t_out  # ttfo waits for answer text
        assert r.t_end <= time.monotonic_ns()
    # ... and t_first is the first event's read, not a later one's: a client that stamped
    # the end of the stream would never read the first event before the last was written;
    # noise would have to merge every one of 40 streams of 24 ms into one read to do that
    assert any(r.t_first < s.last_event_write_ns for r, s in pairs)
    if server.reasoning:  # reasoning first: the answer's text is written after it
        assert any(r.t_out < s.last_event_write_ns and r.t_first < r.t_out for r, s in pairs)


def _paired(
    records: list[RequestRecord], served: list[ServedRequest], spec: RunSpec, api: str
) -> list[tuple[RequestRecord, ServedRequest]]:
    """Each record with the request the server served for it (the same synthetic prompt)."""
    by_prompt = {spec.workload.sample(r.index).prompt: r for r in records if r.tracked}
    assert len(by_prompt) == len(records)  # one prompt per request: pairing is exact
    pairs = []
    for s in served:
        text = s.body["messages"][-1]["content"] if api == "chat" else s.body["prompt"]
        [record] = [r for prompt, r in by_prompt.items() if prompt in text]
        pairs.append((record, s))
    assert len({id(r) for r, _ in pairs}) == len(pairs) == len(records)
    return pairs


@pytest.mark.asyncio
async def test_a_stream_with_output_usage_but_no_token_event_is_completed_blank():
    """transformers serve's shape for tokens that decode to nothing: no delta, a usage
    that counts them. Generated, so completed and counted blank; no event to time, so no
    TTFT, and its e2e runs to the end of the stream."""
    server = StrictServer(reasoning=0, answer=4, usage_only=True)
    with serve(server):
        endpoint = await preflight(_endpoint(server))
        result = await run_load(endpoint, RunSpec.from_markers(("synthetic",), {"requests": 2}))
    assert result.counts["completed"] == 2 and result.counts["blank"] == 2, result.errors
    assert result.counts["failed"] == 0 and result.accumulator.output_tokens == 2 * 4
    assert result.metrics["ttft"].count == 0  # type: ignore[union-attr]
    assert result.metrics["e2e"].count == 2  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_a_stream_with_neither_events_nor_output_usage_is_empty():
    server = StrictServer(reasoning=0, answer=0)
    with serve(server):
        endpoint = await preflight(_endpoint(server))
        result = await run_load(endpoint, RunSpec.from_markers(("synthetic",), {"requests": 2}))
    assert result.counts["failed"] == 2
    [sample] = result.error_samples
    assert sample["kind"] == "empty_response" and sample["count"] == 2
    assert "no generated text" in sample["message"]


@pytest.mark.asyncio
async def test_a_server_that_resets_after_a_500_still_gets_a_clear_answer():
    """transformers serve: GET /v1/models is a 500 (no hub cache), then uvicorn resets the
    connection. Discovery must report the 500 and its remedy, and with the model named the
    probes must still settle the fields on a fresh connection."""
    with serve(StrictServer(style="pydantic", reset_after_500=True)) as server:
        with pytest.raises(LlmPerfUsageError, match=r"HTTP 500 three times.*; pass --llm-model"):
            await preflight(_endpoint(server))
        named = Endpoint(normalize_base_url(server.url), model="strict-model")
        endpoint = await preflight(named)
    assert endpoint.fields.ignore_eos is False, endpoint.fields
