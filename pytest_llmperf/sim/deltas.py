"""How a request's tokens are cut into deltas: reasoning first, some empty, a separate finish.

The plain simulator streams one answer word per chunk with ``finish_reason`` on
the last one. Real servers differ in ways a client must survive, and the
project has to be tested against them without a GPU:

- reasoning models (vLLM with a reasoning parser, OpenAI's o-series) stream
  their first tokens as ``reasoning_content`` (or ``reasoning``) deltas and
  only then the answer as ``content``; the completions API has no such field,
  so there the reasoning is plain ``text``, as vLLM sends it;
- vLLM sends ``"content": ""`` for a token that ends inside a multi-byte UTF-8
  character, and the held-back bytes arrive with the next delta: every token
  still has its own chunk at its own time, only some carry no text (the last
  one too, ``finish_reason`` and all: its incomplete bytes are never sent);
- OpenAI, SGLang, TGI and llama.cpp put ``finish_reason`` on a chunk of its own
  with an empty delta after the last token.

Everything random is drawn once per request (seeded by simulator seed and
request index, so a failing test replays), and every chunk is built from
pre-rendered bytes (``ChunkWriter.token_template``) around the pre-encoded
words: the emission path does one byte lookup and one concatenation per
token, and nothing at all when the profile turns these modes off
(:func:`plan_deltas` returns ``None``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Protocol

from .profiles import Profile
from .text import WORDS, WORDS_JSON, token_index
from .wire import ChunkWriter

__all__ = [
    "ChunkSource",
    "DeltaPlan",
    "ShapedChunks",
    "plain_plan",
    "plan_deltas",
    "split_text",
]


class ChunkSource(Protocol):
    """Renders a response's bytes token by token, in order: :class:`ShapedChunks` (chat,
    completions) and the typed event streams of events.py (Responses, Messages)."""

    def clip(self, i: int, size: int) -> int:
        """``size`` cut so that a chunk starting at token ``i`` stays in one part."""

    def chunk(self, i: int, size: int = 1) -> bytes:
        """The bytes for tokens ``i … i+size-1`` (``b""``: nothing to send for them)."""


@dataclass(frozen=True)
class DeltaPlan:
    """The delta shape of one request's ``n`` output tokens.

    Tokens ``0 … n_reasoning-1`` are reasoning. ``empty[k]`` is 1 when token
    ``k``'s chunk carries an empty string; its text then moves to the next
    non-empty chunk. The last reasoning token before an answer is never empty,
    so no text moves across the parts; the very last token may be, and then the
    text held back is never sent, as vLLM never sends a trailing partial
    character (the streamed text is a word or more short of ``completion_tokens``)
    — unless every token would be empty: then the last is not, as a partial
    character's bytes come with a later token. A *blank* reply (``blank``,
    ``blank_reply_rate``) is one whose every token is empty: a random-weight model
    repeating a token that decodes to nothing; its usage still counts every token.
    """

    n: int
    n_reasoning: int
    empty: bytes
    separate_finish: bool
    blank: bool = False


def plan_deltas(profile: Profile, seed: int, index: int, n_out: int, api: str) -> DeltaPlan | None:
    """The delta plan of request ``index``, or None when the profile shapes nothing."""
    p = profile
    if not (
        p.reasoning_tokens or p.empty_delta_rate or p.separate_finish_chunk or p.blank_reply_rate
    ):
        return None
    # The completions API has no reasoning field: reasoning streams as text (vLLM).
    n_reasoning = min(p.reasoning_tokens, n_out) if api != "completions" else 0
    if p.blank_reply_rate and random.Random(f"blank:{seed}:{index}").random() < p.blank_reply_rate:
        return DeltaPlan(
            n=n_out,
            n_reasoning=n_reasoning,
            empty=b"\x01" * n_out,
            separate_finish=p.separate_finish_chunk,
            blank=True,
        )
    if p.empty_delta_rate:
        rand = random.Random(f"empty:{seed}:{index}").random
        rate = p.empty_delta_rate
        mask = bytearray(1 if rand() < rate else 0 for _ in range(n_out))
        if 0 < n_reasoning < n_out:
            mask[n_reasoning - 1] = 0
        if mask and all(mask):  # the bytes of a partial character come with a later token:
            mask[-1] = 0  # the last carries what was held back (blank replies: blank_reply_rate)
        empty = bytes(mask)
    else:
        empty = bytes(n_out)
    return DeltaPlan(
        n=n_out,
        n_reasoning=n_reasoning,
        empty=empty,
        separate_finish=p.separate_finish_chunk,
    )


def plain_plan(n_out: int) -> DeltaPlan:
    """The plan of vLLM's plain shape (no reasoning, no empty deltas, finish on the last
    token): for a response whose tokens' text is given (outputs.py) but not shaped."""
    return DeltaPlan(n=n_out, n_reasoning=0, empty=bytes(n_out), separate_finish=False)


