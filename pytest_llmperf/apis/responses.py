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
from pytest_llmperf.apis.fields import DEFAULT_FIELDS, FieldRules, RequestFields, finish_body
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
    return finish_body(body, sample, fields, output_fields)


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
        return out.argument_piece(obj.get("delta"), lambda: _item_key(out, obj))
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
    title="OpenAI Responses",
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
# The Responses request as the simulator's request (vLLM's ``ResponsesRequest``:
# ``input`` a string or a list of items, ``instructions`` counted first,
# ``max_output_tokens``; images as ``input_image`` parts) and its answer as vLLM streams
# it (``responses/serving.py``, ``streaming_events.py``): ``response.created``,
# ``response.in_progress``; per output part ``response.output_item.added`` and
# ``response.content_part.added``, then one ``response.reasoning_text.delta`` /
# ``response.output_text.delta`` per token, then ``…text.done``,
# ``response.content_part.done``, ``response.output_item.done``; at the end
# ``response.completed`` with the whole response and its ``usage``. Every event has a
# ``sequence_number``. At the ``max_output_tokens`` cap vLLM still ends with
# ``response.completed`` (``status: "incomplete"``); OpenAI's own API sends
# ``response.incomplete`` instead (profile key ``responses_incomplete_event``).

import json  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Collection, Mapping  # noqa: E402

from pytest_llmperf.apis.output_asks import OutputFields, json_format, openai_tools  # noqa: E402
from pytest_llmperf.apis.prompt_images import (  # noqa: E402
    DEFAULT_IMAGE_TOKEN_PX,
    PromptTokens,
    decode_data_url,
)
from pytest_llmperf.apis.served import AnswerPlan, ServedTokens, serve  # noqa: E402
from pytest_llmperf.apis.served_events import (  # noqa: E402
    EventAnswer,
    EventArgs,
    TokenText,
    event_args,
    sse,
    unescape,
)
from pytest_llmperf.apis.server_wire import (  # noqa: E402
    ParsedRequest,
    Usage,
    WireError,
    charge_image,
    check_model,
    event_request,
    int_field,
    invalid_request_body,
)

__all__ += [
    "RESPONSES_FIELDS",
    "SERVED_RESPONSES",
    "ResponsesAnswer",
    "ResponsesEvents",
    "ServedResponses",
    "parse_responses",
    "responses_usage",
]


_RESPONSES_TEXT_PARTS = ("input_text", "output_text", "text", "refusal", "summary_text")


def _responses_content(prompt: PromptTokens, content: Any) -> None:
    if content is None:
        return
    if isinstance(content, str):
        prompt.add_text(content)
        return
    if not isinstance(content, list):
        raise WireError(400, "message content must be a string or a list of parts", "input")
    for part in content:
        if not isinstance(part, dict):
            raise WireError(400, "each content part must be an object", "input")
        kind = part.get("type")
        if kind in _RESPONSES_TEXT_PARTS:
            prompt.add_text(str(part.get("text", "")))
        elif kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str):
                raise WireError(
                    400,
                    "an input_image part needs image_url (a data: URL); "
                    "file_id is not served by the simulator",
                    "input",
                )
            charge_image(prompt, "input", decode_data_url, url)
        else:
            raise WireError(400, f"unsupported content part type {kind!r} in input", "input")


def _responses_item(prompt: PromptTokens, item: Any) -> None:
    if not isinstance(item, dict):
        raise WireError(400, "each input item must be an object", "input")
    kind = item.get("type", "message")
    if kind == "message" or (kind is None and "role" in item):
        if item.get("role") not in ("user", "assistant", "system", "developer"):
            raise WireError(400, f"unsupported input message role {item.get('role')!r}", "input")
        _responses_content(prompt, item.get("content"))
    elif kind == "function_call":
        prompt.add_text(str(item.get("name", "")) + " " + str(item.get("arguments", "")))
    elif kind == "function_call_output":
        output = item.get("output", "")
        prompt.add_text(output if isinstance(output, str) else json.dumps(output))
    elif kind == "reasoning":
        for part in item.get("content") or item.get("summary") or []:
            if isinstance(part, dict):
                prompt.add_text(str(part.get("text", "")))
    else:
        raise WireError(400, f"unsupported input item type {kind!r}", "input")


