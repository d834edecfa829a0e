"""The simulator's output text: one approximate token per streamed token.

Each generated token is a word with a leading space, so ``count_tokens`` of the
concatenated output equals ``completion_tokens`` (see pytest_llmperf.tokens).
The words cycle through a fixed list from a per-request offset: cheap,
deterministic, and readable in a captured stream. Here, below every format's
server half, because each format frames these words in its own chunks or events.
"""

from __future__ import annotations

import json

__all__ = ["WORDS", "WORDS_JSON", "token_index", "token_text"]

_TEXT = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will "
    "can more model server token batch cache queue load time step block prefix decode prefill "
    "stream latency"
)
WORDS = tuple(" " + w for w in _TEXT.split())
WORDS_JSON = tuple(json.dumps(w).encode() for w in WORDS)  # as a chunk carries them


def token_text(index: int, salt: int) -> str:
    """Text of output token ``index`` of a request whose offset is ``salt``."""
    return WORDS[token_index(index, salt)]


def token_index(index: int, salt: int) -> int:
    """Index in ``WORDS`` (and ``WORDS_JSON``) of ``token_text(index, salt)``."""
    return (salt + index * 7) % len(WORDS)
