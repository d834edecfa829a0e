"""Wire-format helpers that need no server."""

from __future__ import annotations

import json

from pytest_llmperf.sim.wire import ChunkWriter, WireError, error_body, parse_request

MODEL = "sim-fixed"


def test_usage_json_roundtrip_is_plain_json() -> None:
    # guards the hand-built chunk templates against producing invalid JSON
    for api in ("chat", "completions"):
        w = ChunkWriter(api, MODEL)
        for fr in (None, "length", "stop"):
            frame = w.token_chunk(' "quoted\\', fr).decode()
            assert frame.startswith("data: ") and frame.endswith("\n\n")
            parsed = json.loads(frame[6:])
            choice = parsed["choices"][0]
            assert choice["finish_reason"] == fr
            assert (choice["delta"]["content"] if api == "chat" else choice["text"]) == ' "quoted\\'


def test_error_body_shape() -> None:
    assert error_body(429, "slow down") == {
        "error": {"message": "slow down", "type": "RateLimitError", "param": None, "code": 429}
    }


def test_chat_prompt_counts_every_message_content() -> None:
    body = {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "a b"},
            {"role": "user", "content": [{"type": "text", "text": "c, d"}]},
        ],
    }
    parsed = parse_request("chat", body, MODEL)
    assert parsed.num_prompt_tokens == 5
    assert parsed.max_tokens is None and not parsed.stream


def test_token_id_prompt_and_multiple_prompts() -> None:
    assert parse_request("completions", {"prompt": [1, 2, 3]}, MODEL).num_prompt_tokens == 3
    try:
        parse_request("completions", {"prompt": ["a", "b"]}, MODEL)
    except WireError as exc:
        assert exc.status == 400 and exc.param == "prompt"
    else:
        raise AssertionError("two prompts in one request must be rejected")


def test_token_template_builds_the_same_bytes_as_token_chunk() -> None:
    # the engine's fan-out writes chunks built from the template; they must be vLLM's
    from pytest_llmperf.sim.text import WORDS, WORDS_JSON, token_index, token_text

    for api in ("chat", "completions"):
        w = ChunkWriter(api, MODEL)
        for fr in ("length", "stop"):
            head, tail, last_tail = w.token_template(fr)
            for salt, k in ((0, 0), (13, 5), (26 * 7, 127)):
                i = token_index(k, salt)
                assert WORDS[i] == token_text(k, salt)
                assert head + WORDS_JSON[i] + tail == w.token_chunk(WORDS[i])
                assert head + WORDS_JSON[i] + last_tail == w.token_chunk(WORDS[i], fr)
