"""Request strictness: refuse request fields the way strict servers do.

vLLM ignores fields it does not know, so a client tested only against it may
send extras (``ignore_eos``, ``min_tokens``) that other servers refuse: the
OpenAI API itself (400 ``Unrecognized request argument supplied: …``),
``transformers serve`` (422 ``Unexpected fields in the request: {…}``), and
gateways built on pydantic models with ``extra="forbid"`` (422 with an
``extra_forbidden`` detail). OpenAI's newer models also refuse ``max_tokens``
on chat in favour of ``max_completion_tokens``. The client negotiates these at
preflight; the simulator answers exactly as those servers do so that
negotiation can be tested without them.

A profile with all strictness off gets no policy at all (:func:`request_policy`
returns None), so requests pay nothing for this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .profiles import Profile

__all__ = [
    "API_FIELDS",
    "CHAT_FIELDS",
    "COMPLETIONS_FIELDS",
    "EMBEDDINGS_FIELDS",
    "MAX_TOKENS_MESSAGE",
    "MESSAGES_FIELDS",
    "RESPONSES_FIELDS",
    "STREAM_OPTIONS_FIELDS",
    "Rejection",
    "RequestPolicy",
    "request_policy",
]

# The request fields of OpenAI's own API reference (chat/completions and the legacy
# completions), nothing that only vLLM or another server adds.
CHAT_FIELDS = frozenset(
    {
        "messages",
        "model",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)
COMPLETIONS_FIELDS = frozenset(
    {
        "model",
        "prompt",
        "best_of",
        "echo",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "max_tokens",
        "n",
        "presence_penalty",
        "seed",
        "stop",
        "stream",
        "stream_options",
        "suffix",
        "temperature",
        "top_p",
        "user",
    }
)
STREAM_OPTIONS_FIELDS = frozenset({"include_usage", "include_obfuscation"})
# OpenAI's Responses API reference
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
# Anthropic's Messages API reference
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
# OpenAI's embeddings reference
EMBEDDINGS_FIELDS = frozenset({"model", "input", "dimensions", "encoding_format", "user"})
API_FIELDS = {
    "chat": CHAT_FIELDS,
    "completions": COMPLETIONS_FIELDS,
    "responses": RESPONSES_FIELDS,
    "messages": MESSAGES_FIELDS,
    "embeddings": EMBEDDINGS_FIELDS,
}

MAX_TOKENS_MESSAGE = (
    "Unsupported parameter: 'max_tokens' is not supported with this model. "
    "Use 'max_completion_tokens' instead."
)


@dataclass(frozen=True)
class Rejection:
    """A refused request: the HTTP status and the JSON body to answer with."""

    status: int
    body: dict[str, Any]


def _openai_error(message: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


def _present(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every field of ``body`` as ``(name, value)``; nested ``stream_options`` fields
    also as ``stream_options.key``."""
    fields = list(body.items())
    options = body.get("stream_options")
    if isinstance(options, dict):
        fields.extend((f"stream_options.{k}", v) for k, v in options.items())
    return fields


def _known(name: str, known: frozenset[str]) -> bool:
    if name.startswith("stream_options."):
        return name[len("stream_options.") :] in STREAM_OPTIONS_FIELDS
    return name in known


class RequestPolicy:
    """The strictness a profile asks for, checked on each request body in turn:
    unknown fields (``strict_fields``), named fields (``reject_fields``), then
    ``max_tokens`` on chat (``reject_max_tokens``)."""

    def __init__(self, profile: Profile) -> None:
        self.strict = profile.strict_fields
        self.rejected = frozenset(profile.reject_fields)
        self.style = profile.reject_style
        self.reject_max_tokens = profile.reject_max_tokens

    def check(self, api: str, body: Any) -> Rejection | None:
        """The rejection of ``body`` sent to ``api`` (chat, completions, responses,
        messages, embeddings), or None. ``strict_fields`` answers in the words of the
        API's own server: OpenAI's chat, completions and embeddings "Unrecognized
        request argument supplied: F"; OpenAI's Responses API "Unknown parameter:
        'F'." (code ``unknown_parameter``); Anthropic's Messages API "F: Extra inputs
        are not permitted" in its error shape."""
        if not isinstance(body, dict):
            return None  # parse_request answers that one
        fields = _present(body)
        if self.strict:
            known = API_FIELDS.get(api, COMPLETIONS_FIELDS)
            unknown = [name for name, _ in fields if not _known(name, known)]
            if unknown:
                return _unknown_fields(api, unknown)
        if self.rejected:
            named = [(name, value) for name, value in fields if name in self.rejected]
            if named:
                return Rejection(422, self._unexpected(named))
        if self.reject_max_tokens and api == "chat" and "max_tokens" in body:
            return Rejection(
                400, _openai_error(MAX_TOKENS_MESSAGE, "max_tokens", "unsupported_parameter")
            )
        return None

    def _unexpected(self, named: list[tuple[str, Any]]) -> dict[str, Any]:
        """The 422 body naming ``named``: FastAPI's ``HTTPException`` detail string, as
        ``transformers serve`` sends it, or pydantic's ``extra_forbidden`` errors."""
        if self.style == "pydantic":
            return {
                "detail": [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", *name.split(".")],
                        "msg": "Extra inputs are not permitted",
                        "input": value,
                    }
                    for name, value in named
                ]
            }
        names = ", ".join(repr(name) for name in sorted(name for name, _ in named))
        return {"detail": f"Unexpected fields in the request: {{{names}}}"}


def _unknown_fields(api: str, unknown: list[str]) -> Rejection:
    if api == "messages":
        message = "; ".join(f"{name}: Extra inputs are not permitted" for name in unknown)
        return Rejection(
            400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        )
    if api == "responses":
        message = f"Unknown parameter: '{unknown[0]}'."
        return Rejection(400, _openai_error(message, unknown[0], "unknown_parameter"))
    noun = "argument" if len(unknown) == 1 else "arguments"
    message = f"Unrecognized request {noun} supplied: {', '.join(unknown)}"
    return Rejection(400, _openai_error(message, unknown[0], None))


def request_policy(profile: Profile) -> RequestPolicy | None:
    """The profile's request policy, or None when it accepts whatever vLLM accepts."""
    if profile.strict_fields or profile.reject_fields or profile.reject_max_tokens:
        return RequestPolicy(profile)
    return None
