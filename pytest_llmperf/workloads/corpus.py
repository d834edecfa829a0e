"""Real text to build prompts from.

Prompts made of repeated filler ("a a a …") are easy for a server to cache
and compress and are unlike real traffic; prompts cut from prose behave like
user text. The corpus is written for this project (``corpus.txt``), so it
ships with the package and nothing is downloaded.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from pytest_llmperf.tokens import TOKEN_PATTERN

__all__ = ["Corpus", "default_corpus"]


class Corpus:
    """A text with the character span of each approximate token.

    ``window(start, n)`` returns a slice of the original text holding exactly
    ``n`` approximate tokens, wrapping around the end, so prompts keep their
    punctuation and spacing and ``count_tokens(window) == n`` always.
    """

    def __init__(self, text: str) -> None:
        self.text = " ".join(text.split())
        self._spans = [m.span() for m in TOKEN_PATTERN.finditer(self.text)]
        if not self._spans:
            raise ValueError("corpus has no tokens")

    def __len__(self) -> int:
        return len(self._spans)

    def window(self, start: int, n: int) -> str:
        if n <= 0:
            return ""
        pieces: list[str] = []
        total = len(self._spans)
        start %= total
        while n > 0:
            take = min(n, total - start)
            first = self._spans[start][0]
            last = self._spans[start + take - 1][1]
            pieces.append(self.text[first:last])
            n -= take
            start = 0
        return " ".join(pieces)


@lru_cache(maxsize=1)
def default_corpus() -> Corpus:
    return Corpus(resources.files(__package__).joinpath("corpus.txt").read_text("utf-8"))
