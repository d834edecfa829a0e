"""What a wire format is: the one object each API's module defines and the registry holds.

The client's transport (:mod:`pytest_llmperf.client.stream_client`,
:mod:`pytest_llmperf.client.request`) is the same for every API; what differs is
the path, the body, how one stream event is read, where the stream ends and what
a reply's output is. An :class:`ApiFormat` holds exactly that, so the client asks
the format and never compares an API's name: adding an API is a module that
defines one of these and a line in :mod:`pytest_llmperf.apis.registry`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.apis.events import ChunkInfo
from pytest_llmperf.apis.fields import EVERY_FIELD, FieldRules, RequestFields
from pytest_llmperf.apis.output_parts import OutputParts
from pytest_llmperf.apis.samples import SampleLike

__all__ = [
    "AnswerFault",
    "ApiFormat",
    "BodyBuilder",
    "EventReader",
    "OutputReader",
    "RunReader",
    "WholeAnswer",
]

# (model, sample, fields) -> the request's JSON body
BodyBuilder = Callable[[str, SampleLike, RequestFields], dict[str, Any]]
# One event's ``data`` (or a whole answer) -> what it means for the measurement
EventReader = Callable[[str], ChunkInfo]
# (the output being collected, one event's JSON object) -> the event's piece of the reply
OutputReader = Callable[[OutputParts, dict[str, Any]], str]


@dataclass(frozen=True, slots=True)
class WholeAnswer:
    """An answer read whole that checked out (embeddings): ``inputs`` vectors of
    ``dimensions`` numbers each, and the server's count of input tokens
    (``usage.prompt_tokens``; None when not given)."""

    inputs: int
    dimensions: int
    prompt_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class AnswerFault:
    """An answer read whole that did not: ``message`` says what was wrong;
    ``server_error`` when the server itself said so (an error object in a 2xx answer)
    rather than a broken answer."""

    message: str
    server_error: bool = False


# A sample -> the check of its whole (2xx) answer's bytes
AnswerCheck = Callable[[SampleLike], Callable[[bytes], "WholeAnswer | AnswerFault"]]


class RunReader(ABC):
    """A stream's event reader that learns the stream's common event and then takes a
    read's run of them at once (:class:`~pytest_llmperf.apis.chunk_shapes.ChunkReader`):
    the client's reading loop asks it for runs before it reads event by event."""

    __slots__ = ()

    @abstractmethod
    def __call__(self, data: str) -> ChunkInfo: ...

    @property
    @abstractmethod
    def text_info(self) -> ChunkInfo | None:
        """What a run's events mean, once the common event is learned."""

    @abstractmethod
    def plain_run(self, payloads: list[str], start: int) -> int:
        """How many of ``payloads`` from ``start`` on are the common event."""

    @abstractmethod
    def sse_run(self, read: bytes) -> int:
        """How many common events a read holds if it is nothing but them, else 0."""


def _no_headers(api_key: str | None) -> dict[str, str]:
    return {}


def _no_text(data: str) -> str:
    return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiFormat:
    """One API's wire format, as the client speaks it.

    ``name``: the registry's key (an :class:`~pytest_llmperf.apis.names.Api` value, or
    a registered format's own name; ``title`` what ``--llm-api``'s help says of it
    beside its name, if anything). ``path``: under the base URL, which ends in
    ``/v1``. ``streams_tokens``: the answer is an SSE stream of token events (ttft,
    ttfo, tpot and itl mean something); else one JSON answer read whole and checked
    (:attr:`answer_check`). ``takes_images``: a sample's images go out with its user
    turn. ``field_rules``: which optional fields its bodies carry.

    ``build_body`` builds a request's JSON body. ``event_reader`` gives the reader of
    one stream's events (called once per request: a new object where the reader
    learns its stream, else one shared function); it also reads a whole answer of a
    server that ignored ``stream: true``. ``finish_ends``: a ``finish_reason`` ends
    the stream (chat, completions); otherwise only the terminal event (``done``),
    the finish riding on an earlier event. ``stream_end`` names what ends a stream,
    for the message of a stream cut before it. ``answer_text`` gives the answer
    text of one event (what a collected reply is made of); ``read_output`` an
    event's piece of the reply for output validation (None: nothing to collect).
    ``headers`` adds the format's own request headers, given the API key.
    ``contract_fields`` names the request fields a workload's output contract sets in
    this format (``structured``, ``tools``, ``greedy``): what ``extra_body`` may not
    set too, and which contracts the format can honour at all.
    """

    name: str
    path: str
    build_body: BodyBuilder
    title: str = ""  # what --llm-api's help says of it beside its name ("OpenAI Responses")
    streams_tokens: bool = True
    takes_images: bool = False
    field_rules: FieldRules = EVERY_FIELD
    event_reader: Callable[[], EventReader] | None = None
    finish_ends: bool = False
    stream_end: str = "its terminal event"
    answer_text: Callable[[str], str] = _no_text
    read_output: OutputReader | None = None
    answer_check: AnswerCheck | None = None
    headers: Callable[[str | None], dict[str, str]] = _no_headers
    contract_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.streams_tokens and self.event_reader is None:
            raise ValueError(f"API {self.name!r} streams tokens: it needs an event_reader")
        if not self.streams_tokens and self.answer_check is None:
            raise ValueError(f"API {self.name!r} streams no tokens: it needs an answer_check")

    @property
    def collects_output(self) -> bool:
        """Whether replies of this format can be collected (not embeddings: they
        generate none)."""
        return self.read_output is not None
