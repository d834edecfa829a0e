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
from pytest_llmperf.apis.fields import DEFAULT_FIELDS, FieldRules, RequestFields, finish_body
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
    return finish_body(body, sample, fields, output_fields)


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
            return out.argument_piece(delta.get("partial_json"), lambda: _block_key(obj))
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
    title="Anthropic Messages",
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
# The Messages request as the simulator's request (vLLM's / Anthropic's
# ``AnthropicMessagesRequest``: ``max_tokens`` required, ``system`` at the top level,
# content blocks ``text`` / ``image`` / ``thinking`` / ``tool_use`` / ``tool_result``),
# its errors in Anthropic's shape, and its answer as vLLM streams it
# (``anthropic/serving.py``): ``message_start`` (usage ``input_tokens``), per block
# ``content_block_start``, one ``content_block_delta`` per token (``thinking_delta``
# for reasoning, closed by a ``signature_delta``, then ``text_delta``),
# ``content_block_stop``; then ``message_delta`` with ``stop_reason`` (``max_tokens``
# at the cap, ``end_turn`` otherwise) and the usage, and ``message_stop``.

import uuid  # noqa: E402
from collections.abc import Collection, Mapping  # noqa: E402

from pytest_llmperf.apis.output_asks import OutputFields, read_tool_choice, read_tools  # noqa: E402
from pytest_llmperf.apis.prompt_images import (  # noqa: E402
    DEFAULT_IMAGE_TOKEN_PX,
    PromptTokens,
    decode_base64_image,
)
from pytest_llmperf.apis.served import AnswerPlan, ServedTokens, serve  # noqa: E402
from pytest_llmperf.apis.served_events import (  # noqa: E402
    EventAnswer,
    EventArgs,
    TokenText,
    event_args,
    sse,
)
from pytest_llmperf.apis.server_wire import (  # noqa: E402
    ParsedRequest,
    Usage,
    WireError,
    charge_image,
    check_model,
    event_request,
    int_field,
)