def parse_responses(
    body: Any,
    served_model: str,
    image_px: int = DEFAULT_IMAGE_TOKEN_PX,
    adapters: Collection[str] = (),
) -> ParsedRequest:
    """A ``POST /v1/responses`` body: ``input`` (a string, or a list of messages whose
    content is a string or ``input_text`` / ``input_image`` parts, and earlier items),
    ``instructions`` (counted first), ``max_output_tokens``, ``stream``,
    ``ignore_eos`` (vLLM's extension)."""
    if not isinstance(body, dict):
        raise WireError(400, "request body must be a JSON object")
    model = check_model(body, served_model, adapters)
    prompt = PromptTokens(image_px)
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise WireError(400, "instructions must be a string", "instructions")
        prompt.add_text(instructions)
    given = body.get("input")
    if isinstance(given, str):
        prompt.add_text(given)
    elif isinstance(given, list) and given:
        for item in given:
            _responses_item(prompt, item)
    else:
        raise WireError(400, "input must be a string or a non-empty list of items", "input")
    max_tokens = int_field(body, "max_output_tokens", 1)
    return event_request(Api.RESPONSES, model, prompt, body, max_tokens)


def responses_usage(
    prompt_tokens: int, output_tokens: int, cached_tokens: int, reasoning_tokens: int | None
) -> dict[str, Any]:
    """The Responses API's ``usage`` (vLLM's ``ResponseUsage``)."""
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens or 0},
        "total_tokens": prompt_tokens + output_tokens,
    }


