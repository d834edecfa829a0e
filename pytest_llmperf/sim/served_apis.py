"""What the simulator does differently per API: one served half each, in one table.

Each entry parses its request body into the :class:`~pytest_llmperf.sim.wire.ParsedRequest`
every API shares (wire.py, apis.py, embeddings.py), renders its errors in its own
shape (Anthropic's for Messages), names its fields in admission's errors, and
builds the :class:`~pytest_llmperf.sim.answers.Answer` that frames its tokens. The
HTTP surface (server.py) routes every API through :data:`SERVED`: it knows none by
name.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from .answers import Answer, ChunkAnswer, MessagesAnswer, ResponsesAnswer
from .apis import anthropic_error_body, parse_messages, parse_responses
from .deltas import DeltaPlan
from .embeddings import EmbeddingsRequest, parse_embeddings
from .events import MessagesEvents, ResponsesEvents
from .outputs import OutputPlan
from .wire import ParsedRequest, error_body, parse_request

__all__ = ["EMBEDDINGS", "SERVED", "ServedApi", "ServedEmbeddings"]


class ServedApi:
    """A token-streaming API's served half (chat and completions as they are; the
    event APIs override what differs)."""

    event_stream = False  # a streamed error may come as events (stream_error_events)

    def __init__(self, api: str, path: str, prompt_param: str, max_param: str) -> None:
        self.api = api
        self.path = path
        self.prompt_param = prompt_param  # admission's errors name these fields
        self.max_param = max_param

    def parse(
        self, body: Any, served_model: str, image_px: int, adapters: Collection[str]
    ) -> ParsedRequest:
        return parse_request(self.api, body, served_model, image_px, adapters)

    def error_body(self, status: int, message: str, param: str | None) -> dict[str, Any]:
        return error_body(status, message, param)

    def answer(
        self,
        parsed: ParsedRequest,
        deltas: DeltaPlan | None,
        out: OutputPlan,
        reasoning_field: str,
        incomplete_event: bool,
    ) -> Answer:
        return ChunkAnswer(self.api, parsed.model, reasoning_field, deltas, out)

    def stream_failure(self, parsed: ParsedRequest, model: str, status: int, message: str) -> bytes:
        """The events of a streamed error (event APIs only)."""
        raise NotImplementedError


class _ServedResponses(ServedApi):
    event_stream = True

    def parse(
        self, body: Any, served_model: str, image_px: int, adapters: Collection[str]
    ) -> ParsedRequest:
        return parse_responses(body, served_model, image_px, adapters)

    def answer(
        self,
        parsed: ParsedRequest,
        deltas: DeltaPlan | None,
        out: OutputPlan,
        reasoning_field: str,
        incomplete_event: bool,
    ) -> Answer:
        return ResponsesAnswer(parsed.model, deltas, out, parsed.max_tokens, incomplete_event)

    def stream_failure(self, parsed: ParsedRequest, model: str, status: int, message: str) -> bytes:
        """``response.created``, ``response.in_progress``, ``response.failed``."""
        ev = ResponsesEvents(model, None, 0, 0, "stop", max_output_tokens=None)
        return ev.opening() + ev.failed(message)


class _ServedMessages(ServedApi):
    event_stream = True

    def parse(
        self, body: Any, served_model: str, image_px: int, adapters: Collection[str]
    ) -> ParsedRequest:
        return parse_messages(body, served_model, image_px, adapters)

    def error_body(self, status: int, message: str, param: str | None) -> dict[str, Any]:
        return anthropic_error_body(status, message)

    def answer(
        self,
        parsed: ParsedRequest,
        deltas: DeltaPlan | None,
        out: OutputPlan,
        reasoning_field: str,
        incomplete_event: bool,
    ) -> Answer:
        return MessagesAnswer(parsed.model, deltas, out, parsed.num_prompt_tokens)

    def stream_failure(self, parsed: ParsedRequest, model: str, status: int, message: str) -> bytes:
        """``message_start``, then an ``error`` event."""
        ev = MessagesEvents(model, None, 0, 0, "stop")
        return ev.opening(parsed.num_prompt_tokens) + MessagesEvents.error(status, message)


class ServedEmbeddings:
    """``POST /v1/embeddings``: each input a prefill-only request; one JSON answer."""

    api = "embeddings"
    path = "/v1/embeddings"

    def parse(
        self, body: Any, served_model: str, embedding_dim: int, max_model_len: int
    ) -> EmbeddingsRequest:
        return parse_embeddings(body, served_model, embedding_dim, max_model_len)

    def error_body(self, status: int, message: str, param: str | None) -> dict[str, Any]:
        return error_body(status, message, param)


SERVED: tuple[ServedApi, ...] = (
    ServedApi("chat", "/v1/chat/completions", "messages", "max_tokens"),
    ServedApi("completions", "/v1/completions", "prompt", "max_tokens"),
    _ServedResponses("responses", "/v1/responses", "input", "max_output_tokens"),
    _ServedMessages("messages", "/v1/messages", "messages", "max_tokens"),
)
EMBEDDINGS = ServedEmbeddings()
