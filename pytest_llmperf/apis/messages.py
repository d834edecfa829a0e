"""Anthropic's Messages API (``POST /v1/messages``): the ``messages`` format.

The stream's events (``data: {"type": …}`` after an ``event:`` line): ``message_start``
(the prompt's usage), ``content_block_start``/``_stop`` (block boundaries),
``content_block_delta`` — the token events: ``text_delta`` (answer),
``thinking_delta`` (reasoning), ``input_json_delta`` (a tool call's input:
answer), but not ``signature_delta`` (a thinking block's signature) —
``message_delta`` (the ``stop_reason`` and the cumulative ``output_tokens``:
the last one wins), ``message_stop`` (the end), ``ping`` (nothing), ``error``.

Usage: ``message_start.message.usage`` gives the prompt as ``input_tokens`` (the
uncached part) + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``,
the cached part being ``cache_read_input_tokens``; ``message_delta.usage.output_tokens``
the completion. What real servers send, read in their sources:

- vLLM (``entrypoints/anthropic/serving.py``): a translation of its chat stream;
  no ``[DONE]`` (its chat stream's ``[DONE]`` becomes ``message_stop``), empty
  chat deltas dropped (so fewer events than tokens when a token ends inside a
  character), ``message_delta`` with ``input_tokens`` and ``output_tokens``
  from the final usage, a failure as ``event: error`` with
  ``{"type": "error", "error": {"type", "message"}}``; its request model has no
  ``ignore_eos`` and ignores unknown fields, so ``ignore_eos`` is accepted and
  has no effect there (the output lengths are the model's: see ``token_lengths``).
- llama.cpp's server (``tools/server/server-task.cpp``, ``server-context.cpp``):
  ``message_start`` rides with the first token; ``message_delta.usage`` has
  ``output_tokens`` only; no ``[DONE]``; a failure mid-stream as ``event: error``
  with its plain error object ``{"code", "message", "type": "server_error"}``;
  a thinking block closes with an empty ``signature_delta``; the API key is
  read from ``Authorization`` and, when that is absent, ``X-Api-Key``.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_llmperf.apis.events import ChunkInfo, error_message, load_event
from pytest_llmperf.apis.fields import (
    DEFAULT_FIELDS,
    FieldRules,
    RequestFields,
    apply_extra,
    apply_output_fields,
)
from pytest_llmperf.apis.format import ApiFormat
from pytest_llmperf.apis.names import Api
from pytest_llmperf.apis.output_parts import OutputParts, name_call
from pytest_llmperf.apis.samples import ContractLike, SampleLike

__all__ = [
    "ANTHROPIC_VERSION",
    "MESSAGES",
    "TERMINAL_EVENTS",
    "answer_text",
    "build_payload",
    "headers",
    "output_fields",
    "parse_event",
    "read_output",
]

ANTHROPIC_VERSION = "2023-06-01"  # the anthropic-version header every request carries
TERMINAL_EVENTS = ("message_stop",)
_NOTHING = ChunkInfo()
_DONE = ChunkInfo(done=True)


def build_payload(
    model: str, sample: SampleLike, fields: RequestFields = DEFAULT_FIELDS
) -> dict[str, Any]:
    """The streaming Messages body of ``sample``.

    The history's user and assistant turns go into ``messages``; a system turn
    goes to the top-level ``system`` (the API has no system role in
    ``messages``). The user turn is a plain string, or, with images, a
    ``text`` block followed by one ``image`` block per image (base64 source
    with its media type). ``max_tokens`` is required by the API; ``ignore_eos``
    is sent as negotiated. A sample's output contract adds its fields
    (:func:`output_fields`).
    """
    system = [turn["content"] for turn in sample.history if turn["role"] == "system"]
    messages: list[dict[str, Any]] = [
        {"role": turn["role"], "content": turn["content"]}
        for turn in sample.history
        if turn["role"] != "system"
    ]
    content: Any = sample.prompt
    if sample.images:
        content = [
            {"type": "text", "text": sample.prompt},
            *(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": i.media_type, "data": i.data},
                }
                for i in sample.images
            ),
        ]
    messages.append({"role": "user", "content": content})
    body: dict[str, Any] = {"model": model}
    if system:
        body["system"] = "\n".join(system)
    body.update(messages=messages, max_tokens=sample.max_tokens, stream=True, temperature=0.0)
    if fields.ignore_eos:
        body["ignore_eos"] = True
    if sample.contract is not None:
        apply_output_fields(body, sample.contract, output_fields(sample.contract))
    return apply_extra(body, sample, fields, ignore_eos=fields.ignore_eos)


# The Messages API's names of chat's tool_choice modes.
_TOOL_CHOICE = {"auto": "auto", "required": "any", "none": "none"}


def output_fields(contract: ContractLike) -> dict[str, Any]:
    """What a Messages body adds for ``contract``: tools as ``{"name", "description",
    "input_schema"}``, ``tool_choice`` as ``{"type": "auto" | "any" | "none"}`` or
    ``{"type": "tool", "name"}`` (chat's ``"required"`` is ``any``); greedy decoding
    as ``temperature`` 0 and ``top_p`` 1. The API has no JSON Schema output field
    (collection refuses ``structured=`` here)."""
    out: dict[str, Any] = {}
    if contract.tools:
        tools = []
        for tool in contract.tools:
            function = tool["function"]
            entry: dict[str, Any] = {"name": function["name"]}
            if function.get("description"):
                entry["description"] = function["description"]
            entry["input_schema"] = function["parameters"]
            tools.append(entry)
        out["tools"] = tools
        named = contract.named_tool
        if named is not None:
            out["tool_choice"] = {"type": "tool", "name": named}
        elif isinstance(contract.tool_choice, str):
            out["tool_choice"] = {"type": _TOOL_CHOICE.get(contract.tool_choice, "auto")}
    if contract.greedy:
        out.update(temperature=0.0, top_p=1.0)
    return out


def parse_event(data: str) -> ChunkInfo:
    """Interpret one ``data`` payload of a Messages stream (or a whole, non-streamed
    message); malformed JSON raises ``ValueError``."""
    if data == "[DONE]" or data.strip() == "[DONE]":
        return _NOTHING  # no Messages server sends it; message_stop is the end
    obj = load_event(data)
    kind = obj.get("type")
    if kind == "content_block_delta":
        delta = obj.get("delta")
        if delta.__class__ is not dict:
            return _NOTHING
        dtype = delta.get("type")
        if dtype == "text_delta":
            text = delta.get("text")
            has = text.__class__ is str and bool(text)
            return ChunkInfo(True, has, False, has)
        if dtype == "thinking_delta":
            text = delta.get("thinking")
            has = text.__class__ is str and bool(text)
            return ChunkInfo(True, False, has, has)
        if dtype == "input_json_delta":
            return ChunkInfo(True, True, False, bool(delta.get("partial_json")))
        return _NOTHING  # signature_delta, or a kind of delta this client does not know
    if kind == "message_delta":
        delta = obj.get("delta")
        stop = delta.get("stop_reason") if delta.__class__ is dict else None
        return ChunkInfo(finish_reason=stop or None, usage=_usage(obj.get("usage")))
    if kind == "message_stop":
        return _DONE
    if kind == "message_start":
        message = obj.get("message")
        usage = message.get("usage") if message.__class__ is dict else None
        return ChunkInfo(usage=_usage(usage))
    if kind == "error" or obj.get("error"):
        return ChunkInfo(error=error_message(obj) if obj.get("error") else _plain_error(obj))
    if kind == "message":
        return _whole(obj)  # a server that ignored stream: true
    if kind.__class__ is str and kind.endswith("_error") and "message" in obj:
        return ChunkInfo(error=_plain_error(obj))  # llama.cpp's error event
    return _NOTHING  # ping, content_block_start/stop, or an event this client does not know


def _plain_error(obj: dict[str, Any]) -> str:
    """An error object without the ``error`` wrapper (llama.cpp: ``{"code", "message",
    "type"}``), in the server's words."""
    message = obj.get("message")
    code = obj.get("code") or (obj.get("type") if obj.get("type") != "error" else None)
    if message:
        return f"{message} ({code})"[:300] if code else str(message)[:300]
    return f"error event without a message: {str(obj)[:200]}"


def _usage(usage: Any) -> dict[str, Any] | None:
    """A Messages usage in the chat API's names (what the record reads).

    The prompt is the sum of the uncached, cache-read and cache-written input
    tokens; it is taken only where ``input_tokens`` is given and the sum is not 0
    (a ``message_delta`` with ``output_tokens`` alone says nothing of the prompt).
    """
    if usage.__class__ is not dict:
        return None
    out: dict[str, Any] = {}
    if (completion := usage.get("output_tokens")).__class__ is int:
        out["completion_tokens"] = completion
    uncached = usage.get("input_tokens")
    if uncached.__class__ is int:
        read = usage.get("cache_read_input_tokens")
        read = read if read.__class__ is int else 0
        written = usage.get("cache_creation_input_tokens")
        written = written if written.__class__ is int else 0
        if uncached + read + written:
            out["prompt_tokens"] = uncached + read + written
            if "cache_read_input_tokens" in usage:
                out["prompt_tokens_details"] = {"cached_tokens": read}
    return out or None


def _whole(message: dict[str, Any]) -> ChunkInfo:
    """A whole message object: what its content blocks carry, and how it ended."""
    usage = _usage(message.get("usage"))
    stop = message.get("stop_reason")
    answer = reasoning = output = False
    blocks = message.get("content")
    for block in blocks if blocks.__class__ is list else ():
        if block.__class__ is not dict:
            continue
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            answer = output = True
        elif kind == "thinking" and block.get("thinking"):
            reasoning = output = True
        elif kind == "tool_use":
            answer = True
            output = output or bool(block.get("input"))
    return ChunkInfo(output, answer, reasoning, output, stop or "stop", usage)


def answer_text(data: str) -> str:
    """The answer text of one event (a ``text_delta``), or of a whole message (its text
    blocks); never thinking text or a tool call's input."""
    obj = load_event(data)
    kind = obj.get("type")
    if kind == "content_block_delta":
        delta = obj.get("delta")
        if delta.__class__ is dict and delta.get("type") == "text_delta":
            text = delta.get("text")
            return text if text.__class__ is str else ""
        return ""
    if kind == "message":
        blocks = obj.get("content")
        return "".join(
            b["text"]
            for b in (blocks if blocks.__class__ is list else ())
            if b.__class__ is dict and b.get("type") == "text" and b.get("text").__class__ is str
        )
    return ""


# -- output (what a reply's answer and tool calls are, for validation) -----------------
#
# A call is a ``content_block_start`` of type ``tool_use`` (its ``name``, ``input``
# ``{}``) and ``input_json_delta`` pieces (``partial_json``) at the block's ``index``; a
# whole message has ``tool_use`` blocks with ``input`` parsed.


def read_output(out: OutputParts, obj: dict[str, Any]) -> str:
    """A Messages stream event, or a whole message."""
    kind = obj.get("type")
    if kind == "content_block_delta":
        delta = obj.get("delta")
        if delta.__class__ is not dict:
            return ""
        dtype = delta.get("type")
        if dtype == "text_delta":
            return out.text_piece(delta.get("text"))
        if dtype == "input_json_delta":
            partial = delta.get("partial_json")
            if partial.__class__ is not str:
                return ""
            if partial:
                out.target(_block_key(obj)).pieces.append(partial)
            return str(partial)
        if dtype == "thinking_delta":
            thinking = delta.get("thinking")
            return str(thinking) if thinking.__class__ is str else ""
        return ""
    if kind == "content_block_start":
        block = obj.get("content_block")
        if block.__class__ is dict and block.get("type") == "tool_use":
            call = out.target(_block_key(obj), opening=True)
            name_call(call, block.get("name"))
            start = block.get("input")
            if start is not None:
                call.start = json.dumps(start, ensure_ascii=False)
        return ""
    if kind == "message":
        pieces: list[str] = []
        blocks = obj.get("content")
        for position, block in enumerate(blocks if blocks.__class__ is list else ()):
            if block.__class__ is not dict:
                continue
            if block.get("type") == "text":
                pieces.append(out.text_piece(block.get("text")))
            elif block.get("type") == "tool_use":
                call = out.call(position)
                name_call(call, block.get("name"))
                call.final = json.dumps(block.get("input", {}), ensure_ascii=False)
                pieces.append(call.final)
        return "".join(pieces)
    return ""


def _block_key(obj: dict[str, Any]) -> Any:
    index = obj.get("index")
    return index if index.__class__ is int else None


def headers(api_key: str | None) -> dict[str, str]:
    """The Messages API's own headers: the key again as ``x-api-key`` (Anthropic's own
    header; llama.cpp's server reads it when ``Authorization`` is absent) and
    ``anthropic-version``, which Anthropic-compatible servers may require."""
    out = {"x-api-key": api_key} if api_key else {}
    out["anthropic-version"] = ANTHROPIC_VERSION
    return out


MESSAGES = ApiFormat(
    name=Api.MESSAGES,
    path="/messages",
    build_body=build_payload,
    takes_images=True,
    field_rules=FieldRules(frozenset({"ignore_eos"}), "max_tokens"),
    event_reader=lambda: parse_event,  # no state per stream: one function for all
    stream_end=" or ".join(TERMINAL_EVENTS),
    answer_text=answer_text,
    read_output=read_output,
    headers=headers,
    contract_fields={"tools": ("tools", "tool_choice"), "greedy": ("temperature", "top_p")},
)


# -- the simulator's side (pytest_llmperf.sim serves this format with what follows) --
