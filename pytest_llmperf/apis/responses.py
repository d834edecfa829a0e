"""OpenAI's Responses API (``POST /v1/responses``): the ``responses`` format.

The stream is a sequence of typed events (``data: {"type": "response.…", …}``,
each after an ``event:`` line that repeats the type). Token events are the
deltas of generated text: ``response.output_text.delta`` (answer),
``response.reasoning_text.delta`` and ``response.reasoning_summary_text.delta``
(reasoning), ``response.function_call_arguments.delta`` (a tool call's
arguments: answer) — an empty-string delta included, as on chat. The lifecycle
events (``response.created``, ``…in_progress``, ``…output_item.added/done``,
``…content_part.added/done``, ``…output_text.done``) are not.

The stream ends at its terminal event: ``response.completed`` or
``response.incomplete`` (a normal end; the finish is ``incomplete_details.reason``,
``max_output_tokens`` at the cap), with the usage on the response object.
What real servers send, read in their sources:

- vLLM (``entrypoints/openai/responses/api_router.py``, ``serving.py``): no
  ``[DONE]``; every event as ``event: TYPE`` + ``data: JSON``; at the cap it
  ends with ``response.completed`` whose ``response.status`` is ``incomplete``
  and ``incomplete_details.reason`` ``max_output_tokens`` (never a
  ``response.incomplete`` event); per-request timings as ``response.metrics``.
- llama.cpp's server (``tools/server/server-task.cpp``, ``server-context.cpp``):
  no ``[DONE]``; ``response.completed`` with status ``completed`` always, usage
  ``input_tokens``/``output_tokens``/``input_tokens_details.cached_tokens``, its
  ``timings`` beside ``response`` on the event; a failure mid-stream as
  ``data: {"error": {"code", "message", "type"}}``.

Failures: ``response.failed`` (``response.error``), an ``error`` event
(``{"type": "error", "code", "message"}``) or an ``{"error": …}`` frame; each is the
request's failure in the server's words. A ``[DONE]`` after the terminal event
is tolerated, and ends nothing by itself.
"""

from __future__ import annotations

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
    "RESPONSES",
    "TERMINAL_EVENTS",
    "answer_text",
    "build_payload",
    "output_fields",
    "parse_event",
    "read_output",
]

TERMINAL_EVENTS = ("response.completed", "response.incomplete")
_ANSWER_DELTAS = frozenset({"response.output_text.delta"})
_REASONING_DELTAS = frozenset(
    {"response.reasoning_text.delta", "response.reasoning_summary_text.delta"}
)
_TOOL_DELTAS = frozenset(
    {"response.function_call_arguments.delta", "response.custom_tool_call_input.delta"}
)
_NOTHING = ChunkInfo()


def build_payload(
    model: str, sample: SampleLike, fields: RequestFields = DEFAULT_FIELDS
) -> dict[str, Any]:
    """The streaming Responses body of ``sample``.

    ``input`` is the conversation as messages: the history's turns with their
    roles and plain-string content, then the user turn — its text as
    ``input_text`` and each image as ``input_image`` (a ``data:`` URL) when the
    sample has images, a plain string otherwise. ``max_output_tokens`` is the
    API's own length field; ``ignore_eos`` (vLLM takes it) only as negotiated.
    A sample's output contract adds its fields (:func:`output_fields`).
    """
    turns: list[dict[str, Any]] = [
        {"role": turn["role"], "content": turn["content"]} for turn in sample.history
    ]
    content: Any = sample.prompt
    if sample.images:
        content = [
            {"type": "input_text", "text": sample.prompt},
            *({"type": "input_image", "image_url": image.data_url} for image in sample.images),
        ]
    turns.append({"role": "user", "content": content})
    body: dict[str, Any] = {
        "model": model,
        "input": turns,
        "max_output_tokens": sample.max_tokens,
        "stream": True,
        "temperature": 0.0,
    }
    if fields.ignore_eos:
        body["ignore_eos"] = True
    if sample.contract is not None:
        apply_output_fields(body, sample.contract, output_fields(sample.contract))
    return apply_extra(body, sample, fields, ignore_eos=fields.ignore_eos)


def output_fields(contract: ContractLike) -> dict[str, Any]:
    """What a Responses body adds for ``contract``, in the API's own shapes: the schema
    as ``text.format`` (``json_schema``, strict), function tools flat (``name``,
    ``description``, ``parameters`` beside ``type``), a named ``tool_choice`` as
    ``{"type": "function", "name"}``; greedy decoding as ``temperature`` 0 and
    ``top_p`` 1 (the API has no ``seed``)."""
    out: dict[str, Any] = {}
    if contract.schema is not None:
        out["text"] = {
            "format": {
                "type": "json_schema",
                "name": contract.schema_name,
                "schema": contract.schema,
                "strict": True,
            }
        }
    if contract.tools:
        out["tools"] = [{"type": "function", **tool["function"]} for tool in contract.tools]
        named = contract.named_tool
        if named is not None:
            out["tool_choice"] = {"type": "function", "name": named}
        elif contract.tool_choice is not None:
            out["tool_choice"] = contract.tool_choice
    if contract.greedy:
        out.update(temperature=0.0, top_p=1.0)
    return out


