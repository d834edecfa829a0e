"""KV cache of fixed-size blocks with prefix caching (filled in below)."""

from __future__ import annotations

__all__ = ["prompt_block_hashes"]


def prompt_block_hashes(tokens: list[str], block_size: int) -> tuple[int, ...]:
    """Chained hashes of the prompt's full blocks: block i's hash covers blocks 0..i.

    Chaining makes a hash identify a whole prefix, so two prompts share a
    cached block only if everything before it is identical too.
    """
    out = []
    h = 0
    for start in range(0, len(tokens) - block_size + 1, block_size):
        h = hash((h, tuple(tokens[start : start + block_size])))
        out.append(h)
    return tuple(out)
