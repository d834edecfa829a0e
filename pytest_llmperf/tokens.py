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

__all__ = ["TOKEN_PATTERN", "count_tokens", "split_tokens"]

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Number of approximate tokens in ``text``."""
    return sum(1 for _ in TOKEN_PATTERN.finditer(text))


def split_tokens(text: str) -> list[str]:
    """The approximate tokens of ``text``, in order."""
    return TOKEN_PATTERN.findall(text)
