"""The simulator's words for a request and its answer, the same in every format.

Each format's server half (the end of its module) parses a request body into a
:class:`ParsedRequest` and frames an answer from a :class:`OutputPlan` (what its
tokens say), a :class:`DeltaPlan` (the delta shapes of its chunks) and a
:class:`Usage` (what it reports); the simulator (:mod:`pytest_llmperf.sim`)
decides those and times the tokens, knowing no format by name. A request the
server refuses is a :class:`WireError`, rendered in the format's own error shape
(OpenAI's :func:`error_body` unless the format says otherwise). Field checks
shared by the parsers are here too (:func:`check_model`, :func:`int_field`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.apis.prompt_images import ImageError, ImageInfo, PromptTokens

__all__ = [
    "DeltaPlan",
    "OutputPlan",
    "ParsedRequest",
    "ToolCall",
    "Usage",
    "WireError",
    "charge_image",
    "check_model",
    "error_body",
    "event_request",
    "int_field",
    "invalid_request_body",
    "plain_plan",
    "priority_field",
    "prompt_request",
    "stream_flag",
    "usage_body",
]

_ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


class WireError(Exception):
    """A request the server answers with an error body (in its format's shape)."""

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


def invalid_request_body(message: str, param: str | None, code: str | None) -> dict[str, Any]:
    """OpenAI's ``invalid_request_error`` JSON (a strict server's refusal of a field)."""
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


def usage_body(
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int,
    reasoning_tokens: int | None = None,
) -> dict[str, Any]:
    """The OpenAI ``usage`` object, with vLLM's ``prompt_tokens_details`` and, for a
    reasoning answer, OpenAI's ``completion_tokens_details.reasoning_tokens`` (counted
    in ``completion_tokens`` too)."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage


@dataclass
class ParsedRequest:
    """What the simulator needs from a token-streaming request body, in any format."""

    api: str  # the format's name (an Api value)
    model: str
    prompt_tokens: list[str]
    max_tokens: int | None
    ignore_eos: bool
    stream: bool
    include_usage: bool
    priority: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    images: int = 0  # images in the prompt
    image_tokens: int = 0  # the prompt tokens they are charged (prompt_images.py), in prompt_tokens

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_tokens)


def prompt_request(
    api: str,
    model: str,
    prompt: PromptTokens,
    body: dict[str, Any],
    max_tokens: int | None,
    stream: bool,
    include_usage: bool,
    priority: int,
) -> ParsedRequest:
    """The request of a prompt read into ``prompt`` (its text and image tokens), with
    the body's ``ignore_eos``."""
    return ParsedRequest(
        api=api,
        model=model,
        prompt_tokens=prompt.tokens,
        max_tokens=max_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=stream,
        include_usage=include_usage,
        priority=priority,
        images=prompt.images,
        image_tokens=prompt.image_tokens,
    )


def event_request(
    api: str, model: str, prompt: PromptTokens, body: dict[str, Any], max_tokens: int | None
) -> ParsedRequest:
    """A typed-event format's request (Responses, Messages): ``stream`` checked to be a
    boolean, ``priority``; the usage always reported (it ends every answer)."""
    stream = stream_flag(body)
    priority = priority_field(body)
    return prompt_request(api, model, prompt, body, max_tokens, stream, True, priority)


def charge_image(
    prompt: PromptTokens, where: str, decode: Callable[..., ImageInfo], *args: str
) -> None:
    """Add the image ``decode(*args)`` reads to ``prompt``; a 400 naming ``where`` (its
    first part as the param) when it cannot be read."""
    try:
        prompt.add_image(decode(*args))
    except ImageError as exc:
        raise WireError(400, f"bad image in {where}: {exc}", where.split(".")[0]) from None


def check_model(body: dict[str, Any], served_model: str, adapters: Collection[str] = ()) -> str:
    """The request's ``model``: the served model (the default) or one of its LoRA
    ``adapters``; anything else is 404 with vLLM's message."""
    model = body.get("model", served_model)
    if model != served_model and model not in adapters:
        raise WireError(404, f"The model `{model}` does not exist.", "model")
    return str(model)


def int_field(body: dict[str, Any], key: str, minimum: int) -> int | None:
    """``body[key]``, an integer of at least ``minimum``, or None when absent."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError(400, f"{key} must be an integer, got {value!r}", key)
    if value < minimum:
        raise WireError(400, f"{key} must be at least {minimum}, got {value}", key)
    return value


def priority_field(body: dict[str, Any]) -> int:
    """vLLM's ``priority`` (an integer, 0 when absent)."""
    priority = body.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise WireError(400, f"priority must be an integer, got {priority!r}", "priority")
    return priority


def stream_flag(body: dict[str, Any]) -> bool:
    """``stream``, checked to be a boolean (the typed-event formats check it)."""
    value = body.get("stream", False)
    if value is not None and not isinstance(value, bool):
        raise WireError(400, f"stream must be a boolean, got {value!r}", "stream")
    return bool(value)


@dataclass(frozen=True)
class DeltaPlan:
    """The delta shape of one request's ``n`` output tokens.

    Tokens ``0 … n_reasoning-1`` are reasoning. ``empty[k]`` is 1 when token
    ``k``'s chunk carries an empty string; its text then moves to the next
    non-empty chunk. The last reasoning token before an answer is never empty,
    so no text moves across the parts; the very last token may be, and then the
    text held back is never sent, as vLLM never sends a trailing partial
    character (the streamed text is a word or more short of ``completion_tokens``)
    — unless every token would be empty: then the last is not, as a partial
    character's bytes come with a later token. A *blank* reply (``blank``,
    ``blank_reply_rate``) is one whose every token is empty: a random-weight model
    repeating a token that decodes to nothing; its usage still counts every token.
    The simulator draws it (sim/deltas.py); the format renders it.
    """

    n: int
    n_reasoning: int
    empty: bytes
    separate_finish: bool
    blank: bool = False


def plain_plan(n_out: int) -> DeltaPlan:
    """The plan of vLLM's plain shape (no reasoning, no empty deltas, finish on the last
    token): for a response whose tokens' text is given (outputs.py) but not shaped."""
    return DeltaPlan(n=n_out, n_reasoning=0, empty=bytes(n_out), separate_finish=False)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The tool call an answer makes: at token ``at`` its header, then its arguments."""

    name: str
    arguments: str  # the whole arguments JSON (cut short when the cap cut it)
    at: int  # index of the header token (after any reasoning tokens)
    named: bool  # tool_choice named it: chat's finish_reason is then "stop", as OpenAI's
    call_id: str


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """A request's output, decided before it is submitted (sim/outputs.py)."""

    n: int  # output tokens (usage)
    finish: str  # "stop" | "length" | "tool_calls"
    salt: int  # the filler words' offset (filler_text.token_index)
    pieces: tuple[bytes, ...] | None  # JSON-escaped text of each token; None: filler words
    tool: ToolCall | None = None
    text: str | None = None  # the answer text (after reasoning) when pieces are given

    @property
    def engine_finish(self) -> str:
        """The engine's reason (vLLM's ``finished_reason`` label): stop or length."""
        return "length" if self.finish == "length" else "stop"


@dataclass(frozen=True, slots=True)
class Usage:
    """What a finished answer reports: its token counts and vLLM's per-request metrics."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int | None  # None: the answer does not reason
    metrics: dict[str, float] | None  # None: per-request metrics off
