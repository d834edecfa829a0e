"""Which API a test drives: the closed set of wire formats this package ships.

The one source of truth for the API names (``--llm-api``, ``llm_endpoint(api=)``,
the reports' ``endpoint.api``): each member is the key of its format in the
registry (:mod:`pytest_llmperf.apis.registry`), whose module holds everything
about it. Kept at the very bottom (it imports only :mod:`pytest_llmperf.errors`
through the registry's checks) because every layer names an API: a workload
builds a sample's inputs for it, the SLO grammar refuses token-stream metrics
on an API that streams no tokens, the client sends and reads it, the simulator
serves it.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Api"]


class Api(StrEnum):
    """``--llm-api`` (and ``llm_endpoint(..., api=)``): a ``StrEnum``, equal to its name."""

    CHAT = "chat"  # OpenAI chat completions, /v1/chat/completions (streamed)
    COMPLETIONS = "completions"  # OpenAI completions, /v1/completions (streamed)
    RESPONSES = "responses"  # OpenAI Responses, /v1/responses (typed events, streamed)
    MESSAGES = "messages"  # Anthropic Messages, /v1/messages (typed events, streamed)
    EMBEDDINGS = "embeddings"  # /v1/embeddings: one JSON answer, no token stream
