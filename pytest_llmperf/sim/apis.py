"""Request parsing for OpenAI's Responses API and Anthropic's Messages API.

Both are served by the same engine as chat: a request is parsed here into the
:class:`~pytest_llmperf.sim.wire.ParsedRequest` the chat path uses (prompt tokens,
images included; the output cap; ``ignore_eos``; ``stream``), so admission,
faults, the back end and the token timing are shared, and only the bytes on the
wire differ (events.py). Field names and checks follow the servers the client is
tested against: vLLM's ``ResponsesRequest`` (``input`` a string or a list of
items, ``instructions``, ``max_output_tokens``) and vLLM's / Anthropic's
``AnthropicMessagesRequest`` (``max_tokens`` required, ``system`` at the top
level, content blocks ``text`` / ``image`` / ``thinking`` / ``tool_use`` /
``tool_result``). Errors are :class:`WireError`; the server renders them in the
API's own shape (:func:`api_error_body`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

from .images import (
    DEFAULT_IMAGE_TOKEN_PX,
    ImageError,
    ImageInfo,
    PromptTokens,
    decode_base64_image,
    decode_data_url,
)
from .wire import ParsedRequest, WireError, check_model, error_body, int_field

__all__ = [
    "ANTHROPIC_ERROR_TYPES",
    "anthropic_error_body",
    "api_error_body",
    "parse_messages",
    "parse_responses",
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


def api_error_body(api: str, status: int, message: str, param: str | None) -> dict[str, Any]:
    """The error body of ``api``: Anthropic's for ``messages``, OpenAI's otherwise."""
    if api == "messages":
        return anthropic_error_body(status, message)
    return error_body(status, message, param)


def _stream_flag(body: dict[str, Any]) -> bool:
    value = body.get("stream", False)
    if value is not None and not isinstance(value, bool):
        raise WireError(400, f"stream must be a boolean, got {value!r}", "stream")
    return bool(value)


def _image(prompt: PromptTokens, where: str, decode: Callable[..., ImageInfo], *args: str) -> None:
    try:
        prompt.add_image(decode(*args))
    except ImageError as exc:
        raise WireError(400, f"bad image in {where}: {exc}", where.split(".")[0]) from None


# -- Responses API -------------------------------------------------------------
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
            _image(prompt, "input", decode_data_url, url)
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
    return ParsedRequest(
        api="responses",
        model=model,
        prompt_tokens=prompt.tokens,
        max_tokens=int_field(body, "max_output_tokens", 1),
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=_stream_flag(body),
        include_usage=True,
        priority=_priority(body),
        images=prompt.images,
        image_tokens=prompt.image_tokens,
    )


def _priority(body: dict[str, Any]) -> int:
    priority = body.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise WireError(400, f"priority must be an integer, got {priority!r}", "priority")
    return priority


# -- Messages API --------------------------------------------------------------
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
            _image(prompt, where, decode_base64_image, data, media_type)
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
    return ParsedRequest(
        api="messages",
        model=model,
        prompt_tokens=prompt.tokens,
        max_tokens=max_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=_stream_flag(body),
        include_usage=True,
        priority=_priority(body),
        images=prompt.images,
        image_tokens=prompt.image_tokens,
    )
