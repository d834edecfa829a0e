"""One answer's bytes in its API's shape: what the HTTP surface writes around the tokens.

Every API streams the same tokens at the same instants (token_paths.py); what
differs is the bytes around and between them. An :class:`Answer` gives them in
order: the :meth:`~Answer.opening` written when the stream starts (chat's
role-only chunk, the Responses API's ``response.created``, the Messages API's
``message_start``), the renderer of each token's chunk (``shaped``; None for the
plain chunk of :class:`~pytest_llmperf.sim.wire.ChunkWriter`), the
:meth:`~Answer.closing` pieces (chat's usage chunk and ``[DONE]``, the closing
events), each written on its own, and the :meth:`~Answer.full_body` of an answer
not streamed. The counts they report are one :class:`Usage`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .deltas import ChunkSource, DeltaPlan, ShapedChunks, plain_plan
from .events import MessagesEvents, ResponsesEvents
from .outputs import OutputPlan
from .tool_calls import ToolCallChunks, chat_tool_call
from .wire import DONE, ChunkWriter

__all__ = ["Answer", "ChunkAnswer", "MessagesAnswer", "ResponsesAnswer", "Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """What a finished answer reports: its token counts and vLLM's per-request metrics."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int | None  # None: the answer does not reason
    metrics: dict[str, float] | None  # None: per-request metrics off


class Answer(Protocol):
    """One answer's bytes (see the module's docstring)."""

    @property
    def writer(self) -> ChunkWriter | None:
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


class ChunkAnswer:
    """Chat and completions: ``data:`` chunks (wire.py), shaped as other servers send
    them (deltas.py) or as a tool call (tool_calls.py); ``[DONE]`` at the end."""

    def __init__(
        self,
        api: str,
        model: str,
        reasoning_field: str,
        deltas: DeltaPlan | None,
        out: OutputPlan,
    ) -> None:
        self.api = api
        self.out = out
        w = self.writer = ChunkWriter(api, model, reasoning_field)
        self.shaped: ChunkSource | None = None
        if out.tool is not None:
            self.shaped = ToolCallChunks(w, deltas, out, out.finish)
        elif deltas is not None or out.pieces is not None:
            plan = deltas if deltas is not None else plain_plan(out.n)
            self.shaped = ShapedChunks(w, plan, out.salt, out.finish, out.pieces)

    def opening(self) -> bytes:
        return self.writer.role_chunk() if self.api == "chat" else b""

    def closing(self, usage: Usage, include_usage: bool) -> tuple[bytes, ...]:
        if not include_usage:
            return (DONE,)
        chunk = self.writer.usage_chunk(
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_tokens,
            usage.reasoning_tokens,
            usage.metrics,
        )
        return chunk, DONE

    def full_body(self, reasoning: str | None, text: str, usage: Usage) -> dict[str, Any]:
        out = self.out
        body = self.writer.full_body(
            text,
            out.finish,
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_tokens,
            reasoning,
            usage.reasoning_tokens,
            usage.metrics,
        )
        if out.tool is not None:  # the call in place of the answer text (vLLM's message)
            message = body["choices"][0]["message"]
            message["content"] = None
            message["tool_calls"] = [chat_tool_call(out.tool.call_id, out.tool.name, text)]
        return body


class ResponsesAnswer:
    """The Responses API: typed events (events.py), no ``[DONE]``."""

    writer: ChunkWriter | None = None

    def __init__(
        self,
        model: str,
        deltas: DeltaPlan | None,
        out: OutputPlan,
        max_output_tokens: int | None,
        incomplete_event: bool,
    ) -> None:
        self.events = self.shaped = ResponsesEvents(
            model,
            deltas,
            out.salt,
            out.n,
            out.finish,
            max_output_tokens=max_output_tokens,
            incomplete_event=incomplete_event,
            pieces=out.pieces,
            tool=out.tool,
        )

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


class MessagesAnswer:
    """Anthropic's Messages API: typed events (events.py), no ``[DONE]``."""

    writer: ChunkWriter | None = None

    def __init__(
        self, model: str, deltas: DeltaPlan | None, out: OutputPlan, prompt_tokens: int
    ) -> None:
        self.events = self.shaped = MessagesEvents(
            model, deltas, out.salt, out.n, out.finish, pieces=out.pieces, tool=out.tool
        )
        self.prompt_tokens = prompt_tokens

    def opening(self) -> bytes:
        return self.events.opening(self.prompt_tokens)

    def closing(self, usage: Usage, include_usage: bool) -> tuple[bytes, ...]:
        return (self.events.closing(usage.prompt_tokens, usage.cached_tokens),)

    def full_body(self, reasoning: str | None, text: str, usage: Usage) -> dict[str, Any]:
        return self.events.full_body(reasoning, text, usage.prompt_tokens, usage.cached_tokens)
