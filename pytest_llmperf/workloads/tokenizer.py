"""How workloads count and cut tokens: a real tokenizer when installed, else the approximation.

The methodology draft asks every report to name the tokenizer used for the
stated token counts. The default is the project's approximate tokenizer
(:mod:`pytest_llmperf.tokens`), which the embedded simulator also uses, so
against the simulator a prompt's ``usage.prompt_tokens`` equals its target.
``tokenizer="cl100k_base"`` (any tiktoken encoding name) sizes prompts with
tiktoken when it is installed *and* its encoding is already cached locally
(nothing downloads at run time); otherwise the workload falls back to the
approximation and ``describe()`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.tokens import count_tokens
from pytest_llmperf.workloads.corpus import Corpus

__all__ = [
    "APPROXIMATE",
    "ApproximateTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "resolve_tokenizer",
]

APPROXIMATE = "approximate"
_APPROX_LABEL = "approximate (words and punctuation)"


class Tokenizer(Protocol):
    """Counts tokens and cuts prose windows of an exact token count."""

    label: str

    def count(self, text: str) -> int: ...

    def window(self, corpus: Corpus, start: int, n: int) -> str: ...


@dataclass(frozen=True)
class ApproximateTokenizer:
    """The shared approximation: one token per word run or punctuation mark."""

    label: str = _APPROX_LABEL

    def count(self, text: str) -> int:
        return count_tokens(text)

    def window(self, corpus: Corpus, start: int, n: int) -> str:
        return corpus.window(start, n)


class TiktokenTokenizer:
    """A tiktoken encoding; windows are cut from the corpus and trimmed to ``n`` tokens."""

    def __init__(self, encoding: Any, name: str) -> None:
        self._encoding = encoding
        self.label = f"tiktoken {name} (vocabulary {encoding.n_vocab})"

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def window(self, corpus: Corpus, start: int, n: int) -> str:
        if n <= 0:
            return ""
        # BPE packs prose a little denser than the approximation: over-cut, then trim.
        ids = self._encoding.encode(corpus.window(start, 2 * n + 8), disallowed_special=())
        return self._encoding.decode(ids[:n])


def resolve_tokenizer(name: Any) -> Tokenizer:
    """The tokenizer ``name`` asks for, or the approximation (its label says why)."""
    if name in (None, "", APPROXIMATE):
        return ApproximateTokenizer()
    if not isinstance(name, str):
        raise LlmPerfUsageError(f"tokenizer must be an encoding name string, got {name!r}")
    return _load(name)


@lru_cache(maxsize=8)
def _load(name: str) -> Tokenizer:
    try:
        import tiktoken
    except ImportError:
        return ApproximateTokenizer(f"{_APPROX_LABEL}; {name} requested but tiktoken is missing")
    try:
        encoding = tiktoken.get_encoding(name)
    except ValueError:
        raise LlmPerfUsageError(f"tokenizer {name!r} is not a tiktoken encoding name") from None
    except Exception as exc:  # not cached locally and no network: stay usable, say so
        reason = f"{type(exc).__name__}"
        return ApproximateTokenizer(f"{_APPROX_LABEL}; {name} unavailable offline ({reason})")
    return TiktokenTokenizer(encoding, name)
