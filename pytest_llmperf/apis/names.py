"""Which API a test drives: the closed set of wire formats this package ships.

The one source of truth for the API names (``--llm-api``, ``llm_endpoint(api=)``,
the reports' ``endpoint.api``): each member is the key of its format in the
registry (:mod:`pytest_llmperf.apis.registry`), whose module holds everything
about it. Kept at the very bottom (it imports nothing of the package) because
every layer names an API: a workload builds a sample's inputs for it, the SLO
grammar refuses token-stream metrics on an API that streams no tokens, the
client sends and reads it, the simulator serves it. A format registered beside
the built-in ones gets an ``Api`` value too (:func:`extend_api`).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Api", "extend_api", "withdraw_api"]


class Api(StrEnum):
    """``--llm-api`` (and ``llm_endpoint(..., api=)``): a ``StrEnum``, equal to its name."""

    CHAT = "chat"  # OpenAI chat completions, /v1/chat/completions (streamed)
    COMPLETIONS = "completions"  # OpenAI completions, /v1/completions (streamed)
    RESPONSES = "responses"  # OpenAI Responses, /v1/responses (typed events, streamed)
    MESSAGES = "messages"  # Anthropic Messages, /v1/messages (typed events, streamed)
    EMBEDDINGS = "embeddings"  # /v1/embeddings: one JSON answer, no token stream


def extend_api(name: str) -> Api:
    """``name`` as an :class:`Api` value, for a format registered beside the built-in ones
    (:func:`pytest_llmperf.apis.registry.register`): ``Api(name)`` then gives it, equal to
    its name like every member, while iterating :class:`Api` still gives the built-in
    APIs only. An existing value is returned as it is."""
    if name in Api._value2member_map_:
        return Api(name)
    value = str.__new__(Api, name)
    value._name_ = name.upper()
    value._value_ = name
    Api._value2member_map_[name] = value
    return value


def withdraw_api(name: str) -> None:
    """Forget a value :func:`extend_api` made (never a built-in member)."""
    if name not in Api.__members__.values():
        Api._value2member_map_.pop(name, None)
