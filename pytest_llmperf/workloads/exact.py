"""What every exact tokenizer shares: exact windows, and the tokens a server adds around a prompt.

A requested input length means what the server counts (``usage.prompt_tokens``).
The server counts more than the prompt's text: a chat template wraps each
message in role headers and end-of-turn markers, and a completions prompt
gets a BOS token when the tokenizer adds one. :meth:`ExactTokenizer.framing`
measures that overhead once per message shape, so workloads can give the
content ``n`` minus it. Subclasses say how to count text
(:meth:`~ExactTokenizer._count_many`), how many tokens the server counts for
a list of chat messages (:meth:`~ExactTokenizer._chat_count`) and what a
completions prompt gets added (:meth:`~ExactTokenizer._special_count`).

Instances must pickle: ``--llm-workers`` ships a run's workload parameters,
tokenizer included, to worker processes. Everything measured (tables,
counts, overheads) travels with the pickle, so a worker repeats no work.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.workloads.corpus import Corpus, default_corpus
from pytest_llmperf.workloads.segments import SegmentTable
from pytest_llmperf.workloads.tokenizer_identity import PROBE_TEXT, make_identity, tokens_sha256

__all__ = ["CHAT", "COMPLETIONS", "EMBEDDINGS", "VERIFY_MAX_TOKENS", "ExactTokenizer"]

CHAT = "chat"
COMPLETIONS = "completions"
EMBEDDINGS = "embeddings"  # each input framed like a completions prompt: special tokens
# Windows up to this many tokens are re-encoded to check they are exact (local
# tokenizers only: ~1 µs per token on the sample-building path); longer ones
# rely on the segment arithmetic, which the tests check against real tokenizers.
VERIFY_MAX_TOKENS = 1024
_PROBE_TOKENS = 12  # content of the placeholder messages that measure a template


class ExactTokenizer:
    """Base of the tokenizers that match a model's own (local files, tiktoken, the server).

    ``api`` is what :meth:`framing` accounts for: ``"chat"`` (the template),
    ``"completions"`` (BOS and the like) or ``None`` (nothing: the
    tokenizer is used outside a session). :meth:`for_api` binds it.
    """

    name: str = "exact"
    verifies: bool = True  # may re-encode a window to check it (not when counting is HTTP)
    start_limit: int | None = None  # how many distinct words may start a window (None: all)

    def __init__(self) -> None:
        self.api: str | None = None
        self._tables: dict[str, SegmentTable] = {}
        self._framing: dict[tuple[str, ...], int | None] = {}
        self._lock = threading.Lock()
        self._probe_sha: str | None = None  # tokenizer_identity's hash, measured once

    # -- what subclasses provide -----------------------------------------------------

    def _count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, without special tokens."""
        raise NotImplementedError

    def _chat_count(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        """Tokens the server counts for ``messages`` with the generation prompt (None: unknown)."""
        return None

    def _special_count(self) -> int:
        """Tokens the tokenizer adds around a completions prompt (BOS, ...)."""
        return 0

    def _describe(self) -> str:
        """Which tokenizer this is, for :attr:`label` (the report names it)."""
        return self.name

    def _token_strings(self, text: str) -> list[str] | None:
        """Each token of ``text`` as the tokenizer shows it (None: it cannot say)."""
        return None

    # -- the Tokenizer protocol ------------------------------------------------------

    @property
    def label(self) -> str:
        text = self._describe()
        if self.api == CHAT:
            overhead = self.framing(("user",))
            text += (
                f"; chat template: +{overhead} tokens per user message"
                if self._framing.get(("user",)) is not None
                else "; no chat template known: template tokens not counted"
            )
        elif self.api == COMPLETIONS:
            text += f"; special tokens: +{self._special_count()} per prompt"
        elif self.api == EMBEDDINGS:
            text += f"; special tokens: +{self._special_count()} per input"
        return text

    @property
    def identity(self) -> dict[str, Any] | None:
        """What comparisons read (:mod:`.tokenizer_identity`): the hash of the probe
        text's token strings and the framing of one user message; None when the token
        strings cannot be had."""
        if getattr(self, "_probe_sha", None) is None:
            strings = self._token_strings(PROBE_TEXT)
            if strings is None:
                return None
            self._probe_sha = tokens_sha256(strings)
        assert self._probe_sha is not None
        return make_identity(self.name, self._probe_sha, self.framing(("user",)))

    def count(self, text: str) -> int:
        return self._count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return self._count_many(list(texts)) if texts else []

    def window(self, corpus: Corpus, start: int, n: int) -> str:
        """Text cut from ``corpus`` near ``start`` that this tokenizer counts as exactly ``n``."""
        if n <= 0:
            return ""
        table = self.table(corpus)
        best = ""
        for tries, text in enumerate(table.candidates(start, n)):
            if not self.verifies or n > VERIFY_MAX_TOKENS or self.count(text) == n:
                return text
            best = best or text
            if tries >= 16:
                break
        return best or self._fallback(table, start, n)

    def framing(self, roles: Sequence[str] = ("user",)) -> int:
        """Tokens the server adds to a prompt of messages with these ``roles`` (0: unknown).

        Measured once per shape: placeholder messages of real corpus text,
        counted as the server would (chat: the template rendered; completions:
        earlier turns as lines before the prompt, as the client sends them,
        and the tokenizer's special tokens), less their content's own tokens.
        """
        if self.api == EMBEDDINGS:
            return self._special_count()
        if self.api not in (CHAT, COMPLETIONS):
            return 0
        key = tuple(roles) or ("user",)
        if key not in self._framing:
            contents = [
                self.window(default_corpus(), 97 * k + 11, _PROBE_TOKENS) for k in range(len(key))
            ]
            if self.api == CHAT:
                messages = [{"role": r, "content": c} for r, c in zip(key, contents, strict=True)]
                total = self._chat_count(messages)
            else:  # the client sends earlier turns as lines before the prompt
                total = self.count("\n".join(contents)) + self._special_count()
            self._framing[key] = None if total is None else total - sum(self.count_many(contents))
        return self._framing[key] or 0

    def for_api(self, api: str | None) -> ExactTokenizer:
        """This tokenizer accounting for ``api``'s framing (shares what was measured)."""
        if api == self.api:
            return self
        other = copy.copy(self)
        other.api = api
        other._framing = {}
        return other

    # -- tables ----------------------------------------------------------------------

    def table(self, corpus: Corpus) -> SegmentTable:
        """The segment table of ``corpus`` for this tokenizer (measured once)."""
        table = self._tables.get(corpus.text)
        if table is None:
            with self._lock:
                table = self._tables.get(corpus.text)
                if table is None:
                    table = self._measure(corpus.text)
                    self._tables[corpus.text] = table
        return table

    def _measure(self, text: str) -> SegmentTable:
        return SegmentTable.measure(text, self._count_many, limit=self.start_limit)

    def _fallback(self, table: SegmentTable, start: int, n: int) -> str:
        """No word boundary lands on ``n`` (tiny ``n``): the nearest count from below."""
        words = table.text.split()
        out = words[start % len(words)]
        for k in range(1, len(words)):
            longer = f"{out} {words[(start + k) % len(words)]}"
            if self.verifies and self.count(longer) > n:
                break
            out = longer
            if not self.verifies:
                break
        return out

    # -- pickling ----------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
