"""OpenAI wire format, shaped the way vLLM sends it.

The plugin's client must cope with what real servers send, so the simulator
reproduces vLLM's shapes exactly: a role-only first chat chunk, one chunk per
token, ``finish_reason`` on the last token's chunk, a usage chunk with
``"choices": []`` when ``stream_options.include_usage`` is set, and errors as
``{"error": {message, type, param, code}}``. With ``--enable-per-request-metrics``
vLLM adds the request's own timings (:func:`per_request_metrics`) as ``metrics``
to the usage chunk and to a non-streamed body; so does the simulator (profile key
``per_request_metrics``, on by default). Parsing a request into a
``ParsedRequest`` here keeps the HTTP handlers free of JSON details.

Streaming chunks are built from pre-rendered prefix/suffix strings around the
JSON-encoded token, because the server writes one per token and ``json.dumps``
of a whole dict per token would dominate its CPU time. Other servers' shapes
(reasoning deltas, a separate finish chunk: deltas.py) use the same templates.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..tokens import split_tokens
from .images import DEFAULT_IMAGE_TOKEN_PX, ImageError, PromptTokens, decode_data_url
from .streams import ServedTimes

__all__ = [
    "DONE",
    "ChunkWriter",
    "ParsedRequest",
    "WireError",
    "chat_prompt",
    "chat_prompt_texts",
    "chat_prompt_tokens",
    "check_model",
    "error_body",
    "int_field",
    "models_body",
    "parse_request",
    "per_request_metrics",
    "usage_body",
]

DONE = b"data: [DONE]\n\n"

_ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


class WireError(Exception):
    """A request the server answers with an OpenAI error body."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """The OpenAI error JSON for ``status``."""
    return {
        "error": {
            "message": message,
            "type": _ERROR_TYPES.get(status, "APIError"),
            "param": param,
            "code": status,
        }
    }


def models_body(model: str, max_model_len: int, adapters: Sequence[str] = ()) -> dict[str, Any]:
    """Body of ``GET /v1/models`` for a server that serves ``model``, and its LoRA
    ``adapters`` after it as vLLM lists them (``parent`` the base model)."""
    created = int(time.time())
    data: list[dict[str, Any]] = [
        {
            "id": name,
            "object": "model",
            "created": created,
            "owned_by": "pytest-llmperf-sim",
            "root": name,
            "parent": None if name == model else model,
            "max_model_len": max_model_len,
            "permission": [],
        }
        for name in (model, *adapters)
    ]
    return {"object": "list", "data": data}


@dataclass
class ParsedRequest:
    """What the simulator needs from a request body (chat, completions, and the
    Responses and Messages APIs, parsed in apis.py)."""

    api: str  # "chat" | "completions" | "responses" | "messages"
    model: str
    prompt_tokens: list[str]
    max_tokens: int | None
    ignore_eos: bool
    stream: bool
    include_usage: bool
    priority: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    images: int = 0  # images in the prompt
    image_tokens: int = 0  # the prompt tokens they are charged (images.py), in prompt_tokens

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_tokens)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
        return "\n".join(parts)
    raise WireError(400, "message content must be a string or a list of content parts", "messages")


def chat_prompt_texts(messages: list[Any]) -> list[str]:
    """The text of every message of a chat prompt, in order (WireError if malformed).

    Shared by the chat endpoint and ``/tokenize``, so that a client counting a
    prompt with the server's tokenizer gets exactly ``usage.prompt_tokens``.
    """
    texts: list[str] = []
    for msg in messages:
        if not isinstance(msg, dict):
            raise WireError(400, "each message must be an object", "messages")
        texts.append(_content_text(msg.get("content")))
    return texts


def chat_prompt_tokens(messages: list[Any]) -> list[str]:
    """The approximate tokens of a chat prompt: every message content's, in order."""
    return [tok for text in chat_prompt_texts(messages) for tok in split_tokens(text)]


