"""What one stream event (or a whole answer) means for the measurement, in every API.

Each format's reader (:mod:`pytest_llmperf.apis.chat`, ...) turns one SSE ``data``
payload into a :class:`ChunkInfo`; the client's reading loop
(:mod:`pytest_llmperf.client.request`) applies it to the request's record without
knowing which API it came from. Also here: the fast JSON object reader the typed-event
readers start from (:func:`load_event`), and an error body in words
(:func:`error_message`), which every API's failures and the client's HTTP errors use.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["SCAN", "ChunkInfo", "error_message", "load_event"]


@dataclass(slots=True)
class ChunkInfo:
    """What one decoded stream event means for the measurement.

    ``event`` is true for a token event (docs/measurement.md, "Token events"): a
    chunk whose delta carries ``content``, ``reasoning_content``/``reasoning``
    or ``tool_calls`` (an empty string included: vLLM streams a token that
    ends inside a multi-byte character as ``"content": ""``), or a
    completions ``text``; not the role-only opening chunk, not a chunk with
    only ``finish_reason``/``usage``, and not an empty string riding on the
    chunk that carries ``finish_reason`` (llama.cpp ends so). ``answer`` is
    true when the event carries non-empty answer content or a tool call
    (``ttfo``); ``reasoning`` when it carries reasoning text; ``output`` when
    it carries a non-empty piece of the reply — answer text, reasoning text or
    tool-call arguments — which an empty-string delta never is (a stream with no
    such piece is a *blank* reply where a token event or the usage says tokens were
    generated, ``empty_response`` where nothing does). ``blank_finish`` marks
    an empty string beside the finish: llama.cpp ends so, and vLLM when its last
    token is a partial character; only the usage at the end of the stream can
    tell the two apart (:mod:`pytest_llmperf.client.request` settles it there).
    ``timing`` is the server's own timing object of the request (vLLM's
    ``metrics``, llama.cpp's ``timings``; :mod:`pytest_llmperf.client.server_timing`),
    looked for only on a chunk with ``usage`` or a ``finish_reason``: the end of a
    stream, or a whole answer.
    """

    event: bool = False
    answer: bool = False
    reasoning: bool = False
    output: bool = False
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    timing: dict[str, Any] | None = None
    error: str | None = None
    done: bool = False
    blank_finish: bool = False


_DECODER = json.JSONDecoder()
# The C scanner; raises StopIteration where raw_decode raises. A real attribute of every
# JSONDecoder (set in __init__), missing from typeshed's stubs: hence the ignore.
SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def load_event(data: str) -> dict[str, Any]:
    """One SSE ``data`` payload (or a whole answer) as a JSON object; ``ValueError`` for
    anything else (broken JSON, trailing data, a JSON value that is not an object).

    The typed-event APIs' parsers (Responses, Messages) start here: the C scanner
    first, as :func:`~pytest_llmperf.apis.chunks.parse_chunk` does, ``json.loads`` for
    its result or its error.
    """
    try:
        obj, end = SCAN(data, 0)
    except StopIteration:
        obj, end = json.loads(data), len(data)
    if end != len(data) and not data[end:].isspace():
        json.loads(data)  # raises "Extra data" with json's own message
    if obj.__class__ is not dict:
        raise ValueError(f"stream event is not a JSON object: {data[:80]!r}")
    event: dict[str, Any] = obj
    return event


def error_message(obj: Any) -> str:
    """The human message of an error body, or a short dump of what came.

    Knows the OpenAI shape (``{"error": {"message", "code"}}``), a bare
    ``{"error": "..."}``, and FastAPI/pydantic validation errors
    (``{"detail": [{"loc": [...], "msg": ...}]}``), which strict servers and
    gateways send for a field they do not accept.
    """
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or ""
            if isinstance(msg, list):
                msg = _validation_errors(msg)
            code = err.get("code") or err.get("type") or ""
            return f"{msg} ({code})"[:300] if code and msg else str(msg or code or err)[:300]
        if isinstance(err, str):
            return err[:300]
    return str(obj)[:300]


def _validation_errors(items: list[Any]) -> str:
    """pydantic's error list as ``body.ignore_eos: Extra inputs are not permitted; ...``."""
    parts = []
    for item in items[:5]:
        if isinstance(item, dict):
            loc = ".".join(str(p) for p in item.get("loc") or ())
            parts.append(f"{loc}: {item.get('msg', '')}" if loc else str(item.get("msg", item)))
        else:
            parts.append(str(item))
    return "; ".join(parts)