__all__ += [
    "ANTHROPIC_ERROR_TYPES",
    "MESSAGES_FIELDS",
    "SERVED_MESSAGES",
    "MessagesAnswer",
    "MessagesEvents",
    "ServedMessages",
    "anthropic_error_body",
    "anthropic_usage",
    "parse_messages",
]


ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def anthropic_error_body(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error JSON: ``{"type": "error", "error": {"type", "message"}}``."""
    return {
        "type": "error",
        "error": {"type": ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message},
    }


def _messages_blocks(prompt: PromptTokens, content: Any, where: str) -> None:
    if isinstance(content, str):
        prompt.add_text(content)
        return
    if not isinstance(content, list):
        raise WireError(400, f"{where}: content must be a string or a list of blocks", where)
    for block in content:
        if not isinstance(block, dict):
            raise WireError(400, f"{where}: each content block must be an object", where)
        kind = block.get("type")
        if kind == "text":
            prompt.add_text(str(block.get("text", "")))
        elif kind == "thinking":
            prompt.add_text(str(block.get("thinking", "")))
        elif kind == "redacted_thinking":
            continue
        elif kind == "tool_use":
            prompt.add_text(str(block.get("name", "")) + " " + json.dumps(block.get("input", {})))
        elif kind == "tool_result":
            inner = block.get("content")
            if inner is not None:
                _messages_blocks(prompt, inner, where)
        elif kind == "image":
            source = block.get("source")
            if not isinstance(source, dict) or source.get("type") != "base64":
                raise WireError(
                    400,
                    f"{where}: an image block needs source.type 'base64' "
                    "(the simulator fetches no image URLs)",
                    where,
                )
            data = source.get("data")
            media_type = source.get("media_type")
            if not isinstance(data, str) or not isinstance(media_type, str):
                raise WireError(
                    400, f"{where}: an image source needs media_type and data strings", where
                )
            charge_image(prompt, where, decode_base64_image, data, media_type)
        else:
            raise WireError(400, f"{where}: unsupported content block type {kind!r}", where)


def parse_messages(
    body: Any,
    served_model: str,
    image_px: int = DEFAULT_IMAGE_TOKEN_PX,
    adapters: Collection[str] = (),
) -> ParsedRequest:
    """A ``POST /v1/messages`` body: ``model``, ``messages`` (role user / assistant —
    and system, which vLLM also takes — with string or block content), ``system``
    (a string or text blocks, counted first), ``max_tokens`` (required, as on
    Anthropic's API and vLLM's), ``stream``, ``ignore_eos``."""
    if not isinstance(body, dict):
        raise WireError(400, "request body must be a JSON object")
    model = check_model(body, served_model, adapters)
    if body.get("max_tokens") is None:
        raise WireError(400, "max_tokens: Field required", "max_tokens")
    max_tokens = int_field(body, "max_tokens", 1)
    prompt = PromptTokens(image_px)
    system = body.get("system")
    if system is not None:
        _messages_blocks(prompt, system, "system")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WireError(400, "messages: must be a non-empty list", "messages")
    for k, msg in enumerate(messages):
        where = f"messages.{k}"
        if not isinstance(msg, dict):
            raise WireError(400, f"{where}: each message must be an object", "messages")
        if msg.get("role") not in ("user", "assistant", "system"):
            raise WireError(400, f"{where}.role: unexpected role {msg.get('role')!r}", "messages")
        _messages_blocks(prompt, msg.get("content"), where)
    return event_request(Api.MESSAGES, model, prompt, body, max_tokens)


def anthropic_usage(prompt_tokens: int, output_tokens: int, cached_tokens: int) -> dict[str, Any]:
    """Anthropic's ``usage``: ``input_tokens`` leaves out the cache hits, which are
    ``cache_read_input_tokens`` (vLLM's ``_build_anthropic_usage``)."""
    return {
        "input_tokens": max(0, prompt_tokens - cached_tokens),
        "output_tokens": output_tokens,
        "cache_read_input_tokens": cached_tokens,
    }


class MessagesEvents(TokenText):
    """The SSE events (and the non-streamed body) of one Messages API answer."""

    def __init__(self, args: EventArgs) -> None:
        super().__init__(args)
        self.id = "msg_" + uuid.uuid4().hex
        self.index = -1  # the open block's index
        self.kind: str | None = None  # the open block: "thinking" | "text" | "tool_use"
        self.head = b""

    def opening(self, prompt_tokens: int) -> bytes:
        """``message_start``: the message with no content and ``usage.input_tokens``
        (the prompt; cache hits are known once it is scheduled, and reported in
        ``message_delta``)."""
        return sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": self.id,
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": self.model,
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": prompt_tokens, "output_tokens": 0},
                },
            },
        )

    def _stop(self) -> bytes:
        if self.kind is None:
            return b""
        out = b""
        if self.kind == "thinking":  # vLLM closes a thinking block with its signature
            out = sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": self.index,
                    "delta": {"type": "signature_delta", "signature": uuid.uuid4().hex},
                },
            )
        self.kind = None
        return out + sse("content_block_stop", {"type": "content_block_stop", "index": self.index})

    @property
    def stop_reason(self) -> str:
        """``max_tokens`` at the cap, ``tool_use`` for a whole tool call, else ``end_turn``."""
        if self.finish == "length":
            return "max_tokens"
        return "tool_use" if self.tool is not None else "end_turn"

    def _start_tool(self) -> bytes:
        """A ``tool_use`` block's ``content_block_start`` (input ``{}``)."""
        tool = self.tool
        assert tool is not None
        self.kind = "tool_use"
        self.index += 1
        self.head = (
            b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": %d, '
            b'"delta": {"type": "input_json_delta", "partial_json": "' % self.index
        )
        block = {"type": "tool_use", "id": "toolu_" + tool.call_id, "name": tool.name, "input": {}}
        return sse(
            "content_block_start",
            {"type": "content_block_start", "index": self.index, "content_block": block},
        )

    def _start(self, kind: str) -> bytes:
        if kind == "tool_use":
            return self._start_tool()
        self.kind = kind
        self.index += 1
        field = "thinking" if kind == "thinking" else "text"
        delta_type = "thinking_delta" if kind == "thinking" else "text_delta"
        self.head = (
            b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": %d, '
            b'"delta": {"type": "%b", "%b": "' % (self.index, delta_type.encode(), field.encode())
        )
        return sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": self.index,
                "content_block": {"type": kind, field: ""},
            },
        )

    def chunk(self, i: int, size: int = 1) -> bytes:
        """The events for tokens ``i … i+size-1``: one ``content_block_delta``, after
        the events that start its block (and stop the previous one); ``b""`` for an
        empty delta. A tool call's header token starts its ``tool_use`` block (no delta)."""
        if i == self.tool_at:
            return self._stop() + self._start("tool_use")
        text = self._text(i, size)
        if not text:
            return b""
        kind = "thinking" if i < self.n_reasoning else "text" if self.tool is None else "tool_use"
        out = b""
        if kind != self.kind:
            out = self._stop() + self._start(kind)
        return out + self.head + text + b'"}}\n\n'

    def closing(self, prompt_tokens: int, cached_tokens: int) -> bytes:
        """``content_block_stop`` of the open block, ``message_delta`` (stop reason and
        the usage, cumulative as Anthropic's), ``message_stop``."""
        return (
            self._stop()
            + sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
                    "usage": anthropic_usage(prompt_tokens, self.n, cached_tokens),
                },
            )
            + sse("message_stop", {"type": "message_stop"})
        )

    @staticmethod
    def error(status: int, message: str) -> bytes:
        """An ``error`` event (``{"type": "error", "error": {"type", "message"}}``)."""
        return sse("error", anthropic_error_body(status, message))

    def full_body(
        self, reasoning: str | None, text: str, prompt_tokens: int, cached_tokens: int
    ) -> dict[str, Any]:
        """The non-streamed answer (``stream`` false): the message."""
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append(
                {"type": "thinking", "thinking": reasoning, "signature": uuid.uuid4().hex}
            )
        if self.tool is not None:
            try:
                given = json.loads(text)
            except ValueError:  # cut at the cap: what was generated is not whole JSON
                given = {}
            content.append(
                {
                    "type": "tool_use",
                    "id": "toolu_" + self.tool.call_id,
                    "name": self.tool.name,
                    "input": given if isinstance(given, dict) else {},
                }
            )
        elif text or not content:  # an empty answer is one empty text block (vLLM)
            content.append({"type": "text", "text": text})
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": anthropic_usage(prompt_tokens, self.n, cached_tokens),
        }