def chat_prompt(messages: list[Any], image_px: int = DEFAULT_IMAGE_TOKEN_PX) -> PromptTokens:
    """A chat prompt's tokens with its images: each message content's text tokens and,
    for an ``image_url`` part (``{"url": "data:..."}``), the image's tokens where it
    stands (images.py). Text-only prompts count exactly as :func:`chat_prompt_tokens`."""
    prompt = PromptTokens(image_px)
    for msg in messages:
        if not isinstance(msg, dict):
            raise WireError(400, "each message must be an object", "messages")
        content = msg.get("content")
        if content is None:
            continue
        if isinstance(content, str):
            prompt.add_text(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                kind = part.get("type")
                if kind == "text":
                    prompt.add_text(str(part.get("text", "")))
                elif kind == "image_url":
                    ref = part.get("image_url")
                    url = ref.get("url") if isinstance(ref, dict) else ref
                    if not isinstance(url, str):
                        raise WireError(
                            400, "an image_url part needs image_url.url (a data: URL)", "messages"
                        )
                    try:
                        prompt.add_image(decode_data_url(url))
                    except ImageError as exc:
                        raise WireError(400, f"bad image in messages: {exc}", "messages") from None
        else:
            raise WireError(
                400, "message content must be a string or a list of content parts", "messages"
            )
    return prompt


def check_model(body: dict[str, Any], served_model: str, adapters: Collection[str] = ()) -> str:
    """The request's ``model``: the served model (the default) or one of its LoRA
    ``adapters``; anything else is 404 with vLLM's message."""
    model = body.get("model", served_model)
    if model != served_model and model not in adapters:
        raise WireError(404, f"The model `{model}` does not exist.", "model")
    return str(model)


def int_field(body: dict[str, Any], key: str, minimum: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError(400, f"{key} must be an integer, got {value!r}", key)
    if value < minimum:
        raise WireError(400, f"{key} must be at least {minimum}, got {value}", key)
    return value


def parse_request(
    api: str,
    body: Any,
    served_model: str,
    image_px: int = DEFAULT_IMAGE_TOKEN_PX,
    adapters: Collection[str] = (),
) -> ParsedRequest:
    """Validate a chat or completions request body; raise WireError (400/404) as vLLM
    would.

    Chat prompts are the message contents joined by newlines, so their token
    count is the sum of each content's ``count_tokens``, plus each image's tokens
    (``image_px``: images.py).
    """
    if not isinstance(body, dict):
        raise WireError(400, "request body must be a JSON object")
    model = check_model(body, served_model, adapters)
    if api == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise WireError(400, "messages must be a non-empty list", "messages")
        prompt = chat_prompt(messages, image_px)
        tokens = prompt.tokens
        images, image_tokens = prompt.images, prompt.image_tokens
        max_tokens = int_field(body, "max_completion_tokens", 1)
        if max_tokens is None:
            max_tokens = int_field(body, "max_tokens", 1)
    else:
        images = image_tokens = 0
        text = body.get("prompt")
        if isinstance(text, list) and len(text) == 1 and isinstance(text[0], str):
            text = text[0]
        if isinstance(text, str):
            tokens = split_tokens(text)
        elif isinstance(text, list) and text and all(isinstance(t, int) for t in text):
            tokens = [str(t) for t in text]
        else:
            raise WireError(
                400,
                "prompt must be a string or a list of token ids (one prompt per request)",
                "prompt",
            )
        max_tokens = int_field(body, "max_tokens", 1)
    n = body.get("n", 1)
    if n != 1:
        raise WireError(400, "the simulator supports only n=1", "n")
    stream = bool(body.get("stream", False))
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise WireError(400, "stream_options must be an object", "stream_options")
    priority = body.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise WireError(400, f"priority must be an integer, got {priority!r}", "priority")
    return ParsedRequest(
        api=api,
        model=model,
        prompt_tokens=tokens,
        max_tokens=max_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=stream,
        include_usage=stream and bool(options.get("include_usage", False)),
        priority=priority,
        images=images,
        image_tokens=image_tokens,
    )


def usage_body(
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int,
    reasoning_tokens: int | None = None,
) -> dict[str, Any]:
    """The ``usage`` object, with vLLM's ``prompt_tokens_details`` and, for a reasoning
    answer, OpenAI's ``completion_tokens_details.reasoning_tokens`` (counted in
    ``completion_tokens`` too)."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage


def per_request_metrics(times: ServedTimes, completion_tokens: int) -> dict[str, float]:
    """vLLM's per-request ``metrics`` object (``build_per_request_timing_metrics``, vLLM
    0.32) from the back end's own times: ``queue_time_ms`` queued -> first scheduled,
    ``time_to_first_token_ms`` scheduled -> first token (the prefill, not the client's
    TTFT), ``generation_time_ms`` first -> last token, ``mean_itl_ms`` that over the
    tokens less one (2+ tokens), ``tokens_per_second`` all tokens over scheduled -> last
    token. Fields vLLM would leave null are left out, as its stream chunks do."""
    out = {
        "time_to_first_token_ms": (times.first_token - times.scheduled) * 1000.0,
        "generation_time_ms": (times.last_token - times.first_token) * 1000.0,
        "queue_time_ms": (times.scheduled - times.queued) * 1000.0,
    }
    if completion_tokens > 1:
        out["mean_itl_ms"] = out["generation_time_ms"] / (completion_tokens - 1)
    inference_s = times.last_token - times.scheduled
    if inference_s > 0:
        out["tokens_per_second"] = completion_tokens / inference_s
    return out


class ChunkWriter:
    """Renders the SSE frames (and the non-streaming body) of one response."""

    def __init__(self, api: str, model: str, reasoning_field: str = "reasoning_content") -> None:
        self.api = api
        self.model = model
        self.reasoning_field = reasoning_field
        self.created = int(time.time())
        if api == "chat":
            self.id = "chatcmpl-" + uuid.uuid4().hex
            head = {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": model,
            }
        else:
            self.id = "cmpl-" + uuid.uuid4().hex
            head = {
                "id": self.id,
                "object": "text_completion",
                "created": self.created,
                "model": model,
            }
        self._head = head
        head_json = json.dumps(head)[:-1]  # without the closing brace
        if api == "chat":
            choice = head_json + ', "choices": [{"index": 0, "delta": {'
            self._prefix = choice + '"content": '
            self._rprefix = choice + json.dumps(reasoning_field) + ": "
            self._mid = '}, "logprobs": null, "finish_reason": '
            self._suffix = "}]}\n\n"
            self._finish_prefix = choice  # closed by _mid: an empty delta
        else:
            # the completions API has no reasoning field: reasoning is text (as vLLM sends it)
            self._prefix = self._rprefix = head_json + ', "choices": [{"index": 0, "text": '
            self._mid = ', "logprobs": null, "finish_reason": '
            self._suffix = ', "stop_reason": null}]}\n\n'
            self._finish_prefix = self._prefix + '""'  # llama.cpp's empty text with the finish

    def role_chunk(self) -> bytes:
        """vLLM's first chat chunk: role only, empty content."""
        body = dict(self._head)
        body["choices"] = [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
        ]
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    def token_chunk(
        self, text: str, finish_reason: str | None = None, reasoning: bool = False
    ) -> bytes:
        """One content chunk (a reasoning chunk with ``reasoning``; in the completions
        API both are ``text``); ``finish_reason`` set on the last token's chunk."""
        fr = "null" if finish_reason is None else f'"{finish_reason}"'
        prefix = self._rprefix if reasoning else self._prefix
        return ("data: " + prefix + json.dumps(text) + self._mid + fr + self._suffix).encode()

    def token_template(
        self, finish_reason: str, reasoning: bool = False
    ) -> tuple[bytes, bytes, bytes]:
        """``(head, tail, last_tail)``: ``head + json(text) + tail`` is
        ``token_chunk(text, reasoning=reasoning)`` as bytes, and with ``last_tail`` it is
        ``token_chunk(text, finish_reason, reasoning)``. Lets a writer build each chunk
        with one concatenation of ready-made bytes."""
        head = ("data: " + (self._rprefix if reasoning else self._prefix)).encode()
        tail = (self._mid + "null" + self._suffix).encode()
        last_tail = (self._mid + f'"{finish_reason}"' + self._suffix).encode()
        return head, tail, last_tail

    def delta_chunk(self, members: str, finish_reason: str | None = None) -> bytes:
        """A chat chunk whose ``delta`` object has the JSON ``members`` (no braces):
        the shape of deltas other than text, such as tool calls (tool_calls.py)."""
        fr = "null" if finish_reason is None else f'"{finish_reason}"'
        return ("data: " + self._finish_prefix + members + self._mid + fr + self._suffix).encode()

    def finish_chunk(self, finish_reason: str) -> bytes:
        """``finish_reason`` on a chunk of its own after the last token: an empty delta
        (chat, as OpenAI, SGLang and TGI send it) or an empty text (completions, as
        llama.cpp does)."""
        return (
            "data: " + self._finish_prefix + self._mid + f'"{finish_reason}"' + self._suffix
        ).encode()

    def usage_chunk(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int,
        reasoning_tokens: int | None = None,
        metrics: dict[str, float] | None = None,
    ) -> bytes:
        """Final chunk with ``choices: []`` and the usage (include_usage), and vLLM's
        per-request ``metrics`` when given."""
        body = dict(self._head)
        body["choices"] = []
        body["usage"] = usage_body(
            prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens
        )
        if metrics is not None:
            body["metrics"] = metrics
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    def full_body(
        self,
        text: str,
        finish_reason: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int,
        reasoning: str | None = None,
        reasoning_tokens: int | None = None,
        metrics: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        """The non-streaming response body; ``reasoning`` (chat) goes in the message's
        reasoning field beside the answer ``text``, as vLLM's reasoning parsers put it
        (``content`` is null when the answer is empty); vLLM's per-request ``metrics``
        when given."""
        body = dict(self._head)
        if self.api == "chat":
            body["object"] = "chat.completion"
            message: dict[str, Any] = {"role": "assistant", "content": text, "tool_calls": []}
            if reasoning is not None:
                message = {
                    "role": "assistant",
                    self.reasoning_field: reasoning,
                    "content": text or None,
                    "tool_calls": [],
                }
            body["choices"] = [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                    "stop_reason": None,
                }
            ]
        else:
            body["choices"] = [
                {
                    "index": 0,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                    "stop_reason": None,
                }
            ]
        body["usage"] = usage_body(
            prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens
        )
        if metrics is not None:
            body["metrics"] = metrics
        return body
