"""The OpenTelemetry GenAI semantic conventions' names that ``--llm-otel`` writes.

Read from open-telemetry/semantic-conventions, docs/gen-ai/gen-ai-metrics.md (status
"Development", the names of v1.37 and later): the client metrics
``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage``; time to first
token and time per output token exist there only as *model server* metrics
(``gen_ai.server.time_to_first_token``, ``gen_ai.server.time_per_output_token``), with no
client-side twin yet, so those names are used for the client-measured values (the docs
say so). Each histogram carries the conventions' recommended bucket boundaries.

``gen_ai.provider.name`` replaced ``gen_ai.system`` in v1.37; both are written, so a
backend on either generation of the conventions finds its attribute.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "DURATION",
    "HISTOGRAMS",
    "TOKEN_USAGE",
    "TPOT",
    "TTFT",
    "Attr",
    "Histogram",
    "operation_name",
    "provider_name",
]


@dataclass(frozen=True)
class Histogram:
    """One exported histogram: its convention name, UCUM unit, description, boundaries."""

    name: str
    unit: str
    description: str
    boundaries: tuple[float, ...]


DURATION = Histogram(
    "gen_ai.client.operation.duration",
    "s",
    "GenAI operation duration (pytest-llmperf: planned send to the last byte).",
    (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92),
)
TOKEN_USAGE = Histogram(
    "gen_ai.client.token.usage",
    "{token}",
    "Number of input and output tokens used.",
    (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864),
)
TTFT = Histogram(
    "gen_ai.server.time_to_first_token",
    "s",
    "Time to generate first token for successful responses (measured at the client).",
    (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0),
)
TPOT = Histogram(
    "gen_ai.server.time_per_output_token",
    "s",
    "Time per output token generated after the first token for successful responses "
    "(measured at the client).",
    (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5),
)
HISTOGRAMS: tuple[Histogram, ...] = (DURATION, TOKEN_USAGE, TTFT, TPOT)


class Attr(StrEnum):
    """The attribute keys written on metrics and spans."""

    OPERATION = "gen_ai.operation.name"
    PROVIDER = "gen_ai.provider.name"
    SYSTEM = "gen_ai.system"  # the pre-1.37 name of the provider
    REQUEST_MODEL = "gen_ai.request.model"
    RESPONSE_MODEL = "gen_ai.response.model"
    TOKEN_TYPE = "gen_ai.token.type"
    INPUT_TOKENS = "gen_ai.usage.input_tokens"
    OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
    FINISH_REASONS = "gen_ai.response.finish_reasons"
    SERVER_ADDRESS = "server.address"
    SERVER_PORT = "server.port"
    ERROR_TYPE = "error.type"
    TEST = "llmperf.test"
    RUN = "llmperf.run"
    STAGE = "llmperf.stage"


_OPERATIONS = {
    "chat": "chat",
    "completions": "text_completion",
    "responses": "chat",
    "messages": "chat",
    "embeddings": "embeddings",
}

_PROVIDERS = {"messages": "anthropic"}  # the rest of the APIs speak OpenAI's


def operation_name(api: str) -> str:
    """``gen_ai.operation.name`` for the API a run drove (``--llm-api``)."""
    return _OPERATIONS.get(api, api or "chat")


def provider_name(api: str) -> str:
    """``gen_ai.provider.name``: the telemetry flavour of the wire protocol the run spoke
    (Anthropic Messages: ``anthropic``; the OpenAI-compatible APIs: ``openai``), which is
    what the conventions ask for when a server speaks another provider's API."""
    return _PROVIDERS.get(api, "openai")