class ResponsesEvents(TokenText):
    """The SSE events (and the non-streamed body) of one Responses API answer."""

    def __init__(
        self, args: EventArgs, *, max_output_tokens: int | None, incomplete_event: bool = False
    ) -> None:
        super().__init__(args)
        self.max_output_tokens = max_output_tokens
        self.incomplete_event = incomplete_event
        self.id = "resp_" + uuid.uuid4().hex
        self.created = int(time.time())
        self.seq = 0
        self.output_index = 0
        self.items: list[dict[str, Any]] = []  # finished output items, in order
        self.kind: str | None = None  # the open part: "reasoning" | "text" | "function_call"
        self.item_id = ""
        self.acc = b""  # JSON-escaped text of the open part
        self.head = b""  # the open part's delta event up to its text
        self.mid = b""  # … from after its text up to the sequence number

    def _event(self, payload: dict[str, Any]) -> bytes:
        payload["sequence_number"] = self.seq
        self.seq += 1
        return sse(str(payload["type"]), payload)

    def _response(
        self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "incomplete_details": (
                {"reason": "max_output_tokens"} if status == "incomplete" else None
            ),
            "error": None,
            "instructions": None,
            "max_output_tokens": self.max_output_tokens,
            "parallel_tool_calls": True,
            "temperature": None,
            "tool_choice": "auto",
            "tools": [],
            "top_p": None,
            "usage": usage,
        }

    def opening(self) -> bytes:
        """``response.created`` and ``response.in_progress``, written at once."""
        initial = self._response("in_progress", [], None)
        return self._event({"type": "response.created", "response": initial}) + self._event(
            {"type": "response.in_progress", "response": initial}
        )

    def _open_call(self) -> bytes:
        """A function call's ``response.output_item.added`` (arguments "")."""
        tool = self.tool
        assert tool is not None
        self.kind = "function_call"
        self.acc = b""
        self.item_id = "fc_" + uuid.uuid4().hex
        where = {"item_id": self.item_id, "output_index": self.output_index}
        delta_type = "response.function_call_arguments.delta"
        head = json.dumps({"type": delta_type, **where})[:-1] + ', "delta": "'
        self.head = b"event: " + delta_type.encode() + b"\ndata: " + head.encode()
        self.mid = b'", "sequence_number": '
        item = self._call_item("", "in_progress")
        return self._event(
            {"type": "response.output_item.added", "output_index": self.output_index, "item": item}
        )

    def _call_item(self, arguments: str, status: str) -> dict[str, Any]:
        tool = self.tool
        assert tool is not None
        return {
            "id": self.item_id,
            "type": "function_call",
            "call_id": "call_" + tool.call_id,
            "name": tool.name,
            "arguments": arguments,
            "status": status,
        }

    def _close_call(self) -> bytes:
        """``response.function_call_arguments.done`` and ``response.output_item.done``."""
        assert self.tool is not None
        args = unescape(self.acc)
        item = self._call_item(args, "completed")
        out = self._event(
            {
                "type": "response.function_call_arguments.done",
                "item_id": self.item_id,
                "output_index": self.output_index,
                "name": self.tool.name,
                "arguments": args,
            }
        ) + self._event(
            {"type": "response.output_item.done", "output_index": self.output_index, "item": item}
        )
        self.items.append(item)
        self.output_index += 1
        self.kind = None
        return out

    def _open(self, kind: str) -> bytes:
        if kind == "function_call":
            return self._open_call()
        self.kind = kind
        self.acc = b""
        prefix, item_type = ("rs_", "reasoning") if kind == "reasoning" else ("msg_", "message")
        self.item_id = prefix + uuid.uuid4().hex
        item: dict[str, Any]
        if kind == "reasoning":
            item = {"id": self.item_id, "type": "reasoning", "summary": [], "status": "in_progress"}
            part: dict[str, Any] = {"type": "reasoning_text", "text": ""}
            delta_type = "response.reasoning_text.delta"
            logprobs = ""
        else:
            item = {
                "id": self.item_id,
                "type": item_type,
                "role": "assistant",
                "content": [],
                "status": "in_progress",
            }
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            delta_type = "response.output_text.delta"
            logprobs = ', "logprobs": []'
        where = {"item_id": self.item_id, "output_index": self.output_index, "content_index": 0}
        head = json.dumps({"type": delta_type, **where})[:-1] + ', "delta": "'
        self.head = b"event: " + delta_type.encode() + b"\ndata: " + head.encode()
        self.mid = ('"' + logprobs + ', "sequence_number": ').encode()
        return self._event(
            {"type": "response.output_item.added", "output_index": self.output_index, "item": item}
        ) + self._event({"type": "response.content_part.added", **where, "part": part})

    def _close(self) -> bytes:
        if self.kind is None:
            return b""
        if self.kind == "function_call":
            return self._close_call()
        text = unescape(self.acc)
        where = {"item_id": self.item_id, "output_index": self.output_index, "content_index": 0}
        if self.kind == "reasoning":
            part: dict[str, Any] = {"type": "reasoning_text", "text": text}
            done = {"type": "response.reasoning_text.done", **where, "text": text}
            item: dict[str, Any] = {
                "id": self.item_id,
                "type": "reasoning",
                "summary": [],
                "content": [part],
                "status": "completed",
            }
        else:
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": None}
            done = {"type": "response.output_text.done", **where, "text": text, "logprobs": []}
            item = {
                "id": self.item_id,
                "type": "message",
                "role": "assistant",
                "content": [part],
                "status": "completed",
            }
        out = (
            self._event(done)
            + self._event({"type": "response.content_part.done", **where, "part": part})
            + self._event(
                {
                    "type": "response.output_item.done",
                    "output_index": self.output_index,
                    "item": item,
                }
            )
        )
        self.items.append(item)
        self.output_index += 1
        self.kind = None
        return out

    def chunk(self, i: int, size: int = 1) -> bytes:
        """The events for tokens ``i … i+size-1``: the delta, after the events that open
        its part (and close the previous one); ``b""`` for an empty delta. A tool
        call's header token opens its ``function_call`` item (no delta)."""
        if i == self.tool_at:
            return self._close() + self._open("function_call")
        text = self._text(i, size)
        if not text:
            return b""
        if i < self.n_reasoning:
            kind = "reasoning"
        else:
            kind = "text" if self.tool is None else "function_call"
        out = b""
        if kind != self.kind:
            out = self._close() + self._open(kind)
        self.acc += text
        seq = self.seq
        self.seq = seq + 1
        return out + self.head + text + self.mid + b"%d}\n\n" % seq

    def closing(
        self,
        prompt_tokens: int,
        cached_tokens: int,
        reasoning_tokens: int | None,
        metrics: dict[str, float] | None,
    ) -> bytes:
        """The events that close the open part, then ``response.completed`` (or
        ``response.incomplete``) with the whole response and its usage."""
        out = self._close()
        body = self._final(self.items, prompt_tokens, cached_tokens, reasoning_tokens, metrics)
        event = "response.completed"
        if body["status"] == "incomplete" and self.incomplete_event:
            event = "response.incomplete"
        return out + self._event({"type": event, "response": body})

    def failed(self, message: str) -> bytes:
        """``response.failed``: the response with ``status: "failed"`` and its error."""
        body = self._response("failed", self.items, None)
        body["error"] = {"code": "server_error", "message": message}
        return self._close() + self._event({"type": "response.failed", "response": body})

    def _final(
        self,
        output: list[dict[str, Any]],
        prompt_tokens: int,
        cached_tokens: int,
        reasoning_tokens: int | None,
        metrics: dict[str, float] | None,
    ) -> dict[str, Any]:
        status = "incomplete" if self.finish == "length" else "completed"
        usage = responses_usage(prompt_tokens, self.n, cached_tokens, reasoning_tokens)
        body = self._response(status, output, usage)
        if metrics is not None:
            body["metrics"] = metrics
        return body

    def full_body(
        self,
        reasoning: str | None,
        text: str,
        prompt_tokens: int,
        cached_tokens: int,
        reasoning_tokens: int | None,
        metrics: dict[str, float] | None,
    ) -> dict[str, Any]:
        """The non-streamed answer (``stream`` false): the response object (a tool call's
        ``function_call`` item, arguments ``text``, in place of the message)."""
        output: list[dict[str, Any]] = []
        if reasoning:
            output.append(
                {
                    "id": "rs_" + uuid.uuid4().hex,
                    "type": "reasoning",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": reasoning}],
                    "status": "completed",
                }
            )
        if self.tool is not None:
            self.item_id = "fc_" + uuid.uuid4().hex
            output.append(self._call_item(text, "completed"))
        elif text:
            output.append(
                {
                    "id": "msg_" + uuid.uuid4().hex,
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": text, "annotations": [], "logprobs": None}
                    ],
                    "status": "completed",
                }
            )
        return self._final(output, prompt_tokens, cached_tokens, reasoning_tokens, metrics)


