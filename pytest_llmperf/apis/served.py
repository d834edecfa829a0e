"""The simulator's half of a format, and the table of them, keyed by the API's name.

Each format's module ends with its server half (below the marker line): an object
that parses a request body into the simulator's neutral request and frames the
answer in the format's bytes, registered here with :func:`serve` under the
format's name. The simulator's HTTP surface builds its route table from the
registry (:data:`~pytest_llmperf.apis.registry.API_FORMATS`, each format's path)
and these halves (:mod:`~pytest_llmperf.apis.server_table`), so it serves every
API without naming one:

- :class:`ServedTokens`: an API whose answer is a stream of tokens (or, not
  streamed, the whole of them): its :meth:`~ServedTokens.parse`, its
  :meth:`~ServedTokens.error_body`, the fields admission's errors name, and the
  :class:`Answer` that frames the tokens (opening, each token's bytes, closing;
  the body of an answer not streamed).
- :class:`ServedPooling`: an API answered whole once each input is prefilled
  (embeddings).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from pytest_llmperf.apis.output_asks import OutputFields
from pytest_llmperf.apis.server_wire import (
    DeltaPlan,
    OutputPlan,
    ParsedRequest,
    Usage,
    error_body,
    invalid_request_body,
)

__all__ = [
    "SERVED_HALVES",
    "Answer",
    "AnswerPlan",
    "AnswerSettings",
    "ChunkSource",
    "PlainChunks",
    "PooledRequest",
    "ServedHalf",
    "ServedPooling",
    "ServedTokens",
    "serve",
    "unserve",
]


class ChunkSource(Protocol):
    """Renders a response's bytes token by token, in order (each format's shapes)."""

    def clip(self, i: int, size: int) -> int:
        """``size`` cut so that a chunk starting at token ``i`` stays in one part."""

    def chunk(self, i: int, size: int = 1) -> bytes:
        """The bytes for tokens ``i … i+size-1`` (``b""``: nothing to send for them)."""


class PlainChunks(Protocol):
    """The plain one-token chunk of a format (chat's and completions' ``data:`` chunk)."""

    def token_chunk(
        self, text: str, finish_reason: str | None = None, reasoning: bool = False
    ) -> bytes:
        """One chunk carrying ``text``; ``finish_reason`` on the last token's."""

    def token_template(
        self, finish_reason: str, reasoning: bool = False
    ) -> tuple[bytes, bytes, bytes]:
        """``(head, tail, last_tail)`` around a token's JSON string."""


class Answer(Protocol):
    """One answer's bytes: the :meth:`opening` written when the stream starts, each
    token's bytes (``shaped``, or ``writer``'s plain chunk where that is None), the
    :meth:`closing` pieces (each written on its own), or the :meth:`full_body` of an
    answer not streamed."""

    @property
    def writer(self) -> PlainChunks | None:
        """The plain token chunks, where ``shaped`` is None."""

    @property
    def shaped(self) -> ChunkSource | None:
        """Each token's bytes, shaped (None: ``writer``'s plain chunk)."""

    def opening(self) -> bytes:
        """Written when the stream starts (``b""``: nothing)."""

    def closing(self, usage: Usage, include_usage: bool) -> tuple[bytes, ...]:
        """Written after the last token, one write each."""

    def full_body(self, reasoning: str | None, text: str, usage: Usage) -> dict[str, Any]:
        """The answer not streamed."""


@dataclass(frozen=True, slots=True)
class AnswerSettings:
    """What the simulator's profile says about an answer's shape."""

    reasoning_field: str = "reasoning_content"  # chat's reasoning delta field
    incomplete_event: bool = False  # Responses: response.incomplete at the cap


@dataclass(frozen=True, slots=True)
class AnswerPlan:
    """What one answer is framed from: the request, the delta shapes of its chunks, its
    output (what its tokens say), and the profile's settings."""

    parsed: ParsedRequest
    deltas: DeltaPlan | None
    out: OutputPlan
    settings: AnswerSettings


class ServedHalf:
    """What every format's server half says: its request fields and its errors."""

    # the request fields of the format's own reference (a strict profile refuses others)
    known_fields: frozenset[str] = frozenset()
    refuses_max_tokens = False  # a profile's reject_max_tokens applies (chat)

    def error_body(self, status: int, message: str, param: str | None) -> dict[str, Any]:
        """An error answer's JSON (OpenAI's shape unless the format has its own)."""
        return error_body(status, message, param)

    def unknown_fields_body(self, unknown: list[str]) -> dict[str, Any]:
        """A 400 for ``unknown`` fields in the words of the format's own server (OpenAI's
        "Unrecognized request argument supplied: F" unless the format has its own)."""
        noun = "argument" if len(unknown) == 1 else "arguments"
        message = f"Unrecognized request {noun} supplied: {', '.join(unknown)}"
        return invalid_request_body(message, unknown[0], None)


class ServedTokens(ServedHalf, ABC):
    """A token-streaming format's server half."""

    prompt_param = "messages"  # the field admission's errors name for the prompt
    max_param = "max_tokens"  # … and for the output cap
    schema_param = "response_format"  # … and for the output's JSON schema
    event_stream = False  # a streamed error may come as events (stream_error_events)
    reasons = True  # the answer may carry reasoning tokens (not completions)

    @abstractmethod
    def parse(
        self, body: Any, served_model: str, image_px: int, adapters: Collection[str]
    ) -> ParsedRequest:
        """The request body as the simulator's request (WireError 400/404 as vLLM)."""

    def output_fields(self, body: Mapping[str, Any]) -> OutputFields:
        """``(schema, tools, tool_choice, named)`` the body asks of its output
        (output_asks.py; none by default: completions)."""
        return None, (), "none", None

    @abstractmethod
    def answer(self, plan: AnswerPlan) -> Answer:
        """The framing of one answer."""

    def stream_failure(self, parsed: ParsedRequest, model: str, status: int, message: str) -> bytes:
        """The events of an error streamed (``event_stream`` formats only)."""
        raise NotImplementedError


class PooledRequest(Protocol):
    """What the simulator needs of a request answered whole after prefilling its inputs."""

    @property
    def token_counts(self) -> tuple[int, ...]: ...

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def priority(self) -> int: ...

    def body(self) -> dict[str, Any]:
        """The answer."""


class ServedPooling(ServedHalf, ABC):
    """A format answered whole once each input is prefilled (embeddings)."""

    @abstractmethod
    def parse(
        self, body: Any, served_model: str, embedding_dim: int, max_model_len: int
    ) -> PooledRequest:
        """The request body as the simulator's request (WireError as vLLM answers)."""


_SERVED: dict[str, ServedTokens | ServedPooling] = {}


_Half = TypeVar("_Half", ServedTokens, ServedPooling)


def serve(name: str, half: _Half) -> _Half:
    """Register ``half`` as the server half of the format ``name``; returns it."""
    _SERVED[name] = half
    return half


def unserve(name: str) -> None:
    """Take the server half of ``name`` out of the table again (a test's made-up one)."""
    _SERVED.pop(name, None)


# Each format's server half, by the format's name (read it through server_table.py,
# which loads the registry and with it every built-in format's module).
SERVED_HALVES: Mapping[str, ServedTokens | ServedPooling] = MappingProxyType(_SERVED)