def parse_event(data: str) -> ChunkInfo:
    """Interpret one ``data`` payload of a Responses stream (or a whole, non-streamed
    response object); malformed JSON raises ``ValueError``."""
    if data == "[DONE]" or data.strip() == "[DONE]":
        return _NOTHING  # tolerated after the terminal event; a stream needs that event
    obj = load_event(data)
    kind = obj.get("type")
    if kind in _ANSWER_DELTAS:
        delta = obj.get("delta")
        text = delta.__class__ is str and bool(delta)
        return ChunkInfo(True, text, False, text)
    if kind in _REASONING_DELTAS:
        delta = obj.get("delta")
        text = delta.__class__ is str and bool(delta)
        return ChunkInfo(True, False, text, text)
    if kind in _TOOL_DELTAS:
        delta = obj.get("delta")
        return ChunkInfo(True, True, False, bool(delta))
    if kind in TERMINAL_EVENTS:
        response = obj.get("response")
        if response.__class__ is not dict:
            raise ValueError(f"{kind} event without a response object")
        info = _ending(response, obj)
        info.done = info.error is None
        return info
    if kind == "response.failed":
        response = obj.get("response")
        why = response.get("error") if response.__class__ is dict else None
        return ChunkInfo(error=_failure(why, "response.failed"))
    if kind == "error" or (kind is None and obj.get("error")):
        return ChunkInfo(error=_error_event(obj))
    if kind is None and obj.get("object") == "response":
        return _whole(obj)  # a server that ignored stream: true
    return _NOTHING  # a lifecycle event


def _ending(response: dict[str, Any], event: dict[str, Any]) -> ChunkInfo:
    """The finish, usage and timings of a response object that ended (or an error)."""
    status = response.get("status")
    usage = _usage(response.get("usage"))
    timing = event.get("timings")  # llama.cpp puts them beside the response
    if timing.__class__ is not dict:
        timing = response.get("metrics")  # vLLM's per-request metrics
        if timing.__class__ is not dict:
            timing = response.get("timings")
            if timing.__class__ is not dict:
                timing = None
    if status == "failed":
        return ChunkInfo(error=_failure(response.get("error"), "response failed"))
    if status == "cancelled":
        return ChunkInfo(error="response ended with status 'cancelled'")
    finish = "stop"
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if details.__class__ is dict else None
        finish = reason if reason.__class__ is str and reason else "incomplete"
    return ChunkInfo(finish_reason=finish, usage=usage, timing=timing)


def _whole(response: dict[str, Any]) -> ChunkInfo:
    """A whole response object: what its output items carry, and how it ended."""
    info = _ending(response, response)
    if info.error is not None:
        return info
    answer = reasoning = output = False
    for item in _items(response):
        kind = item.get("type")
        if kind == "function_call":
            answer = True
            output = output or bool(item.get("arguments"))
        elif kind == "reasoning":
            texts = [*_texts(item.get("content")), *_texts(item.get("summary"))]
            reasoning = reasoning or any(texts)
            output = output or any(texts)
        elif kind == "message":
            text = any(_texts(item.get("content")))
            answer = answer or text
            output = output or text
    info.event, info.answer, info.reasoning, info.output = output, answer, reasoning, output
    return info


def _items(response: dict[str, Any]) -> list[dict[str, Any]]:
    items = response.get("output")
    if items.__class__ is not list:
        return []
    return [item for item in items if item.__class__ is dict]


def _texts(parts: Any) -> list[str]:
    if parts.__class__ is not list:
        return []
    return [p["text"] for p in parts if p.__class__ is dict and p.get("text").__class__ is str]


def _usage(usage: Any) -> dict[str, Any] | None:
    """The Responses usage in the chat API's names (what the record reads)."""
    if usage.__class__ is not dict:
        return None
    out: dict[str, Any] = {}
    if (prompt := usage.get("input_tokens")).__class__ is int:
        out["prompt_tokens"] = prompt
    if (completion := usage.get("output_tokens")).__class__ is int:
        out["completion_tokens"] = completion
    details = usage.get("input_tokens_details")
    if details.__class__ is dict and details.get("cached_tokens").__class__ is int:
        out["prompt_tokens_details"] = {"cached_tokens": details["cached_tokens"]}
    details = usage.get("output_tokens_details")
    if details.__class__ is dict and details.get("reasoning_tokens").__class__ is int:
        out["completion_tokens_details"] = {"reasoning_tokens": details["reasoning_tokens"]}
    return out or None