class ResponsesAnswer(EventAnswer):
    """One Responses API answer: its typed events."""

    events: ResponsesEvents

    def opening(self) -> bytes:
        return self.events.opening()

    def closing(self, usage: Usage, include_usage: bool) -> tuple[bytes, ...]:
        u = usage
        return (
            self.events.closing(u.prompt_tokens, u.cached_tokens, u.reasoning_tokens, u.metrics),
        )

    def full_body(self, reasoning: str | None, text: str, usage: Usage) -> dict[str, Any]:
        u = usage
        return self.events.full_body(
            reasoning, text, u.prompt_tokens, u.cached_tokens, u.reasoning_tokens, u.metrics
        )


# OpenAI's Responses API reference (what a strict profile accepts)
RESPONSES_FIELDS = frozenset(
    {
        "model",
        "input",
        "background",
        "conversation",
        "include",
        "instructions",
        "max_output_tokens",
        "max_tool_calls",
        "metadata",
        "parallel_tool_calls",
        "previous_response_id",
        "prompt",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning",
        "safety_identifier",
        "service_tier",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "text",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "truncation",
        "user",
    }
)


def _responses_tool(tool: dict[str, Any], where: str) -> tuple[Any, Any]:
    if tool.get("type") != "function":
        raise WireError(400, f"{where}: only function tools are served", "tools")
    return tool.get("name"), tool.get("parameters", {})


def _responses_schema(body: Mapping[str, Any]) -> Any:
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise WireError(400, "text.format must be an object", "text")
    return json_format(fmt, fmt.get("schema"), "text.format")


class ServedResponses(ServedTokens):
    """``POST /v1/responses`` as vLLM serves it."""

    prompt_param = "input"
    max_param = "max_output_tokens"
    schema_param = "text.format"
    event_stream = True
    known_fields = RESPONSES_FIELDS

    def output_fields(self, body: Mapping[str, Any]) -> OutputFields:
        """``text.format``, flat function ``tools``, ``tool_choice``."""
        schema = _responses_schema(body)
        return (schema, *openai_tools(body, _responses_tool))

    def unknown_fields_body(self, unknown: list[str]) -> dict[str, Any]:
        """OpenAI's Responses API: "Unknown parameter: 'F'." (``unknown_parameter``)."""
        message = f"Unknown parameter: '{unknown[0]}'."
        return invalid_request_body(message, unknown[0], "unknown_parameter")

    def parse(
        self, body: Any, served_model: str, image_px: int, adapters: Collection[str] = ()
    ) -> ParsedRequest:
        return parse_responses(body, served_model, image_px, adapters)

    def answer(self, plan: AnswerPlan) -> ResponsesAnswer:
        events = ResponsesEvents(
            event_args(plan),
            max_output_tokens=plan.parsed.max_tokens,
            incomplete_event=plan.settings.incomplete_event,
        )
        return ResponsesAnswer(events)

    def stream_failure(self, parsed: ParsedRequest, model: str, status: int, message: str) -> bytes:
        """``response.created``, ``response.in_progress``, ``response.failed``."""
        ev = ResponsesEvents(EventArgs(model, None, 0, 0, "stop"), max_output_tokens=None)
        return ev.opening() + ev.failed(message)


SERVED_RESPONSES = serve(Api.RESPONSES, ServedResponses())
