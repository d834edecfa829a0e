"""Prompts built from hash-id blocks, so equal ids share text as production prompts did.

A Mooncake-style row names its prompt's blocks by ``hash_ids``: two rows
whose first ``k`` ids are equal had the same first ``k`` blocks of prompt
(``block_size`` tokens each, 512 in Mooncake's traces), which is what a
server's prefix cache reuses. Here block ``h`` is a text of ``block_size``
tokens made deterministically from ``(seed, h)``; a row's prompt is its
blocks joined by single spaces, cut at its input length (the last block
partial), and rows longer than their blocks get fresh filler for the rest.

Exact counts across block boundaries rest on the same fact as exact windows
(:mod:`..segments`): in text made of corpus words joined by single spaces,
every tokenizer family in use starts a pre-token at each ``" word"``, so
the text's tokens are its first word's tokens alone plus each later
``" word"``'s tokens. :class:`WordCosts` holds those per-word counts (the
tokenizer's own :class:`~..segments.SegmentTable` where it has one), and a
prompt's count is arithmetic on them: no tokenizer call when a sample is
built. A block's count as the prompt's first block differs from its count
after a space by its first word (alone vs after a space); the rest of the
prompt absorbs the difference.

Blocks are runs of a few dozen tokens of contiguous prose, each starting at
a random corpus word, the first two runs short: the bundled corpus holds a
few hundred words, so one contiguous window per block (or long opening runs)
would make distinct ids share their first tokens, and a prefix cache would
count hits production never had.
"""

from __future__ import annotations

import random
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.workloads.corpus import Corpus
from pytest_llmperf.workloads.segments import SegmentTable, corpus_words, start_candidates
from pytest_llmperf.workloads.tokenizer import Tokenizer

__all__ = [
    "OPENING_RUNS",
    "OPENING_TOKENS",
    "RUN_TOKENS",
    "Block",
    "BlockPrompts",
    "WordCosts",
    "word_costs",
]

RUN_TOKENS = (16, 48)  # each run of contiguous prose holds this many tokens (uniform)
# ... except the first two, short (~10^10 distinct openings): two distinct ids seldom share
# more than a few opening tokens, less than a server's cache block (a prefix cache would
# count longer shared openings as hits production never had)
OPENING_RUNS, OPENING_TOKENS = 2, (1, 8)
CACHED_BLOCKS = 4096  # blocks kept (LRU); ~2.5 kB each at 512 tokens

Segment = tuple[int, int]  # words [p, q) of the doubled corpus, 0 <= p < m, p < q <= p + m