def _failure(error: Any, fallback: str) -> str:
    """A ``response.error`` object (``{"code", "message"}``) in words."""
    if error.__class__ is dict:
        message = error.get("message")
        code = error.get("code") or error.get("type")
        if message:
            return f"{message} ({code})"[:300] if code else str(message)[:300]
        if code:
            return f"{fallback} ({code})"
    return fallback


def _error_event(obj: dict[str, Any]) -> str:
    """An ``error`` event (``{"type": "error", "code", "message"}``) or an ``{"error": …}``
    frame, in the server's words."""
    if obj.get("error"):
        return error_message(obj)
    return _failure(obj, "error event without a message")


def answer_text(data: str) -> str:
    """The answer text of one event (an ``output_text`` delta), or of a whole response
    object (its messages' text); never reasoning text or tool-call arguments."""
    obj = load_event(data)
    kind = obj.get("type")
    if kind in _ANSWER_DELTAS:
        delta = obj.get("delta")
        return delta if delta.__class__ is str else ""
    if kind is None and obj.get("object") == "response":
        return "".join(
            "".join(_texts(item.get("content")))
            for item in _items(obj)
            if item.get("type") == "message"
        )
    return ""


# -- output (what a reply's answer and tool calls are, for validation) -----------------
#
# A call opens with ``response.output_item.added`` (``item.type`` ``function_call``, its
# ``name``), streams ``response.function_call_arguments.delta`` (``output_index``,
# ``item_id``, ``delta``) and closes with ``…arguments.done`` (``arguments``, whole: the
# server's last word wins); a whole response has its ``output`` items.


def read_output(out: OutputParts, obj: dict[str, Any]) -> str:
    """A Responses stream event, or a whole response object."""
    kind = obj.get("type")
    if kind == "response.output_text.delta":
        return out.text_piece(obj.get("delta"))
    if kind == "response.function_call_arguments.delta":
        delta = obj.get("delta")
        if delta.__class__ is not str:
            return ""
        if delta:
            out.target(_item_key(out, obj)).pieces.append(delta)
        return str(delta)
    if kind in _REASONING_DELTAS or kind == "response.custom_tool_call_input.delta":
        delta = obj.get("delta")
        return str(delta) if delta.__class__ is str else ""
    if kind == "response.output_item.added" or kind == "response.output_item.done":
        item = obj.get("item")
        if item.__class__ is dict and item.get("type") == "function_call":
            key = _item_key(out, obj, item.get("id"))
            call = out.target(key, opening=kind == "response.output_item.added")
            name_call(call, item.get("name"))
            arguments = item.get("arguments")
            if kind == "response.output_item.done" and arguments.__class__ is str:
                call.final = arguments
        return ""
    if kind == "response.function_call_arguments.done":
        arguments = obj.get("arguments")
        if arguments.__class__ is str:
            out.target(_item_key(out, obj)).final = arguments
        return ""
    if kind is None and obj.get("object") == "response":
        return _whole_response(out, obj)
    return ""


def _item_key(out: OutputParts, obj: dict[str, Any], item_id: Any = None) -> Any:
    """A Responses call's key: its ``output_index``, or what its item id was seen with."""
    ident = item_id if item_id.__class__ is str else obj.get("item_id")
    index = obj.get("output_index")
    if index.__class__ is int:
        if ident.__class__ is str:
            out.aliases[ident] = index
        return index
    if ident.__class__ is str:
        return out.aliases.get(ident, ident)
    return None


def _whole_response(out: OutputParts, response: dict[str, Any]) -> str:
    pieces: list[str] = []
    items = response.get("output")
    for position, item in enumerate(items if items.__class__ is list else ()):
        if item.__class__ is not dict:
            continue
        kind = item.get("type")
        if kind == "message":
            parts = item.get("content")
            for part in parts if parts.__class__ is list else ():
                if part.__class__ is dict:
                    pieces.append(out.text_piece(part.get("text")))
        elif kind == "function_call":
            call = out.call(position)
            name_call(call, item.get("name"))
            arguments = item.get("arguments")
            if arguments.__class__ is str:
                call.final = arguments
                pieces.append(arguments)
    return "".join(pieces)


RESPONSES = ApiFormat(
    name=Api.RESPONSES,
    path="/responses",
    build_body=build_payload,
    takes_images=True,
    field_rules=FieldRules(frozenset({"ignore_eos"}), "max_output_tokens"),
    event_reader=lambda: parse_event,  # no state per stream: one function for all
    stream_end=" or ".join(TERMINAL_EVENTS),
    answer_text=answer_text,
    read_output=read_output,
    contract_fields={
        "structured": ("text",),
        "tools": ("tools", "tool_choice"),
        "greedy": ("temperature", "top_p"),
    },
)


# -- the simulator's side (pytest_llmperf.sim serves this format with what follows) --
