"""Cutting prose windows of an exact token count from per-word token counts.

A model's tokenizer splits text into pre-tokens before it merges bytes, and
every tokenizer family in use (GPT-2/Llama-3 byte-level BPE, cl100k/o200k,
SentencePiece's metaspace) starts a pre-token at a space followed by a word.
So in a corpus whose words are separated by single spaces, the tokens of the
whole text are the tokens of each ``" word"`` laid end to end, and a window
that starts and ends at a word boundary has exactly the tokens of its words.

That turns "a prompt of exactly n tokens" into arithmetic on a table built
once per corpus and tokenizer (one count per distinct word), with no
tokenizer call when a sample is built: the load generator builds samples on
its hot path, and with ``--llm-tokenizer=server`` a call would be an HTTP
round trip. The one place the rule bends is the window's first word, which
is sent without its leading space (chat templates trim it anyway): its
stand-alone count is measured separately, and only words whose count is
known may start a window.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

__all__ = ["SegmentTable", "corpus_words", "start_candidates"]

CountMany = Callable[[Sequence[str]], list[int]]


def corpus_words(text: str) -> list[str]:
    """The words of ``text`` (whitespace-separated runs), as the table indexes them."""
    return text.split()


def start_candidates(words: Sequence[str], limit: int | None = None) -> list[str]:
    """Distinct words that may start a window: they begin with a letter.

    A letter first keeps a chat template's junction (``"...\\n\\n" + content``)
    the same for every window. ``limit`` keeps the most frequent ones (fewer
    calls when counting is an HTTP round trip); the corpus's first word is
    always kept so ``window(corpus, 0, n)`` can start where the text starts.
    """
    counts = Counter(w for w in words if w[:1].isalpha())
    ranked = sorted(counts, key=lambda w: -counts[w])  # stable: first appearance breaks ties
    if limit is not None:
        ranked = ranked[:limit]
    if words and words[0][:1].isalpha() and words[0] not in ranked:
        ranked.append(words[0])
    return ranked


@dataclass(frozen=True)
class SegmentTable:
    """Where each word of a cyclic corpus starts, in tokens, and how long each first word is.

    The corpus repeats forever (``text text text ...``) so windows of any
    length exist. ``offsets[i]`` is the token offset of word ``i`` within one
    cycle of ``period`` tokens; ``bare[i]`` is the stand-alone token count of
    word ``i`` without its leading space (``None``: not a window start).
    """

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    offsets: tuple[int, ...]
    period: int
    bare: tuple[int | None, ...]
    word_at: dict[int, int]

    @classmethod
    def build(
        cls,
        text: str,
        spaced: dict[str, int] | Sequence[int],
        bare: dict[str, int],
    ) -> SegmentTable:
        """From ``spaced`` (tokens of ``" " + word``, per distinct word or per position)
        and ``bare`` (tokens of a word alone, for the words that may start a window)."""
        normal = " ".join(text.split())
        words = corpus_words(normal)
        if not words:
            raise ValueError("corpus has no words")
        starts: list[int] = []
        ends: list[int] = []
        pos = 0
        for w in words:
            starts.append(pos)
            ends.append(pos + len(w))
            pos += len(w) + 1
        if isinstance(spaced, dict):
            per_word = [spaced[w] for w in words]
        else:
            per_word = list(spaced)
            if len(per_word) != len(words):
                raise ValueError(f"{len(per_word)} counts for {len(words)} words")
        offsets: list[int] = []
        total = 0
        for c in per_word:
            offsets.append(total)
            total += c
        return cls(
            text=normal,
            starts=tuple(starts),
            ends=tuple(ends),
            offsets=tuple(offsets),
            period=total,
            bare=tuple(bare.get(w) for w in words),
            word_at={off: i for i, off in enumerate(offsets)},
        )

    @classmethod
    def measure(cls, text: str, count_many: CountMany, *, limit: int | None = None) -> SegmentTable:
        """Build by counting every distinct ``" word"`` and each start word with ``count_many``."""
        words = corpus_words(" ".join(text.split()))
        distinct = list(dict.fromkeys(words))
        spaced = dict(zip(distinct, count_many([" " + w for w in distinct]), strict=True))
        firsts = start_candidates(words, limit)
        bare = dict(zip(firsts, count_many(firsts), strict=True))
        return cls.build(text, spaced, bare)

    def __len__(self) -> int:
        return len(self.starts)

    def candidates(self, start: int, n: int) -> Iterator[str]:
        """Windows of ``n`` tokens by this table, trying start words from ``start`` on.

        Each is the text from a start word to the end of a later word; the
        first yielded is the one nearest ``start``. Yields nothing when no
        word boundary lands exactly ``n`` tokens on (only for tiny ``n``).
        """
        m = len(self.starts)
        if n <= 0 or self.period <= 0:
            return
        first = start % m
        for step in range(m):
            i = (first + step) % m
            head = self.bare[i]
            if head is None or head > n:
                continue
            # tokens after the first word come in whole " word" segments
            target = (self.offsets[i + 1] if i + 1 < m else self.period) + (n - head)
            cycles, rest = divmod(target, self.period)
            j = self.word_at.get(rest)
            if j is None:
                continue
            end = cycles * m + j  # absolute index of the first word *after* the window
            if end <= i:
                continue
            yield self._text(i, end)

    def _text(self, first: int, end: int) -> str:
        """Words ``first .. end-1`` of the endless ``text text text ...``, joined by spaces."""
        m = len(self.starts)
        cycle, last = divmod(end - 1, m)
        if cycle == 0:
            return self.text[self.starts[first] : self.ends[last]]
        middle = (" " + self.text) * (cycle - 1)
        return f"{self.text[self.starts[first] :]}{middle} {self.text[: self.ends[last]]}"