@dataclass(frozen=True)
class WordCosts:
    """Per-word token counts of a corpus for one tokenizer, laid out for arithmetic.

    Words are indexed over the corpus written twice (``2m`` words), so a run
    may wrap past the end. ``cum[j]`` is the tokens of words ``0..j-1`` each
    after a space; ``bare[i]`` is word ``i`` alone (``None``: it may not start
    a prompt: only words starting with a letter do, as in exact windows).
    """

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    cum: tuple[int, ...]
    bare: tuple[int | None, ...]
    heads: tuple[int, ...]  # word indices (< m) that may start a prompt, ascending
    by_cost: dict[int, tuple[int, ...]]  # tokens after a space -> words (< m) costing that
    m: int

    @classmethod
    def build(
        cls, words: Sequence[str], spaced: Sequence[int], bare: Sequence[int | None]
    ) -> WordCosts:
        m = len(words)
        if m == 0 or any(c < 1 for c in spaced):
            raise ValueError("a corpus of words that each cost at least one token is needed")
        doubled = [*words, *words]
        starts: list[int] = []
        ends: list[int] = []
        pos = 0
        for w in doubled:
            starts.append(pos)
            ends.append(pos + len(w))
            pos += len(w) + 1
        cum = [0]
        for c in [*spaced, *spaced]:
            cum.append(cum[-1] + c)
        by_cost: dict[int, list[int]] = {}
        for i, c in enumerate(spaced):
            by_cost.setdefault(c, []).append(i)
        heads = tuple(i for i, b in enumerate(bare) if b is not None)
        if not heads:
            raise ValueError("no corpus word may start a prompt")
        return cls(
            text=" ".join(doubled),
            starts=tuple(starts),
            ends=tuple(ends),
            cum=tuple(cum),
            bare=tuple(bare),
            heads=heads,
            by_cost={c: tuple(v) for c, v in sorted(by_cost.items())},
            m=m,
        )

    # -- costs and texts -------------------------------------------------------------

    def cost(self, seg: Segment, first: bool) -> int:
        """Tokens of ``seg``: first in the prompt (its first word alone) or after a space."""
        p, q = seg
        return self.alone(p, first) + self.cum[q] - self.cum[p + 1]

    def text_of(self, segments: Sequence[Segment]) -> str:
        return " ".join(self.text[self.starts[p] : self.ends[q - 1]] for p, q in segments)

    # -- cutting -----------------------------------------------------------------------

    def _end(self, after: int, budget: int, limit: int) -> int:
        """The last ``q`` in ``after .. limit`` with ``cum[q] - cum[after] <= budget``."""
        return bisect_right(self.cum, self.cum[after] + budget, after, limit + 1) - 1

    def alone(self, i: int, first: bool) -> int:
        """Tokens of word ``i`` as the prompt's first word (``first``) or after a space."""
        if first:
            head = self.bare[i]
            assert head is not None
            return head
        return self.cum[i + 1] - self.cum[i]

    def _head(self, rng: random.Random, budget: int, first: bool) -> int:
        """A word that may start a prompt costing at most ``budget`` (the next one after
        a random place), else the cheapest one: a prompt is never empty."""
        heads = self.heads
        at = bisect_right(heads, rng.randrange(self.m))
        for k in range(len(heads)):
            i = heads[(at + k) % len(heads)]
            if self.alone(i, first) <= budget:
                return i
        return min(heads, key=lambda i: self.alone(i, first))

    @staticmethod
    def _run_tokens(rng: random.Random, k: int) -> int:
        """How many tokens run ``k`` of a text holds: the first ones are short."""
        return rng.randint(*(OPENING_TOKENS if k < OPENING_RUNS else RUN_TOKENS))

    def fill(
        self, rng: random.Random, n: int, *, head: bool, first: bool
    ) -> tuple[list[Segment], int]:
        """Runs of prose costing ``n`` tokens in all, and what they cost.

        ``head``: the first word must be one that may start a prompt;
        ``first``: it *is* the prompt's start (counted alone). The total is
        exactly ``n`` unless the tokenizer lacks words cheap enough to close
        the gap (none costs one token after a space) or, for a tiny ``n``,
        every word that may start a prompt costs more than ``n``.
        """
        segments: list[Segment] = []
        left = n
        if left <= 0:
            return segments, 0
        if head:
            p = self._head(rng, left, first)
            alone = self.alone(p, first)
            run = max(alone, min(left, self._run_tokens(rng, 0)))
            q = self._end(p + 1, run - alone, p + self.m)
            segments.append((p, q))
            left -= self.cost((p, q), first)
        while left > 0:
            run = min(left, self._run_tokens(rng, len(segments)))
            p = rng.randrange(self.m)
            q = self._end(p, run, p + self.m)
            if q == p:  # this word alone is longer than the run: a run of one word
                if self.cum[p + 1] - self.cum[p] > left:
                    break
                q = p + 1
            segments.append((p, q))
            left -= self.cum[q] - self.cum[p]
        while left > 0:  # close the gap word by word
            exact = self.by_cost.get(left)
            if exact:
                j = rng.choice(exact)
            else:
                cheaper = [c for c in self.by_cost if c < left]
                if not cheaper:
                    break
                j = rng.choice(self.by_cost[max(cheaper)])
            segments.append((j, j + 1))
            left -= self.cum[j + 1] - self.cum[j]
        return segments, n - left

    def truncate(
        self, segments: Sequence[Segment], budget: int, first: bool
    ) -> tuple[list[Segment], int]:
        """The longest word prefix of ``segments`` costing at most ``budget``, and its cost."""
        out: list[Segment] = []
        left = budget
        for k, (p, q) in enumerate(segments):
            alone = first and k == 0
            full = self.cost((p, q), alone)
            if full <= left:
                out.append((p, q))
                left -= full
                continue
            if alone:
                head = self.alone(p, True)
                if head > left:
                    break
                q2 = self._end(p + 1, left - head, q)
            else:
                q2 = self._end(p, left, q)
            if q2 > p:
                out.append((p, q2))
                left -= self.cost((p, q2), alone)
            break
        return out, budget - left


