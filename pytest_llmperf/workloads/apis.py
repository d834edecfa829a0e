"""Which API a test drives: the closed set of request shapes the client can send.

Kept at the bottom of the data flow (beside the samples it shapes) because
three layers ask it: a workload builds a sample's inputs for it (texts to
embed, images for a chat-like prompt), the SLO grammar refuses token-stream
metrics on an API that streams no tokens, and the client sends and reads each
API's wire format (:mod:`pytest_llmperf.client.apis`).
"""

from __future__ import annotations

from enum import StrEnum

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["IMAGE_APIS", "TOKEN_STREAM_APIS", "Api", "parse_api"]


class Api(StrEnum):
    """``--llm-api`` (and ``llm_endpoint(..., api=)``): a ``StrEnum``, equal to its name."""

    CHAT = "chat"  # OpenAI chat completions, /v1/chat/completions (streamed)
    COMPLETIONS = "completions"  # OpenAI completions, /v1/completions (streamed)
    RESPONSES = "responses"  # OpenAI Responses, /v1/responses (typed events, streamed)
    MESSAGES = "messages"  # Anthropic Messages, /v1/messages (typed events, streamed)
    EMBEDDINGS = "embeddings"  # /v1/embeddings: one JSON answer, no token stream


# The APIs whose answers stream token events: ttft, ttfo, tpot, itl mean something there.
TOKEN_STREAM_APIS = frozenset({Api.CHAT, Api.COMPLETIONS, Api.RESPONSES, Api.MESSAGES})
# The APIs whose prompts may carry images (content parts of a user turn).
IMAGE_APIS = frozenset({Api.CHAT, Api.RESPONSES, Api.MESSAGES})


def parse_api(value: object, *, where: str) -> Api:
    """``value`` as an :class:`Api`; anything else is a usage error naming ``where``."""
    if isinstance(value, str) and value in Api._value2member_map_:
        return Api(value)
    names = ", ".join(a.value for a in Api)
    raise LlmPerfUsageError(f"must be one of {names}, got {value!r}", where=where)