class MessagesAnswer(EventAnswer):
    """One Messages API answer: its typed events (``message_start`` counts the prompt)."""

    events: MessagesEvents

    def __init__(self, events: MessagesEvents, prompt_tokens: int) -> None:
        super().__init__(events)
        self.prompt_tokens = prompt_tokens

    def opening(self) -> bytes:
        return self.events.opening(self.prompt_tokens)

    def closing(self, usage: Usage, include_usage: bool) -> tuple[bytes, ...]:
        return (self.events.closing(usage.prompt_tokens, usage.cached_tokens),)

    def full_body(self, reasoning: str | None, text: str, usage: Usage) -> dict[str, Any]:
        return self.events.full_body(reasoning, text, usage.prompt_tokens, usage.cached_tokens)


# Anthropic's Messages API reference (what a strict profile accepts)
MESSAGES_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "container",
        "context_management",
        "mcp_servers",
        "metadata",
        "output_config",
        "service_tier",
        "stop_sequences",
        "stream",
        "system",
        "temperature",
        "thinking",
        "tool_choice",
        "tools",
        "top_k",
        "top_p",
    }
)

_CHOICES = {"auto": "auto", "any": "required", "none": "none", "tool": "named"}


def _messages_tool(tool: dict[str, Any], where: str) -> tuple[Any, Any]:
    return tool.get("name"), tool.get("input_schema", {})


def _messages_tool_choice(raw: Any) -> tuple[str, Any]:
    """Anthropic's ``tool_choice``: ``{"type": "auto" | "any" | "none" | "tool"}``."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind not in _CHOICES:
        raise WireError(400, f"tool_choice: unsupported {raw!r}", "tool_choice")
    choice = _CHOICES[kind]
    return choice, raw.get("name") if choice == "named" else None


class ServedMessages(ServedTokens):
    """``POST /v1/messages`` as vLLM serves it."""

    prompt_param = "messages"
    event_stream = True
    known_fields = MESSAGES_FIELDS

    def output_fields(self, body: Mapping[str, Any]) -> OutputFields:
        """``tools`` (``{name, input_schema}``), ``tool_choice`` (``auto``/``any``/
        ``tool``/``none``); no JSON schema."""
        tools = read_tools(body.get("tools"), _messages_tool)
        choice, named = read_tool_choice(body.get("tool_choice"), tools, _messages_tool_choice)
        return None, tools, choice, named

    def unknown_fields_body(self, unknown: list[str]) -> dict[str, Any]:
        """Anthropic's: "F: Extra inputs are not permitted", in its error shape."""
        message = "; ".join(f"{name}: Extra inputs are not permitted" for name in unknown)
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}

    def parse(
        self, body: Any, served_model: str, image_px: int, adapters: Collection[str] = ()
    ) -> ParsedRequest:
        return parse_messages(body, served_model, image_px, adapters)

    def error_body(self, status: int, message: str, param: str | None) -> dict[str, Any]:
        return anthropic_error_body(status, message)

    def answer(self, plan: AnswerPlan) -> MessagesAnswer:
        return MessagesAnswer(MessagesEvents(event_args(plan)), plan.parsed.num_prompt_tokens)

    def stream_failure(self, parsed: ParsedRequest, model: str, status: int, message: str) -> bytes:
        """``message_start``, then an ``error`` event."""
        ev = MessagesEvents(EventArgs(model, None, 0, 0, "stop"))
        return ev.opening(parsed.num_prompt_tokens) + MessagesEvents.error(status, message)


SERVED_MESSAGES = serve(Api.MESSAGES, ServedMessages())
