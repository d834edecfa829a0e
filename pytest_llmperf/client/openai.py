"""The OpenAI wire format: request bodies out, stream chunks in.

Kept apart from the transport so the tolerance rules for what real servers
send (vLLM, SGLang, TGI, llama.cpp, gateways) live in one readable place:
a role-only first chunk carries no text; ``finish_reason`` may come with the
last token or on an empty chunk of its own; ``usage`` may ride on the last
chunk or on a chunk with ``choices: []``; one chunk may hold several tokens;
reasoning models stream ``reasoning_content`` before ``content``; an error may
arrive as a frame in the middle of a 200 stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pytest_llmperf.workloads.base import Sample

__all__ = [
    "API_PATHS",
    "ApiKind",
    "ChunkInfo",
    "build_payload",
    "error_message",
    "parse_chunk",
]

ApiKind = Literal["chat", "completions"]
API_PATHS: dict[str, str] = {"chat": "/chat/completions", "completions": "/completions"}


def build_payload(api: str, model: str, sample: Sample) -> dict[str, Any]:
    """The streaming request body for ``sample``.

    ``ignore_eos`` (vLLM, SGLang) together with ``max_tokens`` makes the
    server generate the planned output length, so runs are comparable;
    servers that do not know it ignore unknown fields.
    """
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": sample.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "temperature": 0.0,
    }
    if api == "chat":
        body["messages"] = sample.messages()
    else:
        history = "".join(f"{turn['content']}\n" for turn in sample.history)
        body["prompt"] = history + sample.prompt
    if sample.extra_body:
        body.update(sample.extra_body)
    return body


@dataclass(slots=True)
class ChunkInfo:
    """What one decoded stream event means for the measurement."""

    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: str | None = None
    done: bool = False


_DECODER = json.JSONDecoder()
_SCAN = _DECODER.scan_once  # the C scanner; raises StopIteration where raw_decode raises


def parse_chunk(data: str) -> ChunkInfo:
    """Interpret one SSE ``data`` payload; malformed JSON raises ``ValueError``.

    This runs for every chunk of every stream, so it is written flat: the JSON
    goes straight to the C scanner, skipping ``json.loads``'s whitespace
    regexes and wrapper calls (a payload with leading whitespace, or a broken
    one, still goes through ``loads`` for its result or its error), and one
    ``ChunkInfo`` is built at the end (measured: 55 -> 20 µs for a 16-token
    stream's 19 events).
    """
    if data == "[DONE]":
        return ChunkInfo(done=True)
    try:
        obj, end = _SCAN(data, 0)  # raw_decode without its wrapper: once per chunk
    except StopIteration:
        if data.strip() == "[DONE]":
            return ChunkInfo(done=True)
        obj, end = json.loads(data), len(data)  # leading whitespace; or raises json's error
    if end != len(data) and not data[end:].isspace():
        json.loads(data)  # raises "Extra data" with json's own message
    if obj.__class__ is not dict:
        raise ValueError(f"stream chunk is not a JSON object: {data[:80]!r}")
    if obj.get("error"):
        return ChunkInfo(error=error_message(obj))
    usage = obj.get("usage")
    if usage.__class__ is not dict:
        usage = None
    choices = obj.get("choices")
    if not choices:
        return ChunkInfo(usage=usage)
    choice = choices[0]
    if choice.__class__ is not dict:
        return ChunkInfo(usage=usage)
    delta = choice.get("delta")
    if delta.__class__ is dict:
        text = delta.get("content")
        if "reasoning_content" in delta or "reasoning" in delta:  # reasoning models
            parts = (delta.get("reasoning_content"), delta.get("reasoning"), text)
            text = "".join(p for p in parts if isinstance(p, str))
    elif isinstance(choice.get("text"), str):
        text = choice["text"]
    elif isinstance(choice.get("message"), dict):  # a non-streamed chat answer
        text = choice["message"].get("content")
    else:
        text = ""
    return ChunkInfo(text if text.__class__ is str else "", choice.get("finish_reason"), usage)


def error_message(obj: Any) -> str:
    """The human message of an OpenAI error body, or a short dump of what came."""
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or ""
            code = err.get("code") or err.get("type") or ""
            return f"{msg} ({code})" if code and msg else str(msg or code or err)[:300]
        if isinstance(err, str):
            return err[:300]
        if "detail" in obj:
            return str(obj["detail"])[:300]
    return str(obj)[:300]
