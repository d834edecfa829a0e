"""How workloads count and cut tokens: the model's own tokenizer, else the approximation.

The methodology draft asks every report to name the tokenizer used for the
stated token counts (``describe()["tokenizer"]`` is that label). The
default is the project's approximate tokenizer (:mod:`pytest_llmperf.tokens`),
which the embedded simulator also uses, so against the simulator a prompt's
``usage.prompt_tokens`` equals its target. Against a real server the session
resolves the model's own tokenizer once (``--llm-tokenizer``, see
:mod:`.session_tokenizer`) and the load generator hands it to every workload;
a test may still name one per workload (``llm_workload(..., tokenizer=...)``):

- ``"approximate"`` (or nothing): the approximation;
- a path to a Hugging Face tokenizer folder or ``tokenizer.json``
  (:mod:`.hf_tokenizer`, needs the ``tokenizers`` extra);
- a tiktoken encoding name such as ``"cl100k_base"``, used when tiktoken is
  installed *and* the encoding is cached locally (nothing downloads at run
  time); otherwise the workload falls back to the approximation and its
  label says why;
- a :class:`Tokenizer` instance (the session's, say), used as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.tokens import count_tokens
from pytest_llmperf.workloads.corpus import Corpus
from pytest_llmperf.workloads.hf_tokenizer import load_hf_tokenizer, looks_like_path
from pytest_llmperf.workloads.tiktoken_tokenizer import (
    TiktokenTokenizer,
    TiktokenUnavailable,
    load_offline,
)
from pytest_llmperf.workloads.tokenizer_identity import approximate_identity, identity_of

__all__ = [
    "APPROXIMATE",
    "SERVER",
    "ApproximateTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "bind_api",
    "describe_tokenizer",
    "framing_tokens",
    "is_tokenizer",
    "resolve_tokenizer",
]

APPROXIMATE = "approximate"
SERVER = "server"
_APPROX_LABEL = "approximate (words and punctuation)"


class Tokenizer(Protocol):
    """Counts tokens and cuts prose windows of an exact token count.

    ``framing(roles)`` (optional: see :func:`framing_tokens`) is how many
    tokens the server adds to a prompt of messages with those roles (a chat
    template, a BOS token), so a workload can size content to a requested
    total the server will count. ``identity`` (optional:
    :mod:`.tokenizer_identity`) is what baselines compare instead of the label.
    """

    @property
    def label(self) -> str:
        """Which tokenizer this is, for the report (``describe()["tokenizer"]``)."""
        ...

    def count(self, text: str) -> int: ...

    def window(self, corpus: Corpus, start: int, n: int) -> str: ...


@dataclass(frozen=True)
class ApproximateTokenizer:
    """The shared approximation: one token per word run or punctuation mark.

    It is also the embedded simulator's tokenizer, which counts a chat prompt
    as the sum of its messages' contents: nothing is added around a prompt.
    """

    label: str = _APPROX_LABEL

    def count(self, text: str) -> int:
        return count_tokens(text)

    def window(self, corpus: Corpus, start: int, n: int) -> str:
        return corpus.window(start, n)

    def framing(self, roles: Sequence[str] = ("user",)) -> int:
        return 0

    def for_api(self, api: str | None) -> ApproximateTokenizer:
        return self

    @property
    def identity(self) -> dict[str, Any]:
        """The same whatever the label says (the simulator's, a fallback's reason)."""
        return approximate_identity()


def describe_tokenizer(tokenizer: Tokenizer) -> dict[str, Any]:
    """A workload's ``describe()`` entries for its tokenizer: ``tokenizer`` (the label, for
    the reader) and ``tokenizer_identity`` (what baselines and history compare)."""
    return {"tokenizer": tokenizer.label, "tokenizer_identity": identity_of(tokenizer)}


def is_tokenizer(value: object) -> TypeGuard[Tokenizer]:
    """Whether ``value`` can size prompts (has ``label``, ``count`` and ``window``)."""
    return all(hasattr(value, a) for a in ("label", "count", "window")) and not isinstance(
        value, (str, bytes)
    )


def framing_tokens(tokenizer: Tokenizer, roles: Sequence[str] = ("user",)) -> int:
    """Tokens the server adds around messages with ``roles`` (0 for tokenizers that cannot say)."""
    framing = getattr(tokenizer, "framing", None)
    return int(framing(tuple(roles))) if callable(framing) else 0


# The framing each API's prompt gets on the server: the Responses and Messages APIs
# render the chat template as chat does; an embeddings input gets the special tokens
# (BOS, CLS/SEP) as a completions prompt does, once per input.
_FRAMING_OF_API = {"responses": "chat", "messages": "chat"}


def bind_api(tokenizer: Tokenizer, api: str | None) -> Tokenizer:
    """``tokenizer`` accounting for ``api``'s framing (chat template or BOS), where it can."""
    for_api = getattr(tokenizer, "for_api", None)
    if not callable(for_api):
        return tokenizer
    bound: Tokenizer = for_api(_FRAMING_OF_API.get(api, api) if api is not None else None)
    return bound


def resolve_tokenizer(name: Any) -> Tokenizer:
    """The tokenizer ``name`` asks for, or the approximation (its label says why)."""
    if name in (None, "", APPROXIMATE):
        return ApproximateTokenizer()
    if is_tokenizer(name):
        return name
    if isinstance(name, Path):
        name = str(name)
    if not isinstance(name, str):
        raise LlmPerfUsageError(
            "tokenizer must be a tiktoken encoding name, a tokenizer folder or file path, "
            f"or a Tokenizer, got {name!r}"
        )
    if name == SERVER:
        raise LlmPerfUsageError(
            "tokenizer='server' needs the session's endpoint: use --llm-tokenizer=server"
        )
    if looks_like_path(name):
        return load_hf_tokenizer(name)
    return _load_tiktoken(name)


@lru_cache(maxsize=8)
def _load_tiktoken(name: str) -> Tokenizer:
    try:
        encoding = load_offline(name)
    except TiktokenUnavailable as exc:  # stay usable, say so
        why = str(exc)
        if "not installed" in why:
            why = "requested but tiktoken is missing"
            return ApproximateTokenizer(f"{_APPROX_LABEL}; {name} {why}")
        return ApproximateTokenizer(f"{_APPROX_LABEL}; {name} unavailable offline ({why})")
    return TiktokenTokenizer(encoding, name)
