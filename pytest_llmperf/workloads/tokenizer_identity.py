"""Which tokenizer sized a workload's prompts, as an identity to compare, not prose.

A workload names its tokenizer twice: ``tokenizer`` is the label for the
reader ("approximate (words and punctuation): the embedded simulator's own
tokenizer", "the server's /tokenize (model sim-fixed); chat template: +0 tokens
per user message"), and ``tokenizer_identity`` is what comparisons read
(baselines, history): ``{"kind", "tokens_sha256", "framing"}``.

- ``kind`` says what counted (``approximate``, ``huggingface``, ``tiktoken``,
  ``server``), for the reader;
- ``tokens_sha256`` is the hash of the token strings the tokenizer cuts a
  fixed probe text (:data:`PROBE_TEXT`: prose, numbers, punctuation, accents,
  CJK, code, a URL) into, as a tokenizer shows them (``Ġ`` or ``▁`` for a
  leading space): the same tokenizer reached another way cuts the same
  strings. The embedded simulator's ``/tokenize`` *is* the approximation, so
  the simulator started by the plugin (the approximation, counted locally) and
  the same simulator reached by URL (its ``/tokenize``) give one hash; a model's
  ``tokenizer.json`` read locally and the vLLM serving it give one too;
- ``framing`` is the tokens the server adds around one user message (chat
  template, BOS) that the workload took out of each prompt's budget.

Two identities name the same tokenizer when the hash and the framing agree:
the prompts they size have the lengths the server counts alike (their text may
be cut from other places of the corpus: a local tokenizer and a server's
calibrated tables pick window starts differently). The kinds may differ (that
is the point).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.tokens import token_pieces, token_string

__all__ = [
    "APPROXIMATE_KIND",
    "PROBE_TEXT",
    "approximate_identity",
    "identity_of",
    "make_identity",
    "same_tokenizer",
    "tokens_sha256",
]

APPROXIMATE_KIND = "approximate"
# Cut by every tokenizer the same way only if it is the same tokenizer: prose, a number
# with separators, punctuation runs, accents, CJK, code with operators, a URL, tabs and
# a newline (some tokenizers merge whitespace, some do not).
PROBE_TEXT = (
    "Tokenizer identity probe: the quick brown fox jumps over 12,345.67 lazy dogs!!\n"
    "Naïve café owners—déjà vu—said «ça va?» 日本語のテキスト 😀\t"
    "def f(x): return x**2 >= 0x1F  # https://example.org/a?b=c&d=e"
)


def tokens_sha256(strings: Sequence[str]) -> str:
    """The hash of a tokenizer's token strings of :data:`PROBE_TEXT` (16 hex digits)."""
    text = json.dumps(list(strings), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def make_identity(kind: str, strings_sha256: str, framing: int) -> dict[str, Any]:
    """``{"kind", "tokens_sha256", "framing"}`` (plain JSON: it goes into reports)."""
    return {"kind": kind, "tokens_sha256": strings_sha256, "framing": int(framing)}


def approximate_identity() -> dict[str, Any]:
    """The approximation's identity: its tokens shown as the simulator's ``/tokenize``
    shows them, nothing added around a prompt."""
    strings = [token_string(p) for p in token_pieces(PROBE_TEXT)]
    return make_identity(APPROXIMATE_KIND, tokens_sha256(strings), 0)


def identity_of(tokenizer: Any) -> dict[str, Any] | None:
    """``tokenizer``'s identity, None when it cannot say (a tokenizer of the user's own
    without ``identity``, a server whose ``/tokenize`` gives no token strings)."""
    found = getattr(tokenizer, "identity", None)
    return dict(found) if isinstance(found, Mapping) else None


def same_tokenizer(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool | None:
    """Whether identities ``a`` and ``b`` name the same tokenizer (same token strings of
    the probe, same framing); None when either is unknown."""
    if not a or not b or not a.get("tokens_sha256") or not b.get("tokens_sha256"):
        return None
    return a["tokens_sha256"] == b["tokens_sha256"] and a.get("framing") == b.get("framing")
