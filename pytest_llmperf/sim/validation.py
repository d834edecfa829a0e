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

Each format's own fields and its words for an unknown one are its server half's
(:mod:`pytest_llmperf.apis`: ``known_fields``, ``unknown_fields_body``); the
names of the field sets stay importable from here. A profile with all
strictness off gets no policy at all (:func:`request_policy`
returns None), so requests pay nothing for this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..apis.chat import CHAT_FIELDS
from ..apis.completions import COMPLETIONS_FIELDS
from ..apis.embeddings import EMBEDDINGS_FIELDS
from ..apis.messages import MESSAGES_FIELDS
from ..apis.responses import RESPONSES_FIELDS
from ..apis.served import ServedHalf
from ..apis.server_wire import invalid_request_body
from .profiles import Profile

__all__ = [
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

STREAM_OPTIONS_FIELDS = frozenset({"include_usage", "include_obfuscation"})
MAX_TOKENS_MESSAGE = (
    "Unsupported parameter: 'max_tokens' is not supported with this model. "
    "Use 'max_completion_tokens' instead."
)


@dataclass(frozen=True)
class Rejection:
    """A refused request: the HTTP status and the JSON body to answer with."""

    status: int
    body: dict[str, Any]


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

    def check(self, served: ServedHalf, body: Any) -> Rejection | None:
        """The rejection of ``body`` sent to the format ``served`` serves, or None.
        ``strict_fields`` refuses a field outside the format's own reference
        (``served.known_fields``) in the words of the format's own server
        (``served.unknown_fields_body``: OpenAI's chat, completions and embeddings
        "Unrecognized request argument supplied: F"; OpenAI's Responses API "Unknown
        parameter: 'F'." (code ``unknown_parameter``); Anthropic's Messages API "F:
        Extra inputs are not permitted" in its error shape)."""
        if not isinstance(body, dict):
            return None  # parse_request answers that one
        fields = _present(body)
        if self.strict:
            known = served.known_fields
            unknown = [name for name, _ in fields if not _known(name, known)]
            if unknown:
                return Rejection(400, served.unknown_fields_body(unknown))
        if self.rejected:
            named = [(name, value) for name, value in fields if name in self.rejected]
            if named:
                return Rejection(422, self._unexpected(named))
        if self.reject_max_tokens and served.refuses_max_tokens and "max_tokens" in body:
            return Rejection(
                400,
                invalid_request_body(MAX_TOKENS_MESSAGE, "max_tokens", "unsupported_parameter"),
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


def request_policy(profile: Profile) -> RequestPolicy | None:
    """The profile's request policy, or None when it accepts whatever vLLM accepts."""
    if profile.strict_fields or profile.reject_fields or profile.reject_max_tokens:
        return RequestPolicy(profile)
    return None
