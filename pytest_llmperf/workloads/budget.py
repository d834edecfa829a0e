"""Sizing a prompt's content so the server counts the requested total.

A requested input length means what the server counts (``usage.prompt_tokens``):
the content's tokens plus what the server adds around it, a chat template's
role headers and end-of-turn markers, or a BOS token (the tokenizer's
:func:`~pytest_llmperf.workloads.tokenizer.framing_tokens`). So the content
gets the total minus that overhead. A request smaller than the overhead
cannot be met: it is sent with a one-token prompt, the sample keeps the
requested total as its ``input_tokens``, and the workload's ``describe()``
says so (the report shows it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_llmperf.workloads.corpus import Corpus, default_corpus
from pytest_llmperf.workloads.tokenizer import Tokenizer

__all__ = ["MIN_CONTENT_TOKENS", "content_tokens", "describe_overhead", "joint_cost"]

MIN_CONTENT_TOKENS = 1


def content_tokens(total: int, overhead: int) -> int:
    """Tokens for the content of a prompt the server should count as ``total``."""
    return max(MIN_CONTENT_TOKENS, total - overhead)


def describe_overhead(overhead: int, smallest_total: int) -> dict[str, Any]:
    """The ``describe()`` entries about the server's overhead (none when there is none)."""
    if overhead <= 0:
        return {}
    out: dict[str, Any] = {"prompt_overhead_tokens": overhead}
    floor = overhead + MIN_CONTENT_TOKENS
    if smallest_total < floor:
        out["short_prompts"] = (
            f"requests for fewer than {floor} input tokens are sent as a "
            f"{MIN_CONTENT_TOKENS}-token prompt: the server counts {floor}, not the request"
        )
    return out


def joint_cost(
    tokenizer: Tokenizer, parts: Sequence[str | None], corpus: Corpus | None = None
) -> int:
    """Tokens of ``parts`` joined, beyond the windows that fill their ``None`` slots.

    E.g. ``joint_cost(tok, ["Document:\\n", None, "\\n\\nQuestion..."])`` is what a
    header and a question add to a document window, junctions included
    (``"\\n\\n"`` before a word is not always the tokens of ``"\\n\\n"`` alone).
    Measured once with real windows in the slots.
    """
    corpus = corpus or default_corpus()
    windows = [tokenizer.window(corpus, 53 * k + 7, 24) for k in range(len(parts))]
    filled = [w if p is None else p for p, w in zip(parts, windows, strict=True)]
    holes = [w for p, w in zip(parts, windows, strict=True) if p is None]
    return tokenizer.count("".join(filled)) - sum(tokenizer.count(w) for w in holes)