def split_text(
    plan: DeltaPlan | None, salt: int, n_out: int, pieces: tuple[bytes, ...] | None = None
) -> tuple[str | None, str]:
    """``(reasoning, answer)`` text of a whole response (non-streaming bodies); each
    token's text from ``pieces`` when given (outputs.py), else the filler words."""
    if plan is not None and plan.blank:  # every token decodes to nothing
        return None, ""
    if pieces is not None:
        words = [json.loads(b'"' + p + b'"') for p in pieces[:n_out]]
    else:
        words = [WORDS[token_index(j, salt)] for j in range(n_out)]
    if plan is None or not plan.n_reasoning:
        return None, "".join(words)
    return "".join(words[: plan.n_reasoning]), "".join(words[plan.n_reasoning :])


class ShapedChunks:
    """The SSE bytes of one shaped response, token by token, in order.

    ``chunk(i, size)`` is the event(s) for tokens ``i … i+size-1`` (one token on
    the fast path; several when the multi-token fault groups them). It keeps the
    text held back by empty chunks, so it must be called in token order; a chunk
    never spans the reasoning/answer boundary (:meth:`clip`). The last token's
    bytes carry the ``finish_reason``, or are followed by a separate finish
    event with an empty delta.
    """

    __slots__ = (
        "empty",
        "finish_event",
        "head",
        "last_tail",
        "n",
        "n_reasoning",
        "pending",
        "pieces",
        "rhead",
        "salt",
        "tail",
    )

    def __init__(
        self,
        w: ChunkWriter,
        plan: DeltaPlan,
        salt: int,
        finish_reason: str,
        pieces: tuple[bytes, ...] | None = None,
    ) -> None:
        self.head, self.tail, self.last_tail = w.token_template(finish_reason)
        self.rhead = (
            w.token_template(finish_reason, reasoning=True)[0] if plan.n_reasoning else self.head
        )
        self.finish_event = w.finish_chunk(finish_reason) if plan.separate_finish else None
        self.n = plan.n
        self.n_reasoning = plan.n_reasoning
        self.empty = plan.empty
        self.salt = salt
        self.pending = b""  # JSON-escaped text held back by empty chunks (no quotes)
        self.pieces = pieces  # each token's JSON-escaped text (outputs.py); None: the words

    def clip(self, i: int, size: int) -> int:
        """``size`` cut so that a chunk starting at token ``i`` stays in one part."""
        r = self.n_reasoning
        return min(size, r - i) if i < r else size

    def chunk(self, i: int, size: int = 1) -> bytes:
        """The bytes to write for tokens ``i … i+size-1``."""
        pieces = self.pieces
        if size == 1:
            if pieces is None:
                word = _WORDS_JSON[(self.salt + i * 7) % _NWORDS]  # text.token_index, inlined
            else:
                word = b'"' + pieces[i] + b'"'
            if self.empty[i]:
                self.pending += word[1:-1]
                payload = b'""'
            elif self.pending:
                payload = b'"' + self.pending + word[1:]
                self.pending = b""
            else:
                payload = word
        else:
            out = b""
            pending = self.pending
            empty = self.empty
            for k in range(i, i + size):
                if pieces is None:
                    pending += _WORDS_JSON[(self.salt + k * 7) % _NWORDS][1:-1]
                else:
                    pending += pieces[k]
                if not empty[k]:
                    out += pending
                    pending = b""
            self.pending = pending
            payload = b'"' + out + b'"'
        end = i + size
        head = self.rhead if i < self.n_reasoning else self.head
        if end < self.n:
            return head + payload + self.tail
        if self.finish_event is None:
            return head + payload + self.last_tail
        return head + payload + self.tail + self.finish_event


_WORDS_JSON = WORDS_JSON
_NWORDS = len(WORDS_JSON)
