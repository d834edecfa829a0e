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

The plan is drawn here; each format renders it (``ShapedChunks`` for chat and
completions, the typed events of the Responses and Messages APIs: the server halves
in :mod:`pytest_llmperf.apis`). Everything random is drawn once per request
(seeded by simulator seed and request index, so a failing test replays), and
every chunk is built from
pre-rendered bytes (``ChunkWriter.token_template``) around the pre-encoded
words: the emission path does one byte lookup and one concatenation per
token, and nothing at all when the profile turns these modes off
(:func:`plan_deltas` returns ``None``).
"""

from __future__ import annotations

import random

from ..apis.served import ChunkSource, ServedTokens
from ..apis.served_chunks import ShapedChunks, split_text
from ..apis.server_table import served_half
from ..apis.server_wire import DeltaPlan, plain_plan
from .profiles import Profile

__all__ = [
    "ChunkSource",
    "DeltaPlan",
    "ShapedChunks",
    "plain_plan",
    "plan_deltas",
    "split_text",
]


def plan_deltas(profile: Profile, seed: int, index: int, n_out: int, api: str) -> DeltaPlan | None:
    """The delta plan of request ``index``, or None when the profile shapes nothing."""
    p = profile
    if not (
        p.reasoning_tokens or p.empty_delta_rate or p.separate_finish_chunk or p.blank_reply_rate
    ):
        return None
    # The completions API has no reasoning field: reasoning streams as text (vLLM).
    half = served_half(api)
    reasons = not isinstance(half, ServedTokens) or half.reasons
    n_reasoning = min(p.reasoning_tokens, n_out) if reasons else 0
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