def word_costs(tokenizer: Tokenizer, corpus: Corpus) -> WordCosts:
    """The per-word counts of ``corpus`` by ``tokenizer``.

    An exact tokenizer's segment table already holds them (measured once,
    shared with its windows: no tokenizer call, which matters when counting
    is an HTTP round trip); any other tokenizer counts each distinct word
    once, after a space and alone.
    """
    table_of = getattr(tokenizer, "table", None)
    if callable(table_of):
        table = table_of(corpus)
        if isinstance(table, SegmentTable):
            words = corpus_words(table.text)
            spaced = [
                b - a
                for a, b in zip(table.offsets, [*table.offsets[1:], table.period], strict=True)
            ]
            return WordCosts.build(words, spaced, table.bare)
    words = corpus_words(corpus.text)
    distinct = list(dict.fromkeys(words))
    firsts = start_candidates(words)
    counts = _count_many(tokenizer, [" " + w for w in distinct] + firsts)
    spaced_of = dict(zip(distinct, counts[: len(distinct)], strict=True))
    bare_of = dict(zip(firsts, counts[len(distinct) :], strict=True))
    return WordCosts.build(words, [spaced_of[w] for w in words], [bare_of.get(w) for w in words])


def _count_many(tokenizer: Tokenizer, texts: list[str]) -> list[int]:
    count_many = getattr(tokenizer, "count_many", None)
    if callable(count_many):
        return list(count_many(texts))
    return [tokenizer.count(t) for t in texts]


@dataclass(frozen=True)
class Block:
    """Hash id ``h``'s text: its segments, its text, its cost after a space, and
    ``delta``: what it costs more (or less) as the prompt's first block."""

    segments: tuple[Segment, ...]
    text: str
    cost: int
    delta: int


class BlockPrompts:
    """Builds the prompt of a row from its ``hash_ids`` and length; caches block texts.

    Thread-safe and picklable (the cache is left behind).
    """

    def __init__(self, tokenizer: Tokenizer, corpus: Corpus, seed: int, block_size: int) -> None:
        self.tokenizer = tokenizer
        self.corpus = corpus
        self.seed = seed
        self.block_size = block_size
        self._words: WordCosts | None = None
        self._blocks: OrderedDict[int, Block] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def words(self) -> WordCosts:
        if self._words is None:
            with self._lock:
                if self._words is None:
                    self._words = word_costs(self.tokenizer, self.corpus)
        return self._words

    def block(self, hash_id: int) -> Block:
        """The text of hash id ``hash_id``: the same for every row (cached, LRU)."""
        with self._lock:
            cached = self._blocks.get(hash_id)
            if cached is not None:
                self._blocks.move_to_end(hash_id)
                return cached
        words = self.words
        rng = random.Random(f"{self.seed}:block:{hash_id}")
        segments, cost = words.fill(rng, self.block_size, head=True, first=False)
        p = segments[0][0]
        made = Block(
            segments=tuple(segments),
            text=words.text_of(segments),
            cost=cost,
            delta=words.alone(p, True) - words.alone(p, False),
        )
        with self._lock:
            self._blocks[hash_id] = made
            if len(self._blocks) > CACHED_BLOCKS:
                self._blocks.popitem(last=False)
        return made

    def prompt(self, hash_ids: Sequence[int], n: int, key: str) -> tuple[str, int]:
        """The prompt of ``n`` tokens over ``hash_ids``, and its count by this arithmetic.

        ``key`` seeds the row's own filler (past its blocks, or closing the
        gap in a partial last block), so it is fresh per row.
        """
        words = self.words
        pieces: list[str] = []
        left = n
        first = True
        for h in hash_ids:
            if left <= 0:
                break
            block = self.block(h)
            cost = block.cost + (block.delta if first else 0)
            if cost <= left:
                pieces.append(block.text)
                left -= cost
                first = False
                continue
            segments, used = words.truncate(block.segments, left, first)
            if segments:
                pieces.append(words.text_of(segments))
                left -= used
                first = False
            break
        if left > 0:
            rng = random.Random(f"{self.seed}:{key}")
            segments, used = words.fill(rng, left, head=first, first=first)
            pieces.append(words.text_of(segments))
            left -= used
        return " ".join(pieces), n - left

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock", None)
        state["_blocks"] = OrderedDict()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
