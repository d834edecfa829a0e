"""The names and paths of the APIs the client speaks, below every module that shapes them.

A module of its own so that the OpenAI wire module (:mod:`~pytest_llmperf.client.openai`,
which older code imports these names from) and the dispatch over every API
(:mod:`~pytest_llmperf.client.apis`, which imports the OpenAI module) can both
re-export them without importing each other. The names equal
:class:`pytest_llmperf.workloads.apis.Api`'s values.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["API_NAMES", "API_PATHS", "ApiKind"]

ApiKind = Literal["chat", "completions", "responses", "messages", "embeddings"]
# Under the base URL (which ends in /v1), in --llm-api's order.
API_PATHS: dict[str, str] = {
    "chat": "/chat/completions",
    "completions": "/completions",
    "responses": "/responses",
    "messages": "/messages",
    "embeddings": "/embeddings",
}
API_NAMES: tuple[str, ...] = tuple(API_PATHS)
