"""The one table of wire formats, keyed by the API's name: what every layer asks.

Each API's module defines its :class:`~pytest_llmperf.apis.format.ApiFormat`;
:data:`API_FORMATS` holds them in ``--llm-api``'s order. Whatever validates or
dispatches on an API name asks here (``parse_api``, ``--llm-api``'s choices, the
endpoint, the client's request building and reading), so a format added with
:func:`register` (a plugin's own API, or a test's made-up one) is accepted and driven
like the built-in ones. A new built-in API is a module and a line in
:data:`API_FORMATS` (docs/extending.md, "Adding an API").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pytest_llmperf.apis.chat import CHAT
from pytest_llmperf.apis.completions import COMPLETIONS
from pytest_llmperf.apis.embeddings import EMBEDDINGS
from pytest_llmperf.apis.events import ChunkInfo
from pytest_llmperf.apis.fields import DEFAULT_FIELDS, RequestFields
from pytest_llmperf.apis.format import ApiFormat
from pytest_llmperf.apis.messages import MESSAGES
from pytest_llmperf.apis.names import Api, extend_api, withdraw_api
from pytest_llmperf.apis.responses import RESPONSES
from pytest_llmperf.apis.samples import SampleLike
from pytest_llmperf.errors import LlmPerfUsageError

__all__ = [
    "API_FORMATS",
    "API_PATHS",
    "IMAGE_APIS",
    "TOKEN_STREAM_APIS",
    "answer_text_for",
    "api_choices",
    "api_format",
    "api_names",
    "build_payload",
    "chunk_parser",
    "parse_api",
    "register",
    "unregister",
]

# The table: one line per built-in format, in --llm-api's order. A name that is no member
# of Api (a format added here without one) gets an Api value all the same.
_FORMATS: dict[str, ApiFormat] = {
    extend_api(fmt.name): fmt for fmt in (CHAT, COMPLETIONS, RESPONSES, MESSAGES, EMBEDDINGS)
}
_BUILT_IN = frozenset(_FORMATS)
# Every format, by name, in --llm-api's order (registered ones after the built-in ones).
API_FORMATS: Mapping[str, ApiFormat] = MappingProxyType(_FORMATS)


class _Paths(Mapping[str, str]):
    """Each format's path under the base URL (which ends in /v1), by name: a live view."""

    def __getitem__(self, name: str) -> str:
        return _FORMATS[name].path

    def __iter__(self) -> Any:
        return iter(_FORMATS)

    def __len__(self) -> int:
        return len(_FORMATS)


API_PATHS: Mapping[str, str] = _Paths()
# The built-in APIs whose answers stream token events: ttft, ttfo, tpot, itl mean something.
TOKEN_STREAM_APIS = frozenset(Api(f.name) for f in _FORMATS.values() if f.streams_tokens)
# The built-in APIs whose prompts may carry images (content parts of a user turn).
IMAGE_APIS = frozenset(Api(f.name) for f in _FORMATS.values() if f.takes_images)


def api_names() -> tuple[str, ...]:
    """Every API a run may drive, in ``--llm-api``'s order."""
    return tuple(_FORMATS)


def api_choices() -> str:
    """``--llm-api``'s choices in words: ``chat, ..., messages (Anthropic Messages) or
    embeddings``."""
    named = [f"{f.name} ({f.title})" if f.title else str(f.name) for f in _FORMATS.values()]
    return " or ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)


def parse_api(value: object, *, where: str) -> Api:
    """``value`` as an :class:`Api` (a registered format's name included); anything else
    is a usage error naming ``where``."""
    if isinstance(value, str) and value in _FORMATS:
        return Api(value)
    raise LlmPerfUsageError(f"must be one of {', '.join(_FORMATS)}, got {value!r}", where=where)


def api_format(api: str) -> ApiFormat:
    """The format named ``api``; ``LlmPerfUsageError`` for a name no format has."""
    fmt = _FORMATS.get(api)
    if fmt is None:
        raise LlmPerfUsageError(f"api must be one of {', '.join(_FORMATS)}, got {api!r}")
    return fmt


def register(fmt: ApiFormat, *, replace: bool = False) -> ApiFormat:
    """Add ``fmt`` to the table (``replace``: over a format of its name); returns it, so a
    module may write ``FORMAT = register(ApiFormat(...))``."""
    if fmt.name in _FORMATS and not replace:
        raise ValueError(f"an API named {fmt.name!r} is registered already")
    extend_api(fmt.name)
    _FORMATS[fmt.name] = fmt
    return fmt


def unregister(name: str) -> None:
    """Take the format ``name`` out of the table again (a test's made-up one)."""
    if name in _BUILT_IN:
        raise ValueError(f"{name!r} is a built-in API")
    _FORMATS.pop(name, None)
    withdraw_api(name)


def build_payload(
    api: str, model: str, sample: SampleLike, fields: RequestFields = DEFAULT_FIELDS
) -> dict[str, Any]:
    """The request body of ``sample`` for ``api``, with only the fields ``fields`` allows."""
    return api_format(api).build_body(model, sample, fields)


def chunk_parser(api: str) -> Callable[[str], ChunkInfo]:
    """A new reader of one stream's events of ``api`` (or of a whole answer)."""
    reader = api_format(api).event_reader
    if reader is None:
        raise ValueError(f"API {api!r} streams no events")
    return reader()


def answer_text_for(api: str) -> Callable[[str], str]:
    """The function that gives the answer text of one event (or a whole answer) of ``api``:
    what a collected reply (``RequestRecord.reply``) is made of."""
    return api_format(api).answer_text
