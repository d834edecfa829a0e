"""The OpenAI chunk that chat and completions stream: its reader, its answer text, its
output, and the part of their bodies they share.

Kept in one place so the tolerance rules for what real servers send (vLLM,
SGLang, TGI, llama.cpp, gateways) are read once: a role-only first chunk carries
no text; ``finish_reason`` may come with the last token or on an empty chunk of
its own; ``usage`` may ride on the last chunk or on a chunk with ``choices: []``;
one chunk may hold several tokens; reasoning models stream ``reasoning_content``
before ``content``; an error may arrive as a frame in the middle of a 200 stream.
:mod:`~pytest_llmperf.apis.chat` and :mod:`~pytest_llmperf.apis.completions` are
the two formats made of it.

What chat streams of a reply (read in vLLM's and llama.cpp's servers):
``choices[0].delta.content``; ``delta.tool_calls`` as ``[{"index", "id", "type",
"function": {"name", "arguments"}}]`` — the first delta of a call carries its ``id``
and name, later ones only ``index`` and a piece of ``arguments`` (a few servers send
the arguments as a parsed object, whole); a non-streamed answer has
``message.content`` and ``message.tool_calls``. Completions: ``choices[0].text``.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_llmperf.apis.events import SCAN as _SCAN
from pytest_llmperf.apis.events import ChunkInfo, error_message
from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.apis.output_parts import OutputParts
from pytest_llmperf.apis.samples import SampleLike

__all__ = ["STREAM_END", "answer_text", "parse_chunk", "read_output", "stream_body"]

# What ends a chat or completions stream, for the message of a stream cut before it.
STREAM_END = "finish_reason or [DONE]"
_DONE = ChunkInfo(done=True)


def stream_body(model: str, sample: SampleLike, fields: RequestFields) -> dict[str, Any]:
    """What a streaming chat and a completions body share: the model, the output length
    in the negotiated field, ``stream``, greedy ``temperature``, and the negotiated
    ``stream_options`` and ``ignore_eos`` (the prompt and the contract's fields are each
    format's own)."""
    body: dict[str, Any] = {
        "model": model,
        fields.max_tokens_field: sample.max_tokens,
        "stream": True,
        "temperature": 0.0,
    }
    if fields.include_usage:
        body["stream_options"] = {"include_usage": True}
    if fields.ignore_eos:
        body["ignore_eos"] = True
    return body


def parse_chunk(data: str) -> ChunkInfo:
    """Interpret one SSE ``data`` payload; malformed JSON raises ``ValueError``.

    This runs for every chunk of every stream, so it is written flat: the JSON
    goes straight to the C scanner, skipping ``json.loads``'s whitespace
    regexes and wrapper calls (a payload with leading whitespace, or a broken
    one, still goes through ``loads`` for its result or its error), and one
    ``ChunkInfo`` is built at the end.
    """
    if data == "[DONE]":
        return _DONE
    try:
        obj, end = _SCAN(data, 0)  # raw_decode without its wrapper: once per chunk
    except StopIteration:
        if data.strip() == "[DONE]":
            return _DONE
        obj, end = json.loads(data), len(data)  # leading whitespace; or raises json's error
    if end != len(data) and not data[end:].isspace():
        json.loads(data)  # raises "Extra data" with json's own message
    if obj.__class__ is not dict:
        raise ValueError(f"stream chunk is not a JSON object: {data[:80]!r}")
    if obj.get("error"):
        return ChunkInfo(error=error_message(obj))
    usage = obj.get("usage")
    if usage.__class__ is dict:  # the stream's last chunk (or a whole answer): timings ride here
        timing = _server_timing(obj)
    else:
        usage = timing = None
    choices = obj.get("choices")
    if not choices:
        return ChunkInfo(usage=usage, timing=timing)
    choice = choices[0]
    if choice.__class__ is not dict:
        return ChunkInfo(usage=usage, timing=timing)
    finish = choice.get("finish_reason")
    if finish and timing is None:  # llama.cpp's last chunk when no usage was asked for
        timing = _server_timing(obj)
    delta = choice.get("delta")
    if delta.__class__ is dict:
        content = delta.get("content")
        if len(delta) == 1 and content.__class__ is str:
            # the common chunk, {"content": "..."}: no further look-ups
            if content:
                return ChunkInfo(True, True, False, True, finish, usage, timing)
            if not finish:  # an empty token delta (vLLM: a partial character)
                return ChunkInfo(True, False, False, False, finish, usage, timing)
            return ChunkInfo(False, False, False, False, finish, usage, timing, blank_finish=True)
        return _delta_info(delta, content, finish, usage, timing)
    text = choice.get("text")
    if text.__class__ is str:  # completions
        if text:
            return ChunkInfo(True, True, False, True, finish, usage, timing)
        if not finish:
            return ChunkInfo(True, False, False, False, finish, usage, timing)
        return ChunkInfo(False, False, False, False, finish, usage, timing, blank_finish=True)
    message = choice.get("message")
    if message.__class__ is dict:  # a non-streamed chat answer
        return _delta_info(message, message.get("content"), finish, usage, timing, whole=True)
    return ChunkInfo(False, False, False, False, finish, usage, timing)


def _server_timing(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The server's timing object of the request: vLLM's ``metrics``, llama.cpp's
    ``timings`` (only ever looked for on the chunk that ends a stream)."""
    found = obj.get("metrics")
    if found.__class__ is not dict:
        found = obj.get("timings")
        if found.__class__ is not dict:
            return None
    timing: dict[str, Any] = found
    return timing


def _delta_info(
    delta: dict[str, Any],
    content: Any,
    finish: str | None,
    usage: dict[str, Any] | None,
    timing: dict[str, Any] | None,
    *,
    whole: bool = False,
) -> ChunkInfo:
    """The rare chat delta shapes: role chunks, reasoning, tool calls."""
    reasoning = delta.get("reasoning_content")
    if reasoning.__class__ is not str:
        reasoning = delta.get("reasoning")
    has_content = content.__class__ is str
    has_reasoning = reasoning.__class__ is str
    tools = delta.get("tool_calls")
    has_tools = bool(tools) and tools.__class__ is list
    text = has_content and bool(content)
    answer = text or has_tools
    thinking = has_reasoning and bool(reasoning)
    if answer or thinking:
        output = text or thinking or (has_tools and _has_arguments(tools))
        return ChunkInfo(True, answer, thinking, output, finish, usage, timing)
    # Only empty strings (or nothing) from here on.
    if not (has_content or has_reasoning) or whole or "role" in delta:
        # the role-only opening chunk, or a finish-only chunk
        return ChunkInfo(False, False, False, False, finish, usage, timing)
    if finish:  # "" beside the finish: a token only if the usage says so
        return ChunkInfo(False, False, False, False, finish, usage, timing, blank_finish=True)
    return ChunkInfo(True, False, False, False, finish, usage, timing)  # an empty token delta


def _has_arguments(calls: Any) -> bool:
    """Whether a ``tool_calls`` delta carries a piece of some call's arguments (a string,
    or the parsed object a few servers send); a call's name or id alone is not one."""
    for call in calls:
        function = call.get("function") if call.__class__ is dict else None
        if function.__class__ is dict and function.get("arguments"):
            return True
    return False


def answer_text(data: str) -> str:
    """The answer text of one event, or of a whole (non-streamed) answer: the first
    choice's ``content`` (chat) or ``text`` (completions); never reasoning text, ``""``
    for a tool call or a chunk without text.

    Kept out of :func:`parse_chunk`, which runs for every chunk of every stream: only
    a request whose reply is collected (a session turn that a later turn quotes,
    ``RequestRecord.reply``) pays for this second look at the payload, and only for
    events that :func:`parse_chunk` found to carry answer text.
    """
    try:
        obj, _ = _SCAN(data, 0)
    except StopIteration:
        obj = json.loads(data)  # leading whitespace (parse_chunk has accepted the payload)
    choices = obj.get("choices") if obj.__class__ is dict else None
    if not choices or choices.__class__ is not list or choices[0].__class__ is not dict:
        return ""
    choice = choices[0]
    part = choice.get("delta")  # the same order of look-ups as parse_chunk
    if part.__class__ is not dict:
        text = choice.get("text")  # completions
        if text.__class__ is str:
            return text
        part = choice.get("message")  # a non-streamed chat answer
        if part.__class__ is not dict:
            return ""
    content = part.get("content")
    return content if content.__class__ is str else ""


def read_output(out: OutputParts, obj: dict[str, Any]) -> str:
    """A chat or completions chunk, or a whole chat/completions answer."""
    choices = obj.get("choices")
    if choices.__class__ is not list or not choices or choices[0].__class__ is not dict:
        return ""
    choice: dict[str, Any] = choices[0]
    part = choice.get("delta")
    whole = False
    if part.__class__ is not dict:
        text = choice.get("text")  # completions
        if text.__class__ is str:
            return out.text_piece(text)
        part = choice.get("message")  # a non-streamed chat answer
        if part.__class__ is not dict:
            return ""
        whole = True
    piece = out.text_piece(part.get("content"))
    reasoning = part.get("reasoning_content")
    if reasoning.__class__ is not str:
        reasoning = part.get("reasoning")
    if reasoning.__class__ is str:
        piece = reasoning + piece
    calls = part.get("tool_calls")
    if calls.__class__ is list:
        for position, call in enumerate(calls):
            if call.__class__ is dict:
                piece += _read_call(out, call, position, whole)
    return piece


def _read_call(out: OutputParts, call: dict[str, Any], position: int, whole: bool) -> str:
    """One entry of ``tool_calls``: keyed by its ``index`` (streams), else its ``id``, else
    its position (a whole answer) or the call being streamed (a stream without either)."""
    index, ident = call.get("index"), call.get("id")
    if index.__class__ is int:
        target = out.call(index)
    elif ident.__class__ is str and ident:
        target = out.call(ident)
    elif whole:
        target = out.call(position)
    else:
        target = out.last_call()
    function = call.get("function")
    if function.__class__ is not dict:
        return ""
    name = function.get("name")
    if name.__class__ is str and name and not target.name:
        target.name = name
    arguments = function.get("arguments")
    if arguments.__class__ is str:
        if whole:
            target.final = arguments
        elif arguments:
            target.pieces.append(arguments)
        return str(arguments)
    if arguments is not None:  # a parsed object, sent whole
        target.final = json.dumps(arguments, ensure_ascii=False)
        return target.final
    return ""
