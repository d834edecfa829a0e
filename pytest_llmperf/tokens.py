"""The approximate tokenizer shared by the workloads and the simulator.

Real tokenizers are optional extras (nothing downloads at run time), so prompt
sizes need a stand-in that every part of the project agrees on: the workloads
size prompts with it and the embedded simulator counts them with it, so the
simulator's ``usage.prompt_tokens`` equals the workload's target exactly.

One token is a run of word characters or a single punctuation mark. For
English prose this lands within about 25% of BPE tokenizers (cl100k and
Llama-3 count a little fewer); the report states that this approximation was
used whenever the server did not return ``usage``.
"""

from __future__ import annotations

import re

__all__ = [
    "SPACE_MARK",
    "TOKEN_PATTERN",
    "count_tokens",
    "split_tokens",
    "token_pieces",
    "token_string",
]

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
SPACE_MARK = "Ġ"  # byte-level BPE's mark of a leading space


def count_tokens(text: str) -> int:
    """Number of approximate tokens in ``text``."""
    return sum(1 for _ in TOKEN_PATTERN.finditer(text))


def split_tokens(text: str) -> list[str]:
    """The approximate tokens of ``text``, in order."""
    return TOKEN_PATTERN.findall(text)


def token_pieces(text: str) -> list[str]:
    """The approximate tokens of ``text``, each with one leading space when whitespace
    precedes it: the text each token stands for (the simulator's ``/tokenize``)."""
    return [
        " " + m.group() if m.start() and text[m.start() - 1].isspace() else m.group()
        for m in TOKEN_PATTERN.finditer(text)
    ]


def token_string(piece: str) -> str:
    """How a tokenizer shows ``piece``: a leading space as ``Ġ`` (byte-level BPE)."""
    return SPACE_MARK + piece[1:] if piece.startswith(" ") else piece
