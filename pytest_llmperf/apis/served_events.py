"""The typed event streams of the Responses and Messages APIs: what both share.

Chat streams one ``data:`` chunk per token; these two APIs stream named SSE events
(``event: TYPE`` then ``data: JSON``), most of which carry no token. Both adapters in
vLLM drop an empty delta (a token ending inside a multi-byte character): with
``empty_delta_rate`` the token still takes its time slot but sends no event, and its
text comes with the next delta — fewer events than ``output_tokens``, as on vLLM. An
output part opens with its first non-empty delta.

Like :class:`~pytest_llmperf.apis.served_chunks.ShapedChunks`, each format's event
renderer (the server halves of :mod:`~pytest_llmperf.apis.responses` and
:mod:`~pytest_llmperf.apis.messages`) renders the bytes for tokens ``i … i+size-1``
in order (``chunk``; ``b""`` when nothing is sent), so both token paths of the
simulator write them unchanged; the per-token delta is one concatenation of
pre-rendered bytes around the pre-encoded word. :class:`TokenText` is the text each
token sends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.apis.filler_text import WORDS_JSON
from pytest_llmperf.apis.served import AnswerPlan, ChunkSource
from pytest_llmperf.apis.server_wire import DeltaPlan, ToolCall

__all__ = ["EventAnswer", "EventArgs", "TokenText", "event_args", "sse", "unescape"]

_WORDS_JSON = WORDS_JSON
_NWORDS = len(WORDS_JSON)


def sse(event: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"


def unescape(escaped: bytes) -> str:
    """Text from JSON-escaped bytes (no quotes), as the pre-encoded words carry it."""
    text: str = json.loads(b'"' + escaped + b'"')
    return text


@dataclass(frozen=True, slots=True)
class EventArgs:
    """What every event renderer starts from: the model named in its events, the delta
    shapes, the filler words' offset, the output tokens, the finish reason, each token's
    text where it is not the filler words, and the tool call it makes."""

    model: str
    deltas: DeltaPlan | None
    salt: int
    n: int
    finish: str
    pieces: tuple[bytes, ...] | None = None
    tool: ToolCall | None = None


class TokenText:
    """The text each token sends, honouring a plan's empty deltas; in token order.

    ``pieces`` (outputs.py) give each token's text when it is not the filler words
    (JSON, a tool call's arguments, a changed output); ``tool`` is the tool call whose
    header takes token ``tool.at`` (it opens the call's item or block, no delta)."""

    def __init__(self, args: EventArgs) -> None:
        plan, tool = args.deltas, args.tool
        self.model = args.model
        self.finish = args.finish
        self.n = args.n
        self.n_reasoning = plan.n_reasoning if plan is not None else 0
        self.empty = plan.empty if plan is not None and any(plan.empty) else None
        self.salt = args.salt
        self.pending = b""  # JSON-escaped text held back by empty deltas (no quotes)
        self.pieces = args.pieces
        self.tool = tool
        self.tool_at = tool.at if tool is not None else -1

    def clip(self, i: int, size: int) -> int:
        """``size`` cut so that tokens ``i … i+size-1`` stay in one part (a tool call's
        header token alone)."""
        r = self.n_reasoning
        if i < r:
            return min(size, r - i)
        return 1 if i == self.tool_at else size

    def _text(self, i: int, size: int) -> bytes:
        """The JSON-escaped text tokens ``i … i+size-1`` send (empty: send nothing)."""
        empty = self.empty
        salt = self.salt
        pieces = self.pieces
        if empty is None and size == 1:
            if pieces is not None:
                return pieces[i]
            return _WORDS_JSON[(salt + i * 7) % _NWORDS][1:-1]  # text.token_index, inlined
        pending = self.pending
        out = b""
        for k in range(i, i + size):
            if pieces is not None:
                pending += pieces[k]
            else:
                pending += _WORDS_JSON[(salt + k * 7) % _NWORDS][1:-1]
            if empty is None or not empty[k]:
                out += pending
                pending = b""
        self.pending = pending
        return out


def event_args(plan: AnswerPlan) -> EventArgs:
    """What the event renderer of ``plan``'s answer starts from."""
    out = plan.out
    return EventArgs(
        plan.parsed.model, plan.deltas, out.salt, out.n, out.finish, out.pieces, out.tool
    )


class EventAnswer:
    """An answer whose every token is a typed event: its renderer (``events``) is the
    shaped source of each token's bytes; there is no plain chunk and no ``[DONE]``."""

    writer = None

    def __init__(self, events: ChunkSource) -> None:
        self.events = self.shaped = events
