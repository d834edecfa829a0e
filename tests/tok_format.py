"""The made-up "tok" API's module, as docs/extending.md ("Adding an API") shows it.

A request is ``{"model", "say", "upto"}`` to ``POST /v1/tok``; the answer streams one
SSE event ``tok <text>`` per token, then ``end``. The client's half only: the tests
register it (tests/client/test_made_up_api.py drives it through the client and the
load generator; tests/sim/test_made_up_api_served.py adds the simulator's half).
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.apis import ApiFormat, ChunkInfo, RequestFields
from pytest_llmperf.apis.fields import FieldRules, apply_extra
from pytest_llmperf.apis.samples import SampleLike

__all__ = ["TOK"]

_TOKEN = ChunkInfo(True, True, False, True)  # a token event of answer text
_BLANK = ChunkInfo(True, False, False, False)  # a token event of an empty piece
_END = ChunkInfo(done=True)


def build_body(model: str, sample: SampleLike, fields: RequestFields) -> dict[str, Any]:
    """The request: the prompt to ``say`` and the output length as ``upto``."""
    body: dict[str, Any] = {"model": model, "say": sample.prompt, "upto": sample.max_tokens}
    return apply_extra(body, sample, fields, ignore_eos=False)


def read_event(data: str) -> ChunkInfo:
    """``tok <text>`` is a token; ``end`` ends the stream; anything else is malformed."""
    if data.startswith("tok "):
        return _TOKEN if len(data) > 4 else _BLANK
    if data == "end":
        return _END
    raise ValueError(f"not a tok event: {data[:40]!r}")


def answer_text(data: str) -> str:
    return data[4:] if data.startswith("tok ") else ""


TOK = ApiFormat(
    name="tok",
    path="/tok",
    build_body=build_body,
    field_rules=FieldRules(frozenset(), "upto"),  # no negotiated fields
    event_reader=lambda: read_event,
    stream_end="end",
    answer_text=answer_text,
)
