"""KV cache of fixed-size blocks with prefix caching, as vLLM manages it.

Only block *counts* and block *hashes* matter to latency, so the cache keeps
no block ids: a free pool of content-less blocks (a counter), a map from the
chained hash of a full prompt block to its reference count, and an LRU list of
hashed blocks nobody references (they are free, but reusable by a later
request with the same prefix until evicted). Allocation is transactional: it
checks the whole need first and either takes every block or changes nothing.
Conservation, ``allocated + free == total``, holds after every operation.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Protocol

__all__ = ["NEVER", "KVCache", "KVHolder", "prompt_block_hashes"]


def prompt_block_hashes(
    tokens: list[str], block_size: int, adapter: str | None = None
) -> tuple[int, ...]:
    """Chained hashes of the prompt's full blocks: block i's hash covers blocks 0..i.

    Chaining makes a hash identify a whole prefix, so two prompts share a
    cached block only if everything before it is identical too. A LoRA
    ``adapter``'s blocks start from a chain of their own: its KV differs from the
    base model's for the same tokens, so vLLM keys its prefix cache by adapter too.
    """
    out = []
    h = 0 if adapter is None else hash(("lora", adapter))
    for start in range(0, len(tokens) - block_size + 1, block_size):
        h = hash((h, tuple(tokens[start : start + block_size])))
        out.append(h)
    return tuple(out)


NEVER = 1 << 62


class KVHolder(Protocol):
    """What the cache keeps on each request (the engine's Request)."""

    blocks: int  # blocks held: shared (hashed) + private
    held: list[int]  # hashes this request holds a reference on, a prefix of block_hashes
    block_hashes: tuple[int, ...]  # chained hashes of the full blocks of prompt + output
    pub_at: int  # computed tokens at which publishing the next block is possible


class KVCache:
    """Block accounting for one engine."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True) -> None:
        self.total = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.free_uncached = num_blocks
        self.refs: dict[int, int] = {}  # hash -> reference count (0 = free, in lru)
        self.lru: OrderedDict[int, None] = OrderedDict()  # free hashed blocks, oldest first
        self.allocated = 0
        self.hit_tokens = 0
        self.query_tokens = 0

    @property
    def free(self) -> int:
        return self.free_uncached + len(self.lru)

    @property
    def usage(self) -> float:
        return self.allocated / self.total

    def match_prefix(self, req: KVHolder, num_tokens: int) -> int:
        """Leading prompt blocks already cached; leaves at least one token to compute."""
        hashes = req.block_hashes
        self.query_tokens += num_tokens
        if not self.prefix_caching or not hashes:
            return 0
        limit = min(len(hashes), (num_tokens - 1) // self.block_size)
        refs = self.refs
        k = 0
        while k < limit and hashes[k] in refs:
            k += 1
        self.hit_tokens += k * self.block_size
        return k

    def allocate_new(self, req: KVHolder, hit_blocks: int, num_tokens: int) -> bool:
        """Admit ``req`` (holding nothing) with its first ``hit_blocks`` cached and
        room for ``num_tokens`` more. All or nothing."""
        bs = self.block_size
        hashes = req.block_hashes[:hit_blocks]
        refs = self.refs
        reclaimed = sum(1 for h in hashes if refs[h] == 0)
        new_private = (hit_blocks * bs + num_tokens + bs - 1) // bs - hit_blocks
        if new_private > self.free - reclaimed:
            return False
        lru = self.lru
        for h in hashes:
            r = refs[h]
            if r == 0:
                del lru[h]
                self.allocated += 1
            refs[h] = r + 1
        req.held = list(hashes)
        req.pub_at = 0
        req.blocks = hit_blocks
        self._take(req, new_private)
        return True

    def grow(self, req: KVHolder, need: int) -> bool:
        """Give a running request ``need`` more private blocks. All or nothing."""
        if need > self.free_uncached + len(self.lru):
            return False
        self._take(req, need)
        return True

    def _take(self, req: KVHolder, n: int) -> None:
        take_fresh = min(n, self.free_uncached)
        self.free_uncached -= take_fresh
        lru = self.lru
        refs = self.refs
        for _ in range(n - take_fresh):
            h, _none = lru.popitem(last=False)  # evict the least recently freed cached block
            del refs[h]
        self.allocated += n
        req.blocks += n

    def publish(self, req: KVHolder, computed_tokens: int) -> None:
        """Make the request's fully computed blocks (prompt, then generated text)
        findable by later requests, e.g. the next turn of a conversation."""
        hashes = req.block_hashes
        if not self.prefix_caching:
            req.pub_at = NEVER
            return
        held = req.held
        refs = self.refs
        bs = self.block_size
        upto = min(len(hashes), computed_tokens // bs)
        i = len(held)
        while i < upto:
            h = hashes[i]
            if h in refs:  # computed twice concurrently: keep ours private, end the chain
                req.pub_at = NEVER
                return
            refs[h] = 1
            held.append(h)  # a private block becomes a shared one: counts unchanged
            i += 1
        req.pub_at = (i + 1) * bs if i < len(hashes) else NEVER

    def release(self, req: KVHolder) -> None:
        """Free everything ``req`` holds; its hashed blocks stay reusable (LRU)."""
        refs = self.refs
        lru = self.lru
        held = req.held
        for h in reversed(held):  # tail blocks first, so they are evicted first
            r = refs[h] - 1
            refs[h] = r
            if r == 0:
                lru[h] = None
                self.allocated -= 1
        private = req.blocks - len(held)
        self.free_uncached += private
        self.allocated -= private
        req.blocks = 0
        req.held = []
        req.pub_at = 0

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix, as vLLM's ``BlockPool.reset_prefix_cache`` does:
        only when no block is in use (else False, nothing changed), so no running request
        loses a block it holds. The free hashed blocks become plain free blocks; the hit
        and query counters keep counting (Prometheus counters never go back)."""
        if self.allocated:
            return False
        self.free_uncached += len(self.lru)
        self.lru.clear()
        self.refs.clear()
        return True

    def check(self, holders: Iterable[KVHolder]) -> None:
        """Full consistency check (debug): conservation and reference counts."""
        assert self.allocated + self.free == self.total, (self.allocated, self.free, self.total)
        assert 0 <= self.free_uncached <= self.total
        counted: dict[int, int] = {}
        private = 0
        for r in holders:
            for h in r.held:
                counted[h] = counted.get(h, 0) + 1
            private += r.blocks - len(r.held)
            assert r.blocks >= len(r.held)
        for h, n in self.refs.items():
            assert n == counted.get(h, 0), (h, n, counted.get(h, 0))
            assert (n == 0) == (h in self.lru)
        assert len(self.lru) == sum(1 for n in self.refs.values() if n == 0)
        assert self.allocated == private + sum(1 for n in self.refs.values() if n > 0)
